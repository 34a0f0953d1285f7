package nemesis

import (
	"github.com/locktest/locktest/clusters"
)

// targetNodes returns the nodes node faults may hit.
func targetNodes(c clusters.Cluster) []clusters.Node {
	if t, ok := c.(clusters.Targeter); ok {
		return t.Targets()
	}
	return c.Nodes()
}
