package nemesis

import (
	"context"

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

// newClockReset sets every node's clock back to the host's: an explicit
// step in a scenario's schedule, which records the nodes whose clocks it
// moved. Its heal does nothing.
func newClockReset(env Env) (Fault, error) {
	return &step{inject: func(ctx context.Context) (history.Value, error) {
		var v history.Value
		for _, n := range nodeNames(env) {
			if env.Clocks.Offset(n) != 0 {
				v.Targets = append(v.Targets, n)
			}
			if err := env.Clocks.Set(n, 0); err != nil {
				return v, err
			}
		}
		return v, nil
	}}, nil
}
