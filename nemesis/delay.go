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
		FaultKind: history.FaultKind{Name: "delay", Heal: "heal-delay", Family: history.FamilyNetwork,
			Doc: "adds --delay to a node's traffic for the window (tc netem, or a delaying proxy)"},
		Settings: []string{"delay", "window"},
		Needs:    []Ability{NeedDelay},
		New:      newDelay,
		pins:     pinNode,
	})
}

// delayFault adds latency to the traffic of one node.
type delayFault struct {
	kind
	env Env
}

func newDelay(env Env) (Fault, error) {
	if env.Delay <= 0 || env.Window <= 0 {
		return nil, fmt.Errorf("delay and fault window must be positive, got %v and %v", env.Delay, env.Window)
	}
	return &delayFault{env: env}, nil
}

func (f *delayFault) Duration() time.Duration { return f.env.Window }

func (f *delayFault) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	n, v, err := f.env.hitNode(ctx, f.Name(), f.env.Window, rng)
	if err != nil {
		return v, err
	}
	v.Targets = []string{fmt.Sprintf("%s+%v(%s)", n.Name, f.env.Delay, f.env.Delayer.Mechanism())}
	return v, f.env.Delayer.Delay(ctx, []string{n.Name}, f.env.Delay)
}

func (f *delayFault) Heal(ctx context.Context) (history.Value, error) {
	return history.Value{}, f.env.Delayer.Delay(ctx, nil, 0)
}
