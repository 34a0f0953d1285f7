package nemesis

import (
	"context"

	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "noop", Heal: "noop-done", Family: history.FamilyNone,
			Doc: "injects nothing for the window, on the schedule of a real fault: a control run, after Jepsen's noop nemesis"},
		Settings: []string{"window"},
		New:      newNoop,
		noPins:   "it acts on nothing",
	})
}

// newNoop is a fault that does nothing for the window: its injection and
// heal are recorded like any other fault's, so a run with it shows what the
// schedule alone does to the results (nothing, for a sound harness).
func newNoop(env Env) (Fault, error) {
	return &step{dur: Window.Of(env), inject: func(context.Context) (history.Value, error) {
		return history.Value{Duration: int64(Window.Of(env))}, nil
	}}, nil
}
