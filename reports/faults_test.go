package reports

// The reports read what a nemesis op means (which fault it injects, whether
// it heals one) from the fault registry, which the nemesis's faults fill
// when their package is linked in, as it is in locktest.
import _ "github.com/locktest/locktest/nemesis"
