package nemesis

import (
	"fmt"
	"math/rand/v2"

	"github.com/locktest/locktest/history"
)

func init() {
	registerShape(Spec{
		FaultKind: history.FaultKind{Name: "majorities-ring", Op: "partition-majorities-ring",
			Doc: "puts the nodes on a ring where each sees a majority and no two the same one, for the window (5 nodes or more)"},
		pins:   pinNone,
		noPins: "every node sees a majority and no node has a place of its own, so a pin could not mean anything",
	}, partitionShape{cut: majoritiesRing})
}

// majoritiesRing puts the nodes on a ring in random order; each sees
// the nodes within distance k of it, a majority, and no two see the same
// majority. Clients keep every node. It takes no pins.
func majoritiesRing(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	n := len(in.nodes)
	if n < 5 {
		return nil, nil, fmt.Errorf("majorities-ring needs at least 5 nodes (with %d every majority ring is the whole cluster)", n)
	}
	maj := n/2 + 1
	k := maj / 2 // sees 2k+1 ≥ maj nodes
	s := shuffled(in.nodes, rng)
	var cuts []Cut
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if d := min(j-i, n-(j-i)); d > k {
				cuts = append(cuts, Cut{A: []string{s[i]}, B: []string{s[j]}})
			}
		}
	}
	return cuts, nil, nil
}
