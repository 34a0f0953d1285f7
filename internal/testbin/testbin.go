// Package testbin skips tests whose programs this machine lacks.
package testbin

import (
	"os/exec"
	"testing"
)

// Need skips the test unless every one of bins is on PATH, naming the
// first missing one and `make setup`, which installs them.
func Need(tb testing.TB, bins ...string) {
	tb.Helper()
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			tb.Skip(b + " not installed (make setup)")
		}
	}
}
