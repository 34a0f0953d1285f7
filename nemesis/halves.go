package nemesis

import (
	"math/rand/v2"
	"slices"

	"github.com/locktest/locktest/history"
)

func init() {
	registerShape(Spec{
		FaultKind: history.FaultKind{Name: "halves", Op: "partition-halves",
			Doc: "splits the nodes into two halves (the smaller first), each client joining a random half, for the window"},
		Needs: []Ability{NeedNetwork, NeedSeparateClients},
		pins:  pinNode,
	}, partitionShape{cut: halves, minNodes: 2})
}

// halves splits the nodes into two halves (the smaller first) and puts
// each client on a random side. Pinned nodes go to the smaller half
// first: those of them that fit, then random other nodes fill it.
func halves(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	var s []string
	if len(in.pinned) > 0 {
		s = append(shuffled(in.pinned, rng), shuffled(without(in.nodes, in.pinned...), rng)...)
	} else {
		s = shuffled(in.nodes, rng)
	}
	a, b := slices.Clone(s[:len(s)/2]), slices.Clone(s[len(s)/2:])
	// The subject is the smaller half, or the pinned nodes in it.
	subject := slices.DeleteFunc(slices.Clone(a), func(n string) bool {
		return len(in.pinned) > 0 && !slices.Contains(in.pinned, n)
	})
	a, b = joinRandomSides(a, b, in.clients, rng)
	return []Cut{{A: a, B: b}}, subject, nil
}
