package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locktest/locktest/history"
)

func init() {
	registerShape(Spec{
		FaultKind: history.FaultKind{Name: "reply-loss", Op: "partition-reply-loss",
			Doc: "drops every packet from the nodes to one client host, for the window: its requests arrive and are applied, their replies are lost"},
		Needs: []Ability{NeedNetwork, NeedSeparateClients},
		pins:  pinClientOrNode,
	}, partitionShape{cut: replyLoss})
}

// replyLoss cuts, one way, the nodes from one client host: every packet
// they send it is dropped, and none it sends them. Jepsen calls it an
// asymmetric partition; Toxiproxy's timeout toxic does it to one
// connection. Pinned client hosts choose the client; pinned nodes are
// the nodes whose replies it loses, all of them (unpinned: every node).
// The subject is the pinned nodes.
func replyLoss(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	if len(in.clients) == 0 || len(in.nodes) == 0 {
		return nil, nil, fmt.Errorf("reply-loss needs client hosts and nodes")
	}
	c := pickOne(in.clients, in.pinnedClients, rng)
	from := slices.Clone(in.pinned)
	if len(from) == 0 {
		from = slices.Clone(in.nodes)
	}
	return []Cut{{A: from, B: []string{c}, OneWay: true}}, slices.Clone(in.pinned), nil
}
