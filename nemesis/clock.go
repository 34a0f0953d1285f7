package nemesis

import (
	"fmt"
	"time"
)

// clockEnv checks the settings of the faults that move a node's clock.
func clockEnv(env Env) error {
	if env.ClockBump == 0 || env.Window <= 0 {
		return fmt.Errorf("clock bump must be non-zero and the fault window positive, got %v and %v", env.ClockBump, env.Window)
	}
	return nil
}

// signed renders a clock jump with its sign, "+4s" or "-4s", for targets.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
