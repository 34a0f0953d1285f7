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
