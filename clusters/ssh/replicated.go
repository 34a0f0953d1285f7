package ssh

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/clusters"
)

// roleTimeout bounds Role's questions to the nodes.
const roleTimeout = 2 * time.Second

// Pids returns each node's pid on its host, by name: 0 for a node that is
// not running.
func (cl *Cluster) Pids() map[string]int {
	out := make(map[string]int, len(cl.nodes))
	for _, n := range cl.nodes {
		n.mu.Lock()
		out[n.name] = n.pid
		n.mu.Unlock()
	}
	return out
}

// Targets returns the nodes a fault that stops a process picks from
// (backend.Layout.Targets): a redis-sentinel's data nodes, every node of
// the other backends.
func (cl *Cluster) Targets() []clusters.Node { return cl.layout.Targets(cl.Nodes()) }

// Role asks, from the control host, what the node is now, as the
// backend's definition reads it (backend.Layout.Role): an etcd member
// whether it leads, a ZooKeeper peer its mode, a redis-sentinel data node
// what a majority of the sentinels say, a redis-cluster node its own
// CLUSTER NODES line; a node of the redis backend has no role (""). A
// role that cannot be read now is an error. It implements the nemesis's
// RoleReader, for faults pinned to a role.
func (cl *Cluster) Role(ctx context.Context, cn clusters.Node) (string, error) {
	if _, err := cl.find(cn.Name); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, roleTimeout)
	defer cancel()
	r, err := cl.layout.Role(ctx, cl.Nodes(), cn.Name)
	if err != nil {
		return "", fmt.Errorf("ssh %w", err)
	}
	return r, nil
}

// Roles returns the roles Role can answer for a node
// (backend.Layout.Roles).
func (cl *Cluster) Roles(cn clusters.Node) []string { return cl.layout.Roles(cn.Name) }

var (
	_ clusters.RoleReader = (*Cluster)(nil)
	_ clusters.Targeter   = (*Cluster)(nil)
)
