package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "clock-skew-client", Heal: "clock-unskew-client", Family: history.FamilyClock,
			Doc: "skews a worker's wall clock, as the impls that compute expiry from it read it, by ± --clock-bump for the window"},
		Settings: []string{"clock-bump", "clock-direction", "window"},
		Needs:    []Ability{NeedSkewClients},
		New:      newClockSkewClient,
		pins:     pinProcess,
	})
}

// newClockSkewClient skews one worker's wall clock — the clock source of
// the impls that compute expiry from the client's clock — by ±ClockBump,
// recorded as the duration; the heal unskews every worker it skewed that
// is still alive.
func newClockSkewClient(env Env) (Fault, error) {
	c := env.Clients.(SkewableClients)
	if err := clockEnv(env); err != nil {
		return nil, err
	}
	return env.undoEachProcess(Window.Of(env), "",
		func(_ context.Context, p int, v *history.Value, rng *rand.Rand) error {
			d := env.jump(rng)
			v.Targets[0] += signed(d)
			v.Duration = int64(d)
			if err := c.SetWallOffset(p, d); err != nil {
				return fmt.Errorf("%w: %v", errNotApplied, err)
			}
			return nil
		},
		func(_ context.Context, p int) (string, error) {
			// A worker that died since cannot be unskewed and needs no unskew.
			if c.SetWallOffset(p, 0) != nil {
				return "", nil
			}
			return procName(p), nil
		}), nil
}
