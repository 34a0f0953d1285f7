// Package rate sets the rate of the running program's monotonic clock,
// in a program built as package clockrate says (clockrate.BuildFlags);
// in any other build, Set returns ErrNotBuilt.
package rate

import (
	"errors"
	"time"
)

// ErrNotBuilt is Set's error in a program built without the patched
// runtime.
var ErrNotBuilt = errors.New("this program was not built with a clock that can run at a rate (clockrate.BuildFlags)")

// Set makes the program's monotonic clock, with its timers and sleeps,
// run at factor times the real one from now on (2: twice as fast; 0.5:
// half as fast; 1: the real rate again, from where the clock is), never
// going back. factor must be positive. One caller at a time.
func Set(factor float64) error {
	if !(factor > 0) {
		return errors.New("a clock rate must be positive")
	}
	return set(factor)
}

// SetWall makes time.Now's wall reading d away from the real wall clock
// from now on (0: the real one again), as a change of the system's time
// would for this program alone; its monotonic clock, and so every
// duration it measures, is left as it is.
func SetWall(d time.Duration) error { return setWall(int64(d)) }
