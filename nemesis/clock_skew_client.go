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
		FaultKind: history.FaultKind{Name: "clock-skew-client", Heal: "clock-unskew-client", Family: history.FamilyClock,
			Doc: "skews a worker's wall clock, as the impls that compute expiry from it read it, by ± --clock-bump for the window"},
		Settings: []string{"clock-bump", "clock-direction", "window"},
		Needs:    []Ability{NeedSkewClients},
		New:      newClockSkewClient,
		pins:     pinProcess,
	})
}

// clockSkewClient skews one worker's wall clock — the clock source of the
// impls that compute expiry from the client's clock — by ±ClockBump.
type clockSkewClient struct {
	kind
	env     Env
	clients SkewableClients

	skewed undoList[int]
}

func newClockSkewClient(env Env) (Fault, error) {
	c := env.Clients.(SkewableClients)
	if env.ClockBump == 0 || env.Window <= 0 {
		return nil, fmt.Errorf("clock bump must be non-zero and the fault window positive, got %v and %v", env.ClockBump, env.Window)
	}
	return &clockSkewClient{env: env, clients: c}, nil
}

func (f *clockSkewClient) Duration() time.Duration { return f.env.Window }

func (f *clockSkewClient) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	p, err := f.env.pickProcess(f.Name(), f.clients.Processes(), rng)
	if err != nil {
		return history.Value{}, err
	}
	d := f.env.jump(rng)
	v := history.Value{Targets: []string{fmt.Sprintf("p%d", p) + signed(d)}, Duration: int64(d)}
	if err := f.clients.SetWallOffset(p, d); err != nil {
		return v, fmt.Errorf("%w: %v", errNotApplied, err)
	}
	f.skewed.add(p, false)
	return v, nil
}

func (f *clockSkewClient) Heal(ctx context.Context) (history.Value, error) {
	var v history.Value
	err := f.skewed.undo(false, func(p int) error {
		// A worker that died since cannot be unskewed and needs no unskew.
		if err := f.clients.SetWallOffset(p, 0); err == nil {
			v.Targets = append(v.Targets, fmt.Sprintf("p%d", p))
		}
		return nil
	})
	return v, err
}
