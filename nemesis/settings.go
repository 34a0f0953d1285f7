package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// positive refuses duration settings of which one is not positive, naming
// them ("fault window", "delay and fault window") and their values in the
// error.
func positive(what string, ds ...time.Duration) error {
	if !slices.ContainsFunc(ds, func(d time.Duration) bool { return d <= 0 }) {
		return nil
	}
	got := make([]string, len(ds))
	for i, d := range ds {
		got[i] = d.String()
	}
	return fmt.Errorf("%s must be positive, got %s", what, strings.Join(got, " and "))
}

// clockEnv checks the settings of the faults that move a clock, a node's
// or a worker's: a jump and a window to keep it for.
func clockEnv(env Env) error {
	if env.ClockBump == 0 || env.Window <= 0 {
		return fmt.Errorf("clock bump must be non-zero and the fault window positive, got %v and %v", env.ClockBump, env.Window)
	}
	return nil
}
