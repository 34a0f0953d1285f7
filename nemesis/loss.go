package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/locktest/locktest/clusters"
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

// newLoss drops a fraction of the packets arriving at one node; the heal
// clears every rule of the network.
func newLoss(env Env) (Fault, error) {
	if !(env.Loss > 0 && env.Loss <= 1) {
		return nil, fmt.Errorf("loss probability must be in (0, 1], got %v", env.Loss)
	}
	if err := positive("fault window", env.Window); err != nil {
		return nil, err
	}
	return env.onNode(env.Window,
		func(ctx context.Context, n clusters.Node, v *history.Value, _ *rand.Rand) error {
			v.Targets = []string{fmt.Sprintf("%s@%g%%", n.Name, env.Loss*100)}
			return env.Net.Loss(ctx, []string{n.Name}, env.Loss)
		},
		env.clearNetwork), nil
}
