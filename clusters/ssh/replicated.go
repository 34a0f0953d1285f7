package ssh

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// The bounds of the waits of a replicated Redis on the hosts.
const (
	// replicatedReadyTimeout bounds the wait, after its nodes answer, for a
	// redis-sentinel's replicas and sentinels or a redis-cluster's
	// creation and health.
	replicatedReadyTimeout = 60 * time.Second
	// roleTimeout bounds Role's questions to the nodes.
	roleTimeout = 2 * time.Second
)

// byKind returns the nodes of kind, in order, as clusters.Node.
func (cl *Cluster) byKind(kind string) (raw []*node, nodes []clusters.Node) {
	all := cl.Nodes()
	for i, n := range cl.nodes {
		if n.kind == kind {
			raw = append(raw, n)
			nodes = append(nodes, all[i])
		}
	}
	return raw, nodes
}

// startSentinel starts the data nodes of a redis-sentinel (n1 the master,
// the others its replicas), waits until each replica's link to the master
// is up, then starts the sentinels and waits until each names n1 as the
// master and knows every replica and every other sentinel, so that a
// failover can happen from the moment it returns.
func (cl *Cluster) startSentinel(ctx context.Context) error {
	data, dataNodes := cl.byKind(kindRedis)
	sents, sentNodes := cl.byKind(kindSentinel)
	if err := cl.startAll(ctx, data); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, replicatedReadyTimeout)
	defer cancel()
	if err := backend.WaitReplicasLinked(ctx, dataNodes[0], dataNodes[1:]); err != nil {
		return fmt.Errorf("ssh redis-sentinel: %w", err)
	}
	if err := cl.startAll(ctx, sents); err != nil {
		return err
	}
	if err := backend.WaitSentinelsReady(ctx, sentNodes, dataNodes[0].Addr, len(data)-1); err != nil {
		return fmt.Errorf("ssh redis-sentinel: %w", err)
	}
	return nil
}

// startRedisCluster starts every node of a redis-cluster, creates the
// cluster at the first start (backend.CreateRedisCluster: the first half of the
// nodes masters, each with one replica), and waits until every node
// reports cluster_state:ok and the masters own every slot; it records the
// roles for Nodes.
func (cl *Cluster) startRedisCluster(ctx context.Context) error {
	if err := cl.startAll(ctx, cl.nodes); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, replicatedReadyTimeout)
	defer cancel()
	cl.roleMu.Lock()
	created := cl.created
	cl.roleMu.Unlock()
	if !created {
		if err := backend.CreateRedisCluster(ctx, cl.Nodes(), cl.layout.Masters); err != nil {
			return fmt.Errorf("ssh %w", err)
		}
		cl.roleMu.Lock()
		cl.created = true
		cl.roleMu.Unlock()
	}
	seen, err := backend.WaitRedisClusterHealthy(ctx, func() ([]clusters.Node, map[string]bool) {
		return cl.Nodes(), backend.RunningNodes(cl.Pids())
	}, cl.layout.Masters)
	if err != nil {
		return fmt.Errorf("ssh %w", err)
	}
	cl.roleMu.Lock()
	cl.roles = seen
	cl.roleMu.Unlock()
	return nil
}

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
