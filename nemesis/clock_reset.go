package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "clock-reset", Heal: "clock-reset-done", Family: history.FamilyClock,
			Doc: "sets every node's clock back to the host's: an explicit step of a schedule"},
		Needs:  []Ability{NeedClocks},
		New:    newClockReset,
		noPins: "it resets every node's clock",
	})
}

// clockReset sets every node's clock back to the host's: an explicit step in
// a scenario's schedule. Its heal does nothing.
type clockReset struct {
	kind
	env Env
}

func newClockReset(env Env) (Fault, error) {
	return &clockReset{env: env}, nil
}

func (f *clockReset) Duration() time.Duration { return 0 }

func (f *clockReset) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	var v history.Value
	for _, n := range nodeNames(f.env) {
		if f.env.Clocks.Offset(n) != 0 {
			v.Targets = append(v.Targets, n)
		}
		if err := f.env.Clocks.Set(n, 0); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (f *clockReset) Heal(ctx context.Context) (history.Value, error) { return history.Value{}, nil }
