package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locktest/locktest/history"
)

func init() {
	registerShape(Spec{
		FaultKind: history.FaultKind{Name: "client-isolate", Op: "partition-client-isolate",
			Doc: "cuts one client host from a random non-empty set of nodes, for the window"},
		Needs: []Ability{NeedNetwork, NeedSeparateClients},
		pins:  pinClientOrNode,
	}, partitionShape{cut: clientIsolate})
}

// clientIsolate cuts one client host from a random non-empty set of
// nodes. Pinned client hosts choose the client; pinned nodes are the
// set, all of them.
func clientIsolate(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	if len(in.clients) == 0 || len(in.nodes) == 0 {
		return nil, nil, fmt.Errorf("client-isolate needs client hosts and nodes")
	}
	c := pickOne(in.clients, in.pinnedClients, rng)
	cut := slices.Clone(in.pinned)
	if len(cut) == 0 {
		s := shuffled(in.nodes, rng)
		cut = s[:1+rng.IntN(len(s))]
	}
	return []Cut{{A: []string{c}, B: cut}}, slices.Clone(cut), nil
}
