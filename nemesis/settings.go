package nemesis

import (
	"fmt"
	"time"
)

// positive refuses a duration setting that is not positive, naming it
// ("fault window") in the error.
func positive(what string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s must be positive, got %v", what, d)
	}
	return nil
}

// clockEnv checks the settings of the faults that move a clock, a node's
// or a worker's: a jump and a window to keep it for.
func clockEnv(env Env) error {
	if env.ClockBump == 0 || env.Window <= 0 {
		return fmt.Errorf("clock bump must be non-zero and the fault window positive, got %v and %v", env.ClockBump, env.Window)
	}
	return nil
}
