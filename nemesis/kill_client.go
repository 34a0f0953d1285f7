package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

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

// killClient SIGKILLs one worker process, as a crashed client host would
// lose it — optionally while it holds the lock — and its heal starts a
// replacement with a new process id on the same client host.
type killClient struct {
	kind
	env     Env
	clients CrashableClients

	dead undoList[int]
}

func newKillClient(env Env) (Fault, error) {
	c := env.Clients.(CrashableClients)
	if env.Window <= 0 {
		return nil, fmt.Errorf("fault window must be positive, got %v", env.Window)
	}
	return &killClient{env: env, clients: c}, nil
}

func (f *killClient) Duration() time.Duration { return f.env.Window }

func (f *killClient) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	p, err := f.env.pickProcess(f.Name(), f.clients.Processes(), rng)
	if err != nil {
		return history.Value{}, err
	}
	v := history.Value{Targets: []string{fmt.Sprintf("p%d", p)}}
	if f.env.KillHolder {
		v.Point = f.env.KillPoint
		if v.Point == "" {
			v.Point = "after-acquire"
		}
		if err := f.clients.Arm(p, v.Point); err != nil {
			return v, fmt.Errorf("%w: arm p%d: %v", errNotApplied, p, err)
		}
		if _, err := f.clients.WaitPoint(ctx, p); err != nil {
			_ = f.clients.Disarm(p)
			return v, fmt.Errorf("%w: p%d did not reach %s: %v", errNotApplied, p, v.Point, err)
		}
	}
	if err := f.clients.Kill(ctx, p); err != nil {
		if f.env.KillHolder {
			_ = f.clients.Continue(p)
		}
		return v, fmt.Errorf("%w: kill p%d: %v", errNotApplied, p, err)
	}
	f.dead.add(p, false)
	return v, nil
}

func (f *killClient) Heal(ctx context.Context) (history.Value, error) {
	var v history.Value
	err := f.dead.undo(false, func(p int) error {
		np, err := f.clients.Replace(ctx, p)
		if err != nil {
			return fmt.Errorf("replace p%d: %w", p, err)
		}
		v.Targets = append(v.Targets, fmt.Sprintf("p%d->p%d", p, np))
		return nil
	})
	return v, err
}
