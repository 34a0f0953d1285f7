package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/clusters"
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

// Delay is the latency the delay fault adds to each packet.
var Delay = NewSetting("delay", Duration, 100*time.Millisecond, "latency added to a node's traffic", positiveDuration)

// newDelay adds latency to the traffic of one node; the heal takes every
// delay away.
func newDelay(env Env) (Fault, error) {
	if err := positive("delay and fault window", Delay.Of(env), Window.Of(env)); err != nil {
		return nil, err
	}
	d := env.Delayer
	return env.onNode(Window.Of(env),
		func(ctx context.Context, n clusters.Node, v *history.Value, _ *rand.Rand) error {
			v.Targets = []string{fmt.Sprintf("%s+%v(%s)", n.Name, Delay.Of(env), d.Mechanism())}
			return d.Delay(ctx, []string{n.Name}, Delay.Of(env))
		},
		func(ctx context.Context) ([]string, error) { return nil, d.Delay(ctx, nil, 0) }), nil
}
