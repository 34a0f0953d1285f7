package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locktest/locktest/history"
)

func init() {
	registerShape(Spec{
		FaultKind: history.FaultKind{Name: "bridge", Op: "partition-bridge",
			Doc: "splits the nodes into two halves that talk only through one bridge node, for the window"},
		Needs: []Ability{NeedNetwork, NeedSeparateClients},
		pins:  pinNode,
	}, bridge)
}

// bridge splits the nodes into two halves that cannot talk, except
// through one bridge node that sees both; clients join a random half. A
// pin chooses the bridge node.
func bridge(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	if len(in.nodes) < 3 {
		return nil, nil, fmt.Errorf("bridge needs at least 3 nodes")
	}
	var a, b []string
	var bridge string
	mid := len(in.nodes) / 2
	if len(in.pinned) > 0 {
		bridge = in.pinned[rng.IntN(len(in.pinned))]
		o := shuffled(without(in.nodes, bridge), rng)
		a, b = slices.Clone(o[:mid]), slices.Clone(o[mid:])
	} else {
		s := shuffled(in.nodes, rng)
		a, bridge, b = slices.Clone(s[:mid]), s[mid], slices.Clone(s[mid+1:])
	}
	a, b = joinRandomSides(a, b, in.clients, rng)
	return []Cut{{A: a, B: b}}, []string{bridge}, nil
}
