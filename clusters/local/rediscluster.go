package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
)

// Defaults of RedisClusterOptions.
const (
	defaultClusterMasters     = 3
	defaultClusterNodeTimeout = time.Second
	clusterReadyTimeout       = 30 * time.Second
)

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
		if co.NodeTimeout, err = durationParam(o.Params, "node-timeout", 0); err != nil {
			return nil, err
		}
		return NewRedisCluster(co)
	})
}

// RedisCluster is a Redis Cluster on this host: masters that share the
// 16384 hash slots, each with one asynchronous replica that the cluster
// promotes when its master fails. It implements clusters.Cluster, Killer,
// Pauser and LogCollector. The cluster is created (redis-cli --cluster
// create) at its first start; a node that is killed and restarted rejoins
// with its nodes.conf, as a replica if it was failed over meanwhile (a
// killed master is failed over by the cluster after NodeTimeout;
// WaitHealthy waits for that).
type RedisCluster struct {
	*Redis      // its nodes: Stop, Kill, Restart, Pause, Resume, CollectLogs and Pids are theirs
	masters     int
	nodeTimeout time.Duration
	cli         string
	log         *slog.Logger

	mu      sync.Mutex
	created bool
	roles   map[string]string // node name → RoleMaster or RoleReplica, as last seen
}

// NewRedisCluster checks opts and returns a cluster that has not started
// yet. It fails if redis-server or redis-cli cannot be found.
func NewRedisCluster(opts RedisClusterOptions) (*RedisCluster, error) {
	if opts.Masters == 0 {
		opts.Masters = defaultClusterMasters
	}
	if opts.Masters < 3 {
		return nil, fmt.Errorf("local redis-cluster: Masters must be at least 3 (Redis Cluster's minimum), not %d", opts.Masters)
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = defaultClusterNodeTimeout
	}
	if opts.NodeTimeout < time.Millisecond {
		return nil, fmt.Errorf("local redis-cluster: NodeTimeout %v is below 1ms", opts.NodeTimeout)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, errors.New("redis-cli not found in PATH: run `make setup` (it comes with redis-server)")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &RedisCluster{masters: opts.Masters, nodeTimeout: opts.NodeTimeout, cli: cli, log: log, roles: map[string]string{}}
	c.Redis, err = NewRedis(RedisOptions{
		Nodes: 2 * opts.Masters, Dir: opts.Dir, Persistence: opts.Persistence, Hosts: opts.Hosts,
		NodeEnv: opts.NodeEnv, Logger: log, ExtraConfig: c.config,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// config is the cluster part of every node's redis.conf. A replica may
// fail over however long it was cut from its master
// (cluster-replica-validity-factor 0), so that a failover always happens.
func (c *RedisCluster) config(string) []string {
	return []string{
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		fmt.Sprintf("cluster-node-timeout %d", c.nodeTimeout.Milliseconds()),
		"cluster-replica-validity-factor 0",
		"cluster-require-full-coverage yes",
	}
}

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
// (redis-cli --cluster create ... --cluster-replicas 1), and returns once
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

// create runs redis-cli --cluster create over all nodes.
func (c *RedisCluster) create(ctx context.Context) error {
	args := []string{"--cluster", "create"}
	for _, n := range c.Redis.Nodes() {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, c.cli, args...).CombinedOutput()
	logPath := filepath.Join(filepath.Dir(c.Redis.nodes[0].dir), "cluster-create.log")
	_ = os.WriteFile(logPath, out, 0o644)
	if err != nil {
		return fmt.Errorf("local redis-cluster: redis-cli --cluster create: %v; output in %s: %s", err, logPath, lastLines(string(out), logTailLines))
	}
	c.mu.Lock()
	c.created = true
	c.mu.Unlock()
	c.log.Info("redis cluster created", "nodes", len(c.Redis.nodes))
	return nil
}

// lastLines returns the last n non-empty lines of s, joined by "; ".
func lastLines(s string, n int) string {
	var ls []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			ls = append(ls, strings.TrimSpace(l))
		}
	}
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "; ")
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
	var roles map[string]string
	err := poll(ctx, func() error {
		var err error
		roles, err = c.checkHealthy(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("local redis-cluster: not healthy: %w", err)
	}
	c.mu.Lock()
	c.roles = roles
	c.mu.Unlock()
	return nil
}

// checkHealthy is one round of WaitHealthy's checks; it returns each
// running node's role.
func (c *RedisCluster) checkHealthy(ctx context.Context) (map[string]string, error) {
	pids := c.Redis.Pids()
	byAddr := map[string]string{}
	var running []clusters.Node
	for _, n := range c.Redis.Nodes() {
		byAddr[n.Addr] = n.Name
		if pids[n.Name] != 0 {
			running = append(running, n)
		}
	}
	var roles map[string]string
	for _, n := range running {
		cl := dataClient(n.Addr)
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("%s: CLUSTER INFO: %w", n.Name, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			cl.Close()
			return nil, fmt.Errorf("%s: cluster_state not ok", n.Name)
		}
		text, err := cl.ClusterNodes(ctx).Result()
		cl.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: CLUSTER NODES: %w", n.Name, err)
		}
		r, err := parseClusterNodes(text, byAddr, pids, c.masters)
		if err != nil {
			return nil, fmt.Errorf("%s's view: %w", n.Name, err)
		}
		roles = r
	}
	return roles, nil
}

// parseClusterNodes checks one node's CLUSTER NODES output: masters live
// masters own all slots, and every other running node is a connected
// replica. byAddr maps addresses to node names, pids says which run.
func parseClusterNodes(text string, byAddr map[string]string, pids map[string]int, masters int) (map[string]string, error) {
	roles := map[string]string{}
	slots, live := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("bad CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		name, ok := byAddr[addr]
		if !ok {
			return nil, fmt.Errorf("unknown node %s", addr)
		}
		flags := f[2]
		failed := strings.Contains(flags, "fail")
		up := pids[name] != 0
		switch {
		case strings.Contains(flags, "master"):
			n, err := countSlots(f[8:])
			if err != nil {
				return nil, err
			}
			if n > 0 {
				// A master without slots (one failed over while down) has
				// no role worth naming until it rejoins as a replica.
				roles[name] = RoleMaster
				if failed || !up {
					return nil, fmt.Errorf("master %s serves %d slots but is down (flags %s)", name, n, flags)
				}
				live++
				slots += n
			} else if up {
				// Every running node of this topology either serves slots
				// or replicates a master that does: a running master
				// without slots is a node that came back after its
				// failover and has not yet been turned into a replica.
				return nil, fmt.Errorf("running master %s serves no slots: not yet rejoined as a replica", name)
			}
		default:
			roles[name] = RoleReplica
			if up && (failed || f[7] != "connected") {
				return nil, fmt.Errorf("replica %s flags %s link %s", name, flags, f[7])
			}
		}
		if up && failed {
			return nil, fmt.Errorf("running node %s flagged %s", name, flags)
		}
	}
	if live != masters || slots != 16384 {
		return nil, fmt.Errorf("%d live masters own %d slots, want %d masters owning 16384", live, slots, masters)
	}
	return roles, nil
}

// countSlots counts the hash slots of the slot fields of a CLUSTER NODES
// line ("0-5460", "5461", "[...]" for a slot being migrated, not counted).
func countSlots(fields []string) (int, error) {
	n := 0
	for _, r := range fields {
		if strings.HasPrefix(r, "[") {
			continue // a slot being migrated
		}
		lo, hi, isRange := strings.Cut(r, "-")
		var a, b int
		if _, err := fmt.Sscan(lo, &a); err != nil {
			return 0, fmt.Errorf("bad slot %q", r)
		}
		b = a
		if isRange {
			if _, err := fmt.Sscan(hi, &b); err != nil {
				return 0, fmt.Errorf("bad slot range %q", r)
			}
		}
		n += b - a + 1
	}
	return n, nil
}

// Role asks the node what it is now, from its own CLUSTER NODES line:
// "master" when it is a master that serves slots, "replica" when it
// replicates one. A master without slots (one that came back after its
// failover and has not been turned into a replica yet), a node flagged
// failing, and a node that does not answer are errors. It implements the
// nemesis's RoleReader, so a fault pinned to the masters follows failovers.
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
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl := dataClient(addr)
	defer cl.Close()
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("local redis-cluster: %s: CLUSTER NODES: %w", node.Name, err)
	}
	r, err := clusterSelfRole(text)
	if err != nil {
		return "", fmt.Errorf("local redis-cluster: %s: %w", node.Name, err)
	}
	return r, nil
}

// Roles returns the roles any node can have: master and replica.
func (c *RedisCluster) Roles(clusters.Node) []string { return []string{RoleMaster, RoleReplica} }

// clusterSelfRole reads the role of the node that answered CLUSTER NODES
// from its own line (flags "myself,master" or "myself,slave").
func clusterSelfRole(text string) (string, error) {
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !slices.Contains(strings.Split(f[2], ","), "myself") {
			continue
		}
		flags := strings.Split(f[2], ",")
		switch {
		case slices.Contains(flags, "fail") || slices.Contains(flags, "fail?"):
			return "", fmt.Errorf("flagged %s", f[2])
		case slices.Contains(flags, "slave"):
			return RoleReplica, nil
		case slices.Contains(flags, "master"):
			n, err := countSlots(f[8:])
			if err != nil {
				return "", err
			}
			if n == 0 {
				return "", errors.New("a master that serves no slots: not yet rejoined as a replica")
			}
			return RoleMaster, nil
		}
		return "", fmt.Errorf("flags %s name neither master nor replica", f[2])
	}
	return "", errors.New("no line of CLUSTER NODES is flagged myself")
}
