package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/clusters"
)

// RoleTimeout bounds each of NodeRoles.Role's questions to the nodes.
const RoleTimeout = 2 * time.Second

// NodeRoles is how every provider's cluster reads its nodes' roles and
// picks the targets of a process fault, written once over its Layout: it
// implements clusters.RoleReader and clusters.Targeter. A provider's
// cluster embeds it and sets it when it is made, with List its own Nodes.
type NodeRoles struct {
	// Layout is the cluster's backend, nodes and settings.
	Layout Layout
	// Provider is the first word of Role's errors: "local", "docker",
	// "ssh".
	Provider string
	// List returns the cluster's nodes with their addresses now, in the
	// layout's order.
	List func() []clusters.Node
}

var (
	_ clusters.RoleReader = NodeRoles{}
	_ clusters.Targeter   = NodeRoles{}
)

// Role asks, from the host the harness runs on, what node is now, as the
// backend's definition reads it (Layout.Role), for at most RoleTimeout:
// an etcd member whether it leads, a ZooKeeper peer its mode, a
// redis-sentinel data node what a majority of the sentinels say, a
// redis-cluster node its own CLUSTER NODES line; a node of a backend
// without roles has none (""). A node the cluster lacks, and a role that
// cannot be read now, are errors naming the provider and the node.
func (r NodeRoles) Role(ctx context.Context, node clusters.Node) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, RoleTimeout)
	defer cancel()
	role, err := r.Layout.Role(ctx, r.List(), node.Name)
	if err != nil {
		return "", fmt.Errorf("%s %w", r.Provider, err)
	}
	return role, nil
}

// Roles returns the roles Role can answer for node (Layout.Roles); none
// for Redis, NATS and the SQL servers.
func (r NodeRoles) Roles(node clusters.Node) []string { return r.Layout.Roles(node.Name) }

// Targets returns the nodes a fault that stops a process picks from
// (Layout.Targets): a redis-sentinel's data nodes, every node of the
// other backends.
func (r NodeRoles) Targets() []clusters.Node { return r.Layout.Targets(r.List()) }
