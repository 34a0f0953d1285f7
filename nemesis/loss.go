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

// Loss is the fraction of packets, in (0, 1], that the loss fault drops.
var Loss = NewSetting("loss", Number, 0.3, "fraction of the packets dropped, in (0, 1]",
	Bound[float64]{"must be in (0, 1]", func(x float64) bool { return x > 0 && x <= 1 }})

// newLoss drops a fraction of the packets arriving at one node; the heal
// clears every rule of the network.
func newLoss(env Env) (Fault, error) {
	if !(Loss.Of(env) > 0 && Loss.Of(env) <= 1) {
		return nil, fmt.Errorf("loss probability must be in (0, 1], got %v", Loss.Of(env))
	}
	if err := positive("fault window", Window.Of(env)); err != nil {
		return nil, err
	}
	return env.onNode(Window.Of(env),
		func(ctx context.Context, n clusters.Node, v *history.Value, _ *rand.Rand) error {
			v.Targets = []string{fmt.Sprintf("%s@%g%%", n.Name, Loss.Of(env)*100)}
			return env.Net.Loss(ctx, []string{n.Name}, Loss.Of(env))
		},
		env.clearNetwork), nil
}
