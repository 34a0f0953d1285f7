package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "noop", Heal: "noop-done", Family: history.FamilyNone,
			Doc: "injects nothing for the window, on the schedule of a real fault: a control run, after Jepsen's noop nemesis"},
		Settings: []string{"window"},
		New:      func(env Env) (Fault, error) { return &noop{env: env}, nil },
		noPins:   "it acts on nothing",
	})
}

// noop is a fault that does nothing: its injection and heal are recorded
// like any other fault's, so a run with it shows what the schedule alone
// does to the results (nothing, for a sound harness).
type noop struct {
	kind
	env Env
}

func (f *noop) Duration() time.Duration { return f.env.Window }

func (f *noop) Inject(context.Context, *rand.Rand) (history.Value, error) {
	return history.Value{Duration: int64(f.env.Window)}, nil
}

func (f *noop) Heal(context.Context) (history.Value, error) { return history.Value{}, nil }
