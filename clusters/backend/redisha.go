// What the providers share about running Redis:
// the redis.conf a node starts with and, for Redis with replicas (a master
// watched by Redis Sentinel, and Redis Cluster), the configuration lines
// of each kind of node, the creation of a Redis Cluster, the checks that
// say when each is ready, and what role each node has now. The providers
// start and stop the processes; this file only writes text and talks to
// the nodes over the network, so it is the same for every provider.

package backend

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locktest/locktest/clusters"
)

// SentinelMasterName is the name under which the sentinels of a
// redis-sentinel cluster monitor its master; clients ask the sentinels for
// it (go-redis FailoverOptions.MasterName).
const SentinelMasterName = "locktest"

// The roles of the nodes of a redis-sentinel or redis-cluster backend, as
// clusters.Node.Role and as the clusters' Role methods answer.
const (
	RoleMaster   = "master"
	RoleReplica  = "replica"
	RoleSentinel = "sentinel"
)

// The defaults of the backends' settings (docs/backends.md).
const (
	DefaultSentinelReplicas        = 2
	DefaultSentinels               = 3
	DefaultDownAfter               = time.Second
	DefaultFailoverTimeout         = 3 * time.Second
	DefaultRedisClusterMasters     = 3
	DefaultRedisClusterNodeTimeout = time.Second
)

// PollEvery is how often the readiness checks ask again.
const PollEvery = 20 * time.Millisecond

// RedisConf is a node's redis.conf, as every provider writes it. RDB snapshots
// are off in every mode: with the append-only file on, Redis loads that
// file at start and ignores the snapshot, so snapshots would only add fork
// pauses.
type RedisConf struct {
	// Header is the text of the file's first line, a comment.
	Header string
	// Port and Bind are what the node listens on.
	Port int
	Bind string
	// Dir is the node's working directory (its data: the append-only file,
	// a cluster's nodes.conf); LogFile is its log.
	Dir, LogFile string
	// PidFile, when set, daemonizes the server, which writes its pid
	// there; when empty the server stays in the foreground.
	PidFile string
	// Persistence is off (or ""), everysec or always: the append-only
	// file's fsync policy.
	Persistence string
	// Extra are lines appended as they are (replicaof, cluster-enabled,
	// sentinel monitor, ...).
	Extra []string
}

// String renders the file. Paths are quoted, as redis.conf takes them.
func (c RedisConf) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", c.Header)
	fmt.Fprintf(&b, "port %d\n", c.Port)
	fmt.Fprintf(&b, "bind %s\n", c.Bind)
	fmt.Fprintf(&b, "dir %s\n", strconv.Quote(c.Dir))
	fmt.Fprintf(&b, "logfile %s\n", strconv.Quote(c.LogFile))
	if c.PidFile != "" {
		fmt.Fprintf(&b, "daemonize yes\npidfile %s\n", strconv.Quote(c.PidFile))
	} else {
		b.WriteString("daemonize no\n")
	}
	b.WriteString("protected-mode no\n")
	b.WriteString("save \"\"\n")
	for _, d := range RedisPersistence(c.Persistence) {
		fmt.Fprintf(&b, "%s %s\n", d[0], d[1])
	}
	for _, l := range c.Extra {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// SentinelSettings are a redis-sentinel cluster's settings that the
// backend params (--cluster-opt) may change.
type SentinelSettings struct {
	// Replicas is the number of replicas of the master, 1 or 2.
	Replicas int
	// DownAfter is the sentinels' down-after-milliseconds: how long the
	// master must fail to answer before a sentinel deems it down.
	DownAfter time.Duration
	// FailoverTimeout is the sentinels' failover-timeout.
	FailoverTimeout time.Duration
}

// SentinelParams are the backend params of redis-sentinel.
var SentinelParams = []string{"replicas", "down-after", "failover-timeout"}

// RedisClusterParams are the backend params of redis-cluster.
var RedisClusterParams = []string{"node-timeout"}

// ParseSentinelParams reads the params replicas, down-after and
// failover-timeout from p (other keys are not looked at); replicas is the
// number of replicas when p names none. What p does not name stays 0, for
// Check to fill in.
func ParseSentinelParams(p map[string]string, replicas int) (SentinelSettings, error) {
	s := SentinelSettings{Replicas: replicas}
	var err error
	if s.Replicas, err = intParam(p, "replicas", s.Replicas); err != nil {
		return s, err
	}
	if s.DownAfter, err = durationParam(p, "down-after", 0); err != nil {
		return s, err
	}
	s.FailoverTimeout, err = durationParam(p, "failover-timeout", 0)
	return s, err
}

// Check fills in the defaults of what s leaves 0 and refuses what Sentinel
// cannot run; kind names the cluster in its errors.
func (s *SentinelSettings) Check(kind string) error {
	if s.Replicas == 0 {
		s.Replicas = DefaultSentinelReplicas
	}
	if s.Replicas < 1 || s.Replicas > 2 {
		return fmt.Errorf("%s: Replicas must be 1 or 2, not %d", kind, s.Replicas)
	}
	if s.DownAfter == 0 {
		s.DownAfter = DefaultDownAfter
	}
	if s.FailoverTimeout == 0 {
		s.FailoverTimeout = DefaultFailoverTimeout
	}
	if s.DownAfter < time.Millisecond || s.FailoverTimeout < time.Millisecond {
		return fmt.Errorf("%s: DownAfter %v and FailoverTimeout %v must be at least 1ms", kind, s.DownAfter, s.FailoverTimeout)
	}
	return nil
}

// ParseRedisClusterParams reads the param node-timeout from p (other keys are
// not looked at): the default when absent.
func ParseRedisClusterParams(p map[string]string) (time.Duration, error) {
	d, err := durationParam(p, "node-timeout", 0)
	if err != nil {
		return 0, err
	}
	if d == 0 {
		d = DefaultRedisClusterNodeTimeout
	}
	return d, nil
}

// intParam reads an integer backend parameter, def when absent.
func intParam(p map[string]string, key string, def int) (int, error) {
	s, ok := p[key]
	if !ok {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("backend param %s=%q: not an integer", key, s)
	}
	return v, nil
}

// durationParam reads a duration backend parameter, def when absent.
func durationParam(p map[string]string, key string, def time.Duration) (time.Duration, error) {
	s, ok := p[key]
	if !ok {
		return def, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("backend param %s=%q: not a positive duration", key, s)
	}
	return v, nil
}

// Poll calls f until it returns nil or ctx ends, every PollEvery, and then
// returns f's last error with ctx's.
func Poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		t := time.NewTimer(PollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// redisCheckTimeout bounds each command of the readiness checks and role reads.
const redisCheckTimeout = 300 * time.Millisecond

// RedisDataClient returns a client of the Redis node at addr with short
// timeouts and no retries, for readiness checks and role reads.
func RedisDataClient(addr string) *goredis.Client {
	return goredis.NewClient(redisOptions(addr, redisCheckTimeout))
}

// SentinelClient returns a client of the sentinel at addr with short
// timeouts and no retries.
func SentinelClient(addr string) *goredis.SentinelClient {
	return goredis.NewSentinelClient(redisOptions(addr, redisCheckTimeout))
}

// options are the client options of RedisDataClient and SentinelClient, with
// timeout for the dial and each read and write.
func redisOptions(addr string, timeout time.Duration) *goredis.Options {
	return &goredis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, PoolSize: 1, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// resetTimeout bounds one command of a reset or a residue check.
const resetTimeout = 5 * time.Second

// resetRedis is the Reset of the three Redis backends: FLUSHALL (and
// SCRIPT FLUSH) on every data node that says it is a master (ROLE), which
// removes every lock key and fencing counter the impls wrote; replicas
// follow their master. It returns once every data node, replicas
// included, holds no key. Sentinels keep no lock state and are left alone.
func resetRedis(ctx context.Context, l Layout, nodes []clusters.Node) error {
	data := l.OfKind(nodes, KindRedis)
	for _, n := range data {
		if err := func() error {
			c := goredis.NewClient(redisOptions(n.Addr, resetTimeout))
			defer c.Close()
			role, err := c.Do(ctx, "ROLE").Slice()
			if err != nil {
				return fmt.Errorf("ROLE: %w", err)
			}
			if len(role) == 0 || role[0] != "master" {
				return nil
			}
			if err := c.FlushAll(ctx).Err(); err != nil {
				return fmt.Errorf("FLUSHALL: %w", err)
			}
			return c.ScriptFlush(ctx).Err()
		}(); err != nil {
			return fmt.Errorf("%s: reset %s: %w", l.Backend, n.Name, err)
		}
	}
	for _, n := range data {
		c := goredis.NewClient(redisOptions(n.Addr, resetTimeout))
		err := Poll(ctx, func() error {
			size, err := c.DBSize(ctx).Result()
			if err == nil && size > 0 {
				err = fmt.Errorf("%d keys left", size)
			}
			return err
		})
		c.Close()
		if err != nil {
			return fmt.Errorf("%s: reset %s: %w", l.Backend, n.Name, err)
		}
	}
	return nil
}

// redisResidue is the Residue of the three Redis backends: the keys each
// data node holds (SCAN), replicas included, each as
// "<backend> <node>: key <name>".
func redisResidue(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error) {
	var out []string
	for _, n := range l.OfKind(nodes, KindRedis) {
		c := goredis.NewClient(redisOptions(n.Addr, resetTimeout))
		var keys []string
		var cursor uint64
		var err error
		for {
			var page []string
			if page, cursor, err = c.Scan(ctx, cursor, "*", 1000).Result(); err != nil {
				break
			}
			keys = append(keys, page...)
			if cursor == 0 {
				break
			}
		}
		c.Close()
		if err != nil {
			return out, fmt.Errorf("%s: residue of %s: SCAN: %w", l.Backend, n.Name, err)
		}
		slices.Sort(keys)
		out = append(out, listed(fmt.Sprintf("%s %s: key ", l.Backend, n.Name), keys)...)
	}
	return out, nil
}
