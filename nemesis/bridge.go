package nemesis

import (
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
	}, partitionShape{cut: bridge, minNodes: 3})
}

// bridge splits the nodes into two halves that cannot talk, except
// through one bridge node that sees both; clients join a random half. A
// pin chooses the bridge node.
func bridge(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	var bridge string
	var rest []string
	if len(in.pinned) > 0 {
		bridge = pickOne(in.nodes, in.pinned, rng)
		rest = shuffled(without(in.nodes, bridge), rng)
	} else {
		// The bridge is the middle of a shuffle: the halves around it.
		s := shuffled(in.nodes, rng)
		bridge = s[len(s)/2]
		rest = without(s, bridge)
	}
	mid := len(in.nodes) / 2
	a, b := joinRandomSides(slices.Clone(rest[:mid]), slices.Clone(rest[mid:]), in.clients, rng)
	return []Cut{{A: a, B: b}}, []string{bridge}, nil
}
