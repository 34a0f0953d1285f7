package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
)

// RedisClusterBusOffset is how far above its client port a Redis Cluster
// node listens on the cluster bus, as Redis has it.
const RedisClusterBusOffset = 10000

// RedisClusterSlots is the number of hash slots of a Redis Cluster.
const RedisClusterSlots = 16384

// RedisClusterConfig returns the cluster lines of every Redis Cluster node's
// redis.conf: the cluster's own state in nodes.conf in the node's
// directory, nodeTimeout, and a replica that may fail over however long it
// was cut from its master (cluster-replica-validity-factor 0), so that a
// failover always happens. With announceIP set, the node tells the others,
// and the clients through CLUSTER SLOTS and redirections, that address
// instead of the one it sees itself at.
func RedisClusterConfig(nodeTimeout time.Duration, announceIP string) []string {
	lines := []string{
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		fmt.Sprintf("cluster-node-timeout %d", nodeTimeout.Milliseconds()),
		"cluster-replica-validity-factor 0",
		"cluster-require-full-coverage yes",
	}
	if announceIP != "" {
		lines = append(lines, "cluster-announce-ip "+announceIP)
	}
	return lines
}

// redisClusterCreateTimeout bounds each command of CreateRedisCluster.
const redisClusterCreateTimeout = 5 * time.Second

// CreateRedisCluster makes one Redis Cluster of nodes, which are started with
// RedisClusterConfig and know no other node yet, as `redis-cli --cluster create
// ... --cluster-replicas 1` does: the first masters nodes share the hash
// slots in equal ranges, every node gets a config epoch of its own, all
// meet, and once every node knows every other, node masters+i replicates
// master i (modulo masters). It returns when the replicas were told whom
// to replicate; WaitRedisClusterHealthy says when the cluster serves.
func CreateRedisCluster(ctx context.Context, nodes []clusters.Node, masters int) error {
	if masters < 3 || len(nodes) < masters {
		return fmt.Errorf("redis-cluster: %d nodes and %d masters: want at least 3 masters", len(nodes), masters)
	}
	cs := make([]*goredis.Client, len(nodes))
	for i, n := range nodes {
		cs[i] = goredis.NewClient(redisOptions(n.Addr, redisClusterCreateTimeout))
		defer cs[i].Close()
	}
	ids := make([]string, len(nodes))
	for i, c := range cs {
		id, err := c.ClusterMyID(ctx).Result()
		if err != nil {
			return fmt.Errorf("redis-cluster: %s: CLUSTER MYID: %w", nodes[i].Name, err)
		}
		ids[i] = id
	}
	// The slot ranges of redis-cli: 0-5460, 5461-10922, 10923-16383 for
	// three masters.
	per := float64(RedisClusterSlots) / float64(masters)
	first := 0
	for i := range masters {
		last := int(math.Round(float64(first) + per - 1))
		if i == masters-1 || last > RedisClusterSlots-1 {
			last = RedisClusterSlots - 1
		}
		if err := cs[i].ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			return fmt.Errorf("redis-cluster: %s: CLUSTER ADDSLOTS %d-%d: %w", nodes[i].Name, first, last, err)
		}
		first = last + 1
	}
	for i, c := range cs {
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("redis-cluster: %s: CLUSTER SET-CONFIG-EPOCH: %w", nodes[i].Name, err)
		}
	}
	host, port, err := net.SplitHostPort(nodes[0].Addr)
	if err != nil {
		return fmt.Errorf("redis-cluster: %s: address %q: %w", nodes[0].Name, nodes[0].Addr, err)
	}
	for i, c := range cs[1:] {
		if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("redis-cluster: %s: CLUSTER MEET %s: %w", nodes[i+1].Name, nodes[0].Name, err)
		}
	}
	if afterMeet != nil {
		afterMeet(nodes)
	}
	for i, c := range cs {
		lastMeet := time.Now()
		err := Poll(ctx, func() error {
			text, err := c.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			lines := strings.Split(strings.TrimSpace(text), "\n")
			if len(lines) != len(nodes) {
				if time.Since(lastMeet) >= redisClusterMeetAgain {
					lastMeet = time.Now()
					meetUnknown(ctx, c, nodes, i, text)
				}
				return fmt.Errorf("knows %d nodes of %d", len(lines), len(nodes))
			}
			for _, l := range lines {
				if f := strings.Fields(l); len(f) < 3 || strings.Contains(f[2], "handshake") || strings.Contains(f[2], "noaddr") {
					return fmt.Errorf("still meeting: %q", l)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("redis-cluster: %s does not know every node: %w", nodeWhere(nodes[i]), err)
		}
	}
	for i := masters; i < len(nodes); i++ {
		m := (i - masters) % masters
		if err := cs[i].ClusterReplicate(ctx, ids[m]).Err(); err != nil {
			return fmt.Errorf("redis-cluster: %s: CLUSTER REPLICATE %s: %w", nodes[i].Name, nodes[m].Name, err)
		}
	}
	return nil
}

// afterMeet, when a test sets it, runs once the first CLUSTER MEETs went
// out: the test stalls a node there, as a loaded host does.
var afterMeet func(nodes []clusters.Node)

// redisClusterMeetAgain is how long CreateRedisCluster waits for a node
// to know every other before it sends CLUSTER MEET again, from that node,
// for each it does not know.
const redisClusterMeetAgain = 3 * time.Second

// meetUnknown sends CLUSTER MEET from c, the client of nodes[self], to
// every other node whose address its CLUSTER NODES text does not show.
// A Redis node drops a handshake that did not finish within the node
// timeout (1 s by default) and never tries it again: on a host too
// loaded to answer the cluster bus in time, the one MEET of redis-cli's
// steps leaves the node alone for good, and the gossip of the nodes it
// did meet cannot bring it the others, which met only n1. A MEET of a
// node already known, or whose handshake is under way, changes nothing.
// Errors are left to the next round: the caller's poll says what it
// still lacks.
func meetUnknown(ctx context.Context, c *goredis.Client, nodes []clusters.Node, self int, text string) {
	for j, n := range nodes {
		if j == self || strings.Contains(text, " "+n.Addr+"@") {
			continue
		}
		host, port, err := net.SplitHostPort(n.Addr)
		if err != nil {
			continue
		}
		_ = c.ClusterMeet(ctx, host, port).Err()
	}
}

// RunningNodes returns which nodes run, by name, from their pids (0 for a node
// that does not run).
func RunningNodes(pids map[string]int) map[string]bool {
	up := make(map[string]bool, len(pids))
	for name, pid := range pids {
		up[name] = pid != 0
	}
	return up
}

// WaitRedisClusterHealthy polls CheckRedisClusterHealthy until the cluster passes
// or ctx ends; state gives the nodes and which of them run anew at each
// round. It returns each node's role as the cluster last reported it.
func WaitRedisClusterHealthy(ctx context.Context, state func() ([]clusters.Node, map[string]bool), masters int) (map[string]string, error) {
	var roles map[string]string
	err := Poll(ctx, func() error {
		nodes, up := state()
		var err error
		roles, err = CheckRedisClusterHealthy(ctx, nodes, up, masters)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redis-cluster: not healthy: %w", err)
	}
	return roles, nil
}

// CheckRedisClusterHealthy is one round of the checks that a Redis Cluster of
// nodes with masters masters serves: every running node (up says which
// run) reports cluster_state:ok (CLUSTER INFO) and sees, in CLUSTER NODES,
// masters masters that are running, not flagged fail, and together own
// all 16384 slots, with every other running node a replica whose link is
// up. After a master was killed this is the end of the failover: a
// replica was promoted. It returns the role of each node as the last
// running node saw it.
func CheckRedisClusterHealthy(ctx context.Context, nodes []clusters.Node, up map[string]bool, masters int) (map[string]string, error) {
	byAddr := map[string]string{}
	for _, n := range nodes {
		byAddr[n.Addr] = n.Name
	}
	var roles map[string]string
	for _, n := range nodes {
		if !up[n.Name] {
			continue
		}
		cl := RedisDataClient(n.Addr)
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
		r, err := ParseRedisClusterNodes(text, byAddr, up, masters)
		if err != nil {
			return nil, fmt.Errorf("%s's view: %w", n.Name, err)
		}
		roles = r
	}
	return roles, nil
}

// ParseRedisClusterNodes checks one node's CLUSTER NODES output: masters live
// masters own all slots, and every other running node is a connected
// replica. byAddr maps addresses to node names, up says which run. It
// returns each node's role; a master without slots has none.
func ParseRedisClusterNodes(text string, byAddr map[string]string, up map[string]bool, masters int) (map[string]string, error) {
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
		running := up[name]
		switch {
		case strings.Contains(flags, "master"):
			n, err := CountSlots(f[8:])
			if err != nil {
				return nil, err
			}
			if n > 0 {
				// A master without slots (one failed over while down) has
				// no role worth naming until it rejoins as a replica.
				roles[name] = RoleMaster
				if failed || !running {
					return nil, fmt.Errorf("master %s serves %d slots but is down (flags %s)", name, n, flags)
				}
				live++
				slots += n
			} else if running {
				// Every running node of this topology either serves slots
				// or replicates a master that does: a running master
				// without slots is a node that came back after its
				// failover and has not yet been turned into a replica.
				return nil, fmt.Errorf("running master %s serves no slots: not yet rejoined as a replica", name)
			}
		default:
			roles[name] = RoleReplica
			if running && (failed || f[7] != "connected") {
				return nil, fmt.Errorf("replica %s flags %s link %s", name, flags, f[7])
			}
		}
		if running && failed {
			return nil, fmt.Errorf("running node %s flagged %s", name, flags)
		}
	}
	if live != masters || slots != RedisClusterSlots {
		return nil, fmt.Errorf("%d live masters own %d slots, want %d masters owning %d", live, slots, masters, RedisClusterSlots)
	}
	return roles, nil
}

// CountSlots counts the hash slots of the slot fields of a CLUSTER NODES
// line ("0-5460", "5461", "[...]" for a slot being migrated, not counted).
func CountSlots(fields []string) (int, error) {
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

// RedisClusterRole asks the Redis Cluster node at addr what it is now, from its
// own CLUSTER NODES line: "master" when it is a master that serves slots,
// "replica" when it replicates one. A master without slots (one that came
// back after its failover and has not been turned into a replica yet), a
// node flagged failing, and a node that does not answer within a second
// are errors.
func RedisClusterRole(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl := RedisDataClient(addr)
	defer cl.Close()
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("CLUSTER NODES: %w", err)
	}
	return RedisClusterSelfRole(text)
}

// RedisClusterSelfRole reads the role of the node that answered CLUSTER NODES with
// text from its own line (flags "myself,master" or "myself,slave").
func RedisClusterSelfRole(text string) (string, error) {
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
			n, err := CountSlots(f[8:])
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

// RedisCluster is the backend of a Redis Cluster: masters that share the
// slots, each with a replica, all of KindRedis.
const RedisCluster = "redis-cluster"

func init() {
	Register(Service{
		Name: RedisCluster, Rank: 3, Kind: KindRedis, DefaultNodes: 2 * DefaultRedisClusterMasters,
		Params:      RedisClusterParams,
		Persistence: true,
		Locks:       Leases,
		Reset:       resetRedis,
		Residue:     redisResidue,
		Configure: func(l *Layout, nodes int, params map[string]string) (int, error) {
			if nodes%2 != 0 || nodes < 2*DefaultRedisClusterMasters {
				return 0, fmt.Errorf("%s: %d nodes: want an even number, at least 6 (3 masters and one replica each)", l.Backend, nodes)
			}
			l.Masters = nodes / 2
			var err error
			if l.NodeTimeout, err = ParseRedisClusterParams(params); err != nil {
				return 0, fmt.Errorf("%s: %w", l.Backend, err)
			}
			return nodes, nil
		},
		Roles: redisDataRoles,
		Role: func(ctx context.Context, _ Layout, _ []clusters.Node, _, addr string) (string, error) {
			return RedisClusterRole(ctx, addr)
		},
		Form:        formRedisCluster,
		PortOffsets: []int{RedisClusterBusOffset},
		KeepsConf:   true,
		Version:     askRedis,
		Product:     redisProduct,
	})
}

// formRedisCluster starts a redis-cluster's nodes together, creates the
// cluster unless r says it was (CreateRedisCluster: its first half
// masters, each with one replica), and returns once every running node
// reports cluster_state:ok and its masters own every slot, the roles r
// then keeps.
func formRedisCluster(ctx context.Context, r *Roster, l Layout, f Formation) error {
	if err := f.Start(ctx, l.names("")); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ReplicatedReadyTimeout)
	defer cancel()
	r.mu.Lock()
	created := r.created
	r.mu.Unlock()
	if !created {
		// The errors of the Redis Cluster's steps name it already.
		if err := CreateRedisCluster(ctx, f.Nodes(), l.Masters); err != nil {
			return fmt.Errorf("%s %w", f.Provider, err)
		}
		r.mu.Lock()
		r.created = true
		r.mu.Unlock()
	}
	roles, err := WaitRedisClusterHealthy(ctx, func() ([]clusters.Node, map[string]bool) {
		return f.Nodes(), RunningNodes(f.Pids())
	}, l.Masters)
	if err != nil {
		return fmt.Errorf("%s %w", f.Provider, err)
	}
	r.mu.Lock()
	r.roles = roles
	r.mu.Unlock()
	return nil
}
