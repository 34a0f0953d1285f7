package main

// The impls this worker serves: every impl of locktest. The build over a
// patched runtime (run/clockrate.go) swaps this file, by its name, for
// one that imports the package of the run's impl alone.
import _ "github.com/locktest/locktest/impls/all"
