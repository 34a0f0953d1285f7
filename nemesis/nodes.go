package nemesis

import (
	"github.com/locktest/locktest/clusters"
)

// Targeter is an optional ability of a cluster whose nodes are not all data
// nodes (Sentinel's sentinels, say): node faults pick among Targets only.
type Targeter interface {
	Targets() []clusters.Node
}

// targetNodes returns the nodes node faults may hit.
func targetNodes(c clusters.Cluster) []clusters.Node {
	if t, ok := c.(Targeter); ok {
		return t.Targets()
	}
	return c.Nodes()
}
