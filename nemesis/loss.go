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
		FaultKind: history.FaultKind{Name: "loss", Heal: healNetwork, Family: history.FamilyNetwork,
			Doc: "drops --loss of the packets arriving at a node for the window (iptables statistic)"},
		Settings: []string{"loss", "window"},
		Needs:    []Ability{NeedNetwork},
		New:      newLoss,
		pins:     pinNode,
	})
}

// lossFault drops a fraction of the packets arriving at one node.
type lossFault struct {
	kind
	env Env
}

func newLoss(env Env) (Fault, error) {
	if !(env.Loss > 0 && env.Loss <= 1) {
		return nil, fmt.Errorf("loss probability must be in (0, 1], got %v", env.Loss)
	}
	if env.Window <= 0 {
		return nil, fmt.Errorf("fault window must be positive, got %v", env.Window)
	}
	return &lossFault{env: env}, nil
}

func (f *lossFault) Duration() time.Duration { return f.env.Window }

func (f *lossFault) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	n, v, err := f.env.hitNode(ctx, f.Name(), f.env.Window, rng)
	if err != nil {
		return v, err
	}
	v.Targets = []string{fmt.Sprintf("%s@%g%%", n.Name, f.env.Loss*100)}
	return v, f.env.Net.Loss(ctx, []string{n.Name}, f.env.Loss)
}

func (f *lossFault) Heal(ctx context.Context) (history.Value, error) {
	return history.Value{}, f.env.Net.Heal(ctx)
}
