package nemesis

import (
	"math/rand/v2"

	"github.com/locktest/locktest/history"
)

func init() {
	registerShape(Spec{
		FaultKind: history.FaultKind{Name: "isolate", Op: "partition-isolate",
			Doc: "cuts one node from every other host, nodes and clients, for the window"},
		pins: pinNode,
	}, partitionShape{cut: isolate, minNodes: 2})
}

// isolate cuts one node from every other host, nodes and clients; a pin
// chooses that node.
func isolate(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	n := pickOne(in.nodes, in.pinned, rng)
	rest := append(without(in.nodes, n), in.clients...)
	return []Cut{{A: []string{n}, B: rest}}, []string{n}, nil
}
