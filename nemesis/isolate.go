package nemesis

import (
	"fmt"
	"math/rand/v2"

	"github.com/locktest/locktest/history"
)

func init() {
	registerShape(Spec{
		FaultKind: history.FaultKind{Name: "isolate", Op: "partition-isolate",
			Doc: "cuts one node from every other host, nodes and clients, for the window"},
		pins: pinNode,
	}, isolate)
}

// isolate cuts one node from every other host, nodes and clients; a pin
// chooses that node.
func isolate(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	if len(in.nodes) < 2 {
		return nil, nil, fmt.Errorf("isolate needs at least 2 nodes")
	}
	from := in.nodes
	if len(in.pinned) > 0 {
		from = in.pinned
	}
	n := from[rng.IntN(len(from))]
	rest := append(without(in.nodes, n), in.clients...)
	return []Cut{{A: []string{n}, B: rest}}, []string{n}, nil
}
