package nemesis

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "kill-client", Heal: "replace-client", Family: history.FamilyProcess, Kills: true,
			Doc: "SIGKILLs a worker (with --kill-holder: while it holds the lock); the heal starts a replacement with a new process id"},
		Settings: []string{"kill-holder", "pause-point", "window"},
		Needs:    []Ability{NeedCrashClients},
		New:      newKillClient,
		pins:     pinProcess,
	})
}

// KillHolder makes kill-client kill a worker at a pause point,
// PausePoint or after-acquire when that is empty: while it holds the lock,
// rather than at a random moment.
var KillHolder = NewSetting("kill-holder", Switch, false,
	"kill a worker at --pause-point (default after-acquire: while it holds the lock)", Bound[bool]{})

// newKillClient SIGKILLs one worker process, as a crashed client host
// would lose it — with KillHolder, at a pause point: while it holds the
// lock — and its heal starts a replacement with a new process id on the
// same client host, for each worker killed.
func newKillClient(env Env) (Fault, error) {
	c := env.Clients.(CrashableClients)
	if err := positive("fault window", Window.Of(env)); err != nil {
		return nil, err
	}
	point := ""
	if KillHolder.Of(env) {
		point = cmp.Or(PausePoint.Of(env), "after-acquire")
	}
	// With KillHolder, onProcess found p waiting at the point.
	return env.undoEachProcess(Window.Of(env), point,
		func(ctx context.Context, p int, v *history.Value, _ *rand.Rand) error {
			if err := c.Kill(ctx, p); err != nil {
				if KillHolder.Of(env) {
					_ = c.Continue(p)
				}
				return fmt.Errorf("%w: kill p%d: %v", errNotApplied, p, err)
			}
			return nil
		},
		func(ctx context.Context, p int) (string, error) {
			np, err := c.Replace(ctx, p)
			if err != nil {
				return "", fmt.Errorf("replace p%d: %w", p, err)
			}
			return fmt.Sprintf("p%d->p%d", p, np), nil
		}), nil
}
