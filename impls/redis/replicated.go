package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
)

// The node roles of the redis-sentinel backend (clusters/local) that the
// replicated impl tells apart.
const (
	roleSentinel = "sentinel"
	roleMaster   = "master"
	roleReplica  = "replica"
)

// defaultMasterName is the name the local redis-sentinel backend's
// sentinels monitor the master under (local.SentinelMasterName).
const defaultMasterName = "locktest"

func init() {
	impls.Register(impls.Impl{
		Name: "redis-replicated", Backend: backend.RedisSentinel, Fenced: true,
		TokenSource: "Redis INCR counter on the master, replicated asynchronously", Wait: "fails at once",
		Doc: "redis-set-nx-px against the master of a Redis with two asynchronous replicas, failed over by three Sentinels and followed by go-redis's failover client; " +
			"a lock granted by a master that dies before its replicas got it is granted again by the promoted replica, and the INCR tokens can go back.",
		Libraries: []string{GoRedisModule},
		New:       newReplicated,
	})
	impls.Register(impls.Impl{
		Name: "redis-cluster", Backend: backend.RedisCluster, Fenced: true,
		TokenSource: "Redis INCR counter in the lock's slot, replicated asynchronously", Wait: "fails at once",
		Doc: "redis-set-nx-px on a Redis Cluster of 3 masters and 3 asynchronous replicas through go-redis's cluster client, each lock (and its token counter) in the slot of its name; " +
			"a master that dies before its replica got the lock loses it in the cluster failover, and the INCR tokens can go back.",
		Libraries: []string{GoRedisModule},
		New:       newClusterLock,
	})
}

// Replicated is redis-set-nx-px against a replicated Redis: the same Lua
// script (SET NX PX, then INCR of the token counter) and the same
// compare-and-delete release as SetNXPX, sent through a go-redis client that
// finds the master itself: a failover client that asks Redis Sentinel
// (redis-replicated), or a cluster client that routes by hash slot
// (redis-cluster). Lease.Node names the data node that answered the
// acquire.
//
// Failure mode: replication is asynchronous. The master answers the
// acquire before any replica has the key; if it dies then, the replica
// promoted in its place never saw the lock and grants it to the next
// client, while the first still holds it: two holders, without any pause or
// clock fault. The token counter is replicated the same way, so the new
// master may hand out a token already granted.
//
// Params: master-name (redis-replicated only) is the name the sentinels
// monitor; default "locktest", the local redis-sentinel backend's.
type Replicated struct {
	rdb    goredis.UniversalClient
	cfg    impls.Config
	values impls.Values
	// key returns the lock key and the counter key of a lock name.
	key func(lock string) (string, string)
	// names maps each data node's address to its name.
	names map[string]string
	// last is the address of the data node that last served a command.
	last atomic.Pointer[string]
}

var _ impls.Client = (*Replicated)(nil)

// checkConfig checks what both impls need.
func checkConfig(cfg impls.Config, impl string) error {
	if cfg.Now == nil {
		return fmt.Errorf("%s: Config.Now is required (the harness clock for ValidUntil)", impl)
	}
	if len(cfg.Nodes) == 0 {
		return fmt.Errorf("%s: Config.Nodes is empty (the impl needs the nodes' roles)", impl)
	}
	for k := range cfg.Params {
		if k != "master-name" || impl != "redis-replicated" {
			return fmt.Errorf("%s: unknown param %q", impl, k)
		}
	}
	return nil
}

func newReplicated(ctx context.Context, cfg impls.Config) (impls.Client, error) {
	if err := checkConfig(cfg, "redis-replicated"); err != nil {
		return nil, err
	}
	c := &Replicated{cfg: cfg, values: impls.Values{Process: cfg.Process}, names: map[string]string{}, key: func(l string) (string, string) { return l, l + ":fence" }}
	var sentinels []string
	for _, n := range cfg.Nodes {
		switch n.Role {
		case roleSentinel:
			sentinels = append(sentinels, n.Addr)
		case roleMaster, roleReplica:
			c.names[n.Addr] = n.Name
		}
	}
	if len(sentinels) == 0 {
		return nil, errors.New(`redis-replicated: no node with Role "sentinel" in Config.Nodes (use the redis-sentinel backend)`)
	}
	master := defaultMasterName
	if m, ok := cfg.Params["master-name"]; ok && m != "" {
		master = m
	}
	d := net.Dialer{Timeout: dialTimeout}
	c.rdb = goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName:    master,
		SentinelAddrs: sentinels,
		// Each new connection to a data node notes its address, so that
		// Acquire can say which node answered.
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if _, ok := c.names[addr]; ok {
				return &notingConn{Conn: conn, addr: addr, last: &c.last}, nil
			}
			return conn, nil
		},
		DialTimeout: dialTimeout, DialerRetries: 1, ReadTimeout: ioTimeout, WriteTimeout: ioTimeout,
		ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true, Protocol: 2,
	})
	return c, nil
}

func newClusterLock(ctx context.Context, cfg impls.Config) (impls.Client, error) {
	if err := checkConfig(cfg, backend.RedisCluster); err != nil {
		return nil, err
	}
	// The hash tag puts a lock and its counter in one slot, as a script
	// that touches both needs; different lock names spread over slots.
	c := &Replicated{cfg: cfg, values: impls.Values{Process: cfg.Process}, names: map[string]string{}, key: func(l string) (string, string) { return "{" + l + "}", "{" + l + "}:fence" }}
	var addrs []string
	for _, n := range cfg.Nodes {
		c.names[n.Addr] = n.Name
		addrs = append(addrs, n.Addr)
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:       addrs,
		DialTimeout: dialTimeout, DialerRetries: 1, ReadTimeout: ioTimeout, WriteTimeout: ioTimeout,
		ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true, Protocol: 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	// Each node client notes its address when it serves a command.
	cc.OnNewNode(func(rdb *goredis.Client) {
		rdb.AddHook(notingHook{addr: rdb.Options().Addr, last: &c.last})
	})
	c.rdb = cc
	return c, nil
}

// node returns the name of the data node that last served a command, or its
// address if it is not among Config.Nodes.
func (c *Replicated) node() string {
	p := c.last.Load()
	if p == nil {
		return ""
	}
	if n, ok := c.names[*p]; ok {
		return n
	}
	return *p
}

// Acquire runs the SET NX PX + INCR script once on the master that owns the
// lock. It returns impls.ErrNotAcquired if the key exists; any other error
// (a dead master, a failover in progress) leaves the outcome unknown.
func (c *Replicated) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	if err := checkTTL(ttl); err != nil {
		return impls.Lease{}, err
	}
	value := c.values.Next()
	key, fence := c.key(lock)
	c.last.Store(nil)
	start := c.cfg.Now()
	tok, err := setNXPXIncr.Run(ctx, c.rdb, []string{key, fence}, value, ttl.Milliseconds()).Int64()
	if errors.Is(err, goredis.Nil) {
		return impls.Lease{}, impls.ErrNotAcquired
	}
	if err != nil {
		return impls.Lease{}, err
	}
	return impls.Lease{Lock: lock, Value: value, ValidUntil: start + ttl.Truncate(time.Millisecond),
		Node: c.node(), Token: uint64(tok), HasToken: true}, nil
}

// Release deletes the key only if it still holds the lease's value; it
// returns impls.ErrNotHeld otherwise.
func (c *Replicated) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	key, _ := c.key(l.Lock)
	n, err := compareAndDelete.Run(ctx, c.rdb, []string{key}, l.Value).Int64()
	if err != nil {
		return impls.Released{}, err
	}
	if n == 0 {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}

// Close closes the client's connections.
func (c *Replicated) Close() error { return c.rdb.Close() }

// notingConn is a connection to a data node that notes its address as the
// last one written to. The client is used by one goroutine, so the node
// written to last is the one whose reply comes next.
type notingConn struct {
	net.Conn
	addr string
	last *atomic.Pointer[string]
}

func (c *notingConn) Write(b []byte) (int, error) {
	c.last.Store(&c.addr)
	return c.Conn.Write(b)
}

// notingHook notes a cluster node's address when it has served a script
// (the acquire and release commands); the cluster client's own background
// commands (CLUSTER SLOTS) do not count.
type notingHook struct {
	addr string
	last *atomic.Pointer[string]
}

func (h notingHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h notingHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "eval" || name == "evalsha") && (err == nil || errors.Is(err, goredis.Nil)) {
			h.last.Store(&h.addr)
		}
		return err
	}
}

func (h notingHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
