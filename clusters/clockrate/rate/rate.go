// Package rate sets the rate of the running program's monotonic clock,
// in a program built as package clockrate says (clockrate.BuildFlags);
// in any other build, Set returns ErrNotBuilt.
package rate

import "errors"

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
