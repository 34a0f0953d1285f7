package local

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// clusterReadyTimeout bounds Start and WaitHealthy.
const clusterReadyTimeout = 30 * time.Second

// RedisClusterOptions configures a Redis Cluster.
type RedisClusterOptions struct {
	// Masters is the number of masters, at least 3; 0 means 3. Each master
	// has one replica, so the cluster has 2·Masters nodes n1...
	Masters int
	// NodeTimeout is cluster-node-timeout: how long a master must be
	// unreachable before the cluster fails it over; 0 means 1s.
	NodeTimeout time.Duration
	// Dir is the run directory; each node keeps its files in Dir/nodes/<name>
	// (nodes.conf, the cluster's own state, in its data directory).
	Dir string
	// Persistence is the nodes' durability (see RedisOptions).
	Persistence string
	// Hosts optionally places node i on Hosts[i].
	Hosts []Host
	// NodeEnv, if set, returns extra environment for a node's process.
	NodeEnv func(node string) []string
	// Logger receives node starts, exits, kills and pauses; nil discards.
	Logger *slog.Logger
}

func init() {
	Register("redis-cluster", func(o Options) (clusters.Cluster, error) {
		co := RedisClusterOptions{Dir: o.Dir, Persistence: o.Persistence, Hosts: o.Hosts, NodeEnv: o.NodeEnv, Logger: o.Logger}
		if o.Nodes > 0 {
			if o.Nodes%2 != 0 {
				return nil, fmt.Errorf("local redis-cluster: %d nodes: want an even number (masters and one replica each)", o.Nodes)
			}
			co.Masters = o.Nodes / 2
		}
		var err error
		if co.NodeTimeout, err = backend.ParseRedisClusterParams(o.Params); err != nil {
			return nil, err
		}
		return NewRedisCluster(co)
	})
}

// RedisCluster is a Redis Cluster on this host: masters that share the
// 16384 hash slots, each with one asynchronous replica that the cluster
// promotes when its master fails. It implements clusters.Cluster, Killer,
// Pauser and LogCollector. The cluster is created (backend.CreateRedisCluster,
// the steps of redis-cli --cluster create) at its first start; a node that is killed and restarted rejoins
// with its nodes.conf, as a replica if it was failed over meanwhile (a
// killed master is failed over by the cluster after NodeTimeout;
// WaitHealthy waits for that).
type RedisCluster struct {
	*Redis      // its nodes: Stop, Kill, Restart, Pause, Resume, CollectLogs and Pids are theirs
	masters     int
	nodeTimeout time.Duration
	log         *slog.Logger

	mu      sync.Mutex
	created bool
	roles   map[string]string // node name → RoleMaster or RoleReplica, as last seen
}

// NewRedisCluster checks opts and returns a cluster that has not started
// yet. It fails if redis-server cannot be found.
func NewRedisCluster(opts RedisClusterOptions) (*RedisCluster, error) {
	if opts.Masters == 0 {
		opts.Masters = backend.DefaultRedisClusterMasters
	}
	if opts.Masters < 3 {
		return nil, fmt.Errorf("local redis-cluster: Masters must be at least 3 (Redis Cluster's minimum), not %d", opts.Masters)
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = backend.DefaultRedisClusterNodeTimeout
	}
	if opts.NodeTimeout < time.Millisecond {
		return nil, fmt.Errorf("local redis-cluster: NodeTimeout %v is below 1ms", opts.NodeTimeout)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &RedisCluster{masters: opts.Masters, nodeTimeout: opts.NodeTimeout, log: log, roles: map[string]string{}}
	var err error
	c.Redis, err = NewRedis(RedisOptions{
		Nodes: 2 * opts.Masters, Dir: opts.Dir, Persistence: opts.Persistence, Hosts: opts.Hosts,
		NodeEnv: opts.NodeEnv, Logger: log, ExtraConfig: c.config,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// config is the cluster part of every node's redis.conf.
func (c *RedisCluster) config(string) []string { return backend.RedisClusterConfig(c.nodeTimeout, "") }

// Nodes returns the nodes n1.. with Role "master" (a master that owns
// slots) or "replica" as last seen (at Start or the latest WaitHealthy); a
// down master whose slots were failed over has Role "".
func (c *RedisCluster) Nodes() []clusters.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := c.Redis.Nodes()
	for i := range ns {
		ns[i].Role = c.roles[ns[i].Name]
	}
	return ns
}

// Targets returns every node: each holds data a kill can lose.
func (c *RedisCluster) Targets() []clusters.Node { return c.Nodes() }

// Start starts every node, creates the cluster at the first start
// (backend.CreateRedisCluster: each master with one replica), and returns once
// every node reports cluster_state:ok and all slots are served by live
// masters (see WaitHealthy). On error it stops the nodes.
func (c *RedisCluster) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	if err := c.Redis.Start(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	created := c.created
	c.mu.Unlock()
	if !created {
		if err := c.create(ctx); err != nil {
			c.Redis.Stop(context.Background())
			return err
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		c.Redis.Stop(context.Background())
		return err
	}
	return nil
}

// create makes one cluster of all nodes.
func (c *RedisCluster) create(ctx context.Context) error {
	if err := backend.CreateRedisCluster(ctx, c.Redis.Nodes(), c.masters); err != nil {
		return fmt.Errorf("local %w", err)
	}
	c.mu.Lock()
	c.created = true
	c.mu.Unlock()
	c.log.Info("redis cluster created", "nodes", len(c.Redis.nodes))
	return nil
}

// WaitHealthy waits until every running node reports cluster_state:ok
// (CLUSTER INFO) and sees, in CLUSTER NODES, Masters masters that are
// running, not flagged fail, and together own all 16384 slots, with every
// other running node a replica whose link is up. After a master was killed
// this is the end of the failover: a replica was promoted. It records the
// roles for Nodes.
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	roles, err := backend.WaitRedisClusterHealthy(ctx, func() ([]clusters.Node, map[string]bool) {
		return c.Redis.Nodes(), backend.RunningNodes(c.Redis.Pids())
	}, c.masters)
	if err != nil {
		return fmt.Errorf("local %w", err)
	}
	c.mu.Lock()
	c.roles = roles
	c.mu.Unlock()
	return nil
}

// Role asks the node what it is now, from its own CLUSTER NODES line:
// "master" when it is a master that serves slots, "replica" when it
// replicates one. A master without slots (one that came back after its
// failover and has not been turned into a replica yet), a node flagged
// failing, and a node that does not answer are errors. It implements the
// clusters.RoleReader, so a fault pinned to the masters follows failovers.
func (c *RedisCluster) Role(ctx context.Context, node clusters.Node) (string, error) {
	var addr string
	for _, n := range c.Redis.Nodes() {
		if n.Name == node.Name {
			addr = n.Addr
		}
	}
	if addr == "" {
		return "", fmt.Errorf("local redis-cluster: no node %q", node.Name)
	}
	r, err := backend.RedisClusterRole(ctx, addr)
	if err != nil {
		return "", fmt.Errorf("local redis-cluster: %s: %w", node.Name, err)
	}
	return r, nil
}

// Roles returns the roles any node can have: master and replica.
func (c *RedisCluster) Roles(clusters.Node) []string { return []string{RoleMaster, RoleReplica} }
