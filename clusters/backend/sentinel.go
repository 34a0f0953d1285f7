package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/locktest/locktest/clusters"
)

// SentinelDataConfig returns the lines of a redis-sentinel data node's redis.conf:
// a replica of the master at masterAddr (host:port), or the first master
// when masterAddr is "". With announce (host:port) set, the node tells its
// master and the sentinels that address instead of the one its
// connections come from, so that what the sentinels report is an address
// the clients reach.
func SentinelDataConfig(masterAddr, announce string) []string {
	lines := []string{"replica-serve-stale-data yes", "repl-diskless-sync no"}
	if masterAddr != "" {
		host, port, _ := net.SplitHostPort(masterAddr)
		lines = append(lines, fmt.Sprintf("replicaof %s %s", host, port))
	}
	if announce != "" {
		host, port, _ := net.SplitHostPort(announce)
		lines = append(lines, "replica-announce-ip "+host, "replica-announce-port "+port)
	}
	return lines
}

// SentinelConfig returns the lines of a sentinel's configuration: it
// monitors the master at masterAddr (host:port) under SentinelMasterName,
// with a quorum of a majority of the sentinels, and s's timings. With
// announce (host:port) set, the sentinel tells the other sentinels that
// address.
func SentinelConfig(masterAddr string, sentinels int, s SentinelSettings, announce string) []string {
	host, port, _ := net.SplitHostPort(masterAddr)
	lines := []string{
		fmt.Sprintf("sentinel monitor %s %s %s %d", SentinelMasterName, host, port, sentinels/2+1),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMasterName, s.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", SentinelMasterName, s.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMasterName),
	}
	if announce != "" {
		host, port, _ := net.SplitHostPort(announce)
		lines = append(lines, "sentinel announce-ip "+host, "sentinel announce-port "+port)
	}
	return lines
}

// where names a node in an error: its name, and its log when it has one.
func nodeWhere(n clusters.Node) string {
	if n.LogPath != "" {
		return fmt.Sprintf("%s (log %s)", n.Name, n.LogPath)
	}
	return n.Name
}

// WaitReplicasLinked waits until each replica reports, by ROLE, that its
// link to master is up.
func WaitReplicasLinked(ctx context.Context, master clusters.Node, replicas []clusters.Node) error {
	for _, r := range replicas {
		c := RedisDataClient(r.Addr)
		err := Poll(ctx, func() error {
			v, err := c.Do(ctx, "ROLE").Slice()
			if err != nil {
				return err
			}
			if len(v) < 4 || v[0] != "slave" || fmt.Sprintf("%v:%v", v[1], v[2]) != master.Addr || v[3] != "connected" {
				return fmt.Errorf("ROLE %v, want a connected replica of %s", v, master.Addr)
			}
			return nil
		})
		c.Close()
		if err != nil {
			return fmt.Errorf("replica %s not linked: %w", nodeWhere(r), err)
		}
	}
	return nil
}

// WaitSentinelsReady waits until every sentinel names master (host:port)
// as the master and knows replicas replicas and every other sentinel, so
// that a failover can happen from the moment it returns.
func WaitSentinelsReady(ctx context.Context, sentinels []clusters.Node, master string, replicas int) error {
	for _, n := range sentinels {
		c := SentinelClient(n.Addr)
		err := Poll(ctx, func() error {
			a, err := c.GetMasterAddrByName(ctx, SentinelMasterName).Result()
			if err != nil {
				return err
			}
			if len(a) != 2 || net.JoinHostPort(a[0], a[1]) != master {
				return fmt.Errorf("names master %v, want %s", a, master)
			}
			m, err := c.Master(ctx, SentinelMasterName).Result()
			if err != nil {
				return err
			}
			if m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(len(sentinels)-1) {
				return fmt.Errorf("knows %s replicas and %s other sentinels", m["num-slaves"], m["num-other-sentinels"])
			}
			if m["flags"] != "master" {
				return fmt.Errorf("master flags %q", m["flags"])
			}
			return nil
		})
		c.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s not ready: %w", nodeWhere(n), err)
		}
	}
	return nil
}

// SentinelsMaster returns the master address (host:port) that a majority
// of the sentinels at addrs report (SENTINEL get-master-addr-by-name, as
// the clients ask them).
func SentinelsMaster(ctx context.Context, sentinels []clusters.Node) (string, error) {
	votes := map[string]int{}
	var errs []error
	for _, n := range sentinels {
		c := SentinelClient(n.Addr)
		a, err := c.GetMasterAddrByName(ctx, SentinelMasterName).Result()
		c.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
			continue
		}
		if len(a) == 2 {
			votes[net.JoinHostPort(a[0], a[1])]++
		}
	}
	for a, v := range votes {
		if v > len(sentinels)/2 {
			return a, nil
		}
	}
	return "", fmt.Errorf("no majority of sentinels agrees on a master: %v %v", votes, errors.Join(errs...))
}

// SentinelDataRole returns what the data node node of data is now by the
// sentinels' majority: "master" when they name its address as the
// master's, else "replica". With no majority of the sentinels agreeing (a
// failover under way, sentinels down) its role is an error.
func SentinelDataRole(ctx context.Context, sentinels, data []clusters.Node, node string) (string, error) {
	master, err := SentinelsMaster(ctx, sentinels)
	if err != nil {
		return "", err
	}
	for _, n := range data {
		if n.Name == node {
			if n.Addr == master {
				return RoleMaster, nil
			}
			return RoleReplica, nil
		}
	}
	return "", fmt.Errorf("no data node %q", node)
}

// RedisRole returns the first field of addr's ROLE reply: master, slave or
// sentinel.
func RedisRole(ctx context.Context, addr string) (string, error) {
	c := RedisDataClient(addr)
	defer c.Close()
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", errors.New("empty ROLE reply")
	}
	r, _ := v[0].(string)
	return r, nil
}

// RedisSentinel is the backend of a Redis master, its replicas and the
// sentinels that fail it over; KindSentinel is a sentinel, redis-server in
// sentinel mode, whose client port is SentinelPort.
const (
	RedisSentinel = "redis-sentinel"
	KindSentinel  = "sentinel"
	SentinelPort  = 26379
)

// ProductRedisSentinel is the product a sentinel is (Versions).
const ProductRedisSentinel = "redis-sentinel"

func init() {
	Register(Service{
		Name: RedisSentinel, Rank: 2, Kind: KindRedis, DefaultNodes: DefaultSentinelReplicas + 1,
		Params:      SentinelParams,
		Persistence: true,
		Locks:       Leases,
		Reset:       resetRedis,
		Residue:     redisResidue,
		Configure: func(l *Layout, nodes int, params map[string]string) (int, error) {
			var err error
			if l.Sentinel, err = ParseSentinelParams(params, nodes-1); err != nil {
				return 0, fmt.Errorf("%s: %w", l.Backend, err)
			}
			if err := l.Sentinel.Check(l.Backend); err != nil {
				return 0, err
			}
			return l.Sentinel.Replicas + 1, nil
		},
		Extra: func(Layout) []NodeSpec { return sentinelNodes(DefaultSentinels) },
		Roles: redisDataRoles,
		Role: func(ctx context.Context, l Layout, nodes []clusters.Node, name, _ string) (string, error) {
			if l.Kind(name) == KindSentinel {
				return RoleSentinel, nil
			}
			return SentinelDataRole(ctx, l.OfKind(nodes, KindSentinel), l.OfKind(nodes, KindRedis), name)
		},
		StartRole: func(l Layout, name string) string {
			switch {
			case l.Kind(name) == KindSentinel:
				return RoleSentinel
			case name == "n1":
				return RoleMaster
			}
			return RoleReplica
		},
		Form:      formSentinel,
		KeepsConf: true,
		Version:   askRedis,
		Product:   redisProduct,
	}, sentinelKind)
}

// sentinelNodes are the sentinels s1..sN of a redis-sentinel.
func sentinelNodes(n int) []NodeSpec {
	out := make([]NodeSpec, n)
	for i := range out {
		out[i] = NodeSpec{Name: fmt.Sprintf("s%d", i+1), Kind: KindSentinel}
	}
	return out
}

// redisDataRoles are the roles of a node of redis-sentinel or
// redis-cluster: a sentinel is a sentinel, a data node a master or a
// replica.
func redisDataRoles(l Layout, name string) []string {
	if l.Kind(name) == KindSentinel {
		return []string{RoleSentinel}
	}
	return []string{RoleMaster, RoleReplica}
}

// formSentinel starts a redis-sentinel: its data nodes first, and its
// sentinels once every replica's link to n1 is up; it returns when every
// sentinel names n1 as the master and knows the replicas and the other
// sentinels, so that a failover can happen from then on.
func formSentinel(ctx context.Context, _ *Roster, l Layout, f Formation) error {
	if err := f.Start(ctx, l.names(KindRedis)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ReplicatedReadyTimeout)
	defer cancel()
	data := l.OfKind(f.Nodes(), KindRedis)
	if err := WaitReplicasLinked(ctx, data[0], data[1:]); err != nil {
		return fmt.Errorf("%s %s: %w", f.Provider, l.Backend, err)
	}
	if err := f.Start(ctx, l.names(KindSentinel)); err != nil {
		return err
	}
	if err := WaitSentinelsReady(ctx, l.OfKind(f.Nodes(), KindSentinel), data[0].Addr, len(data)-1); err != nil {
		return fmt.Errorf("%s %s: %w", f.Provider, l.Backend, err)
	}
	return nil
}

// sentinelKind is a sentinel: redis-server in sentinel mode.
var sentinelKind = redisServer(KindSentinel, SentinelPort, true)
