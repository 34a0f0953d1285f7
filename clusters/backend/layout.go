package backend

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
)

// The backends, by the names impls and --backend use.
const (
	Redis         = "redis"
	RedisSentinel = "redis-sentinel"
	RedisCluster  = "redis-cluster"
	Etcd          = "etcd"
	ZooKeeper     = "zookeeper"
	MySQL         = "mysql"
	Postgres      = "postgres"
)

// All returns every backend, in the order the docs list them.
func All() []string {
	return []string{Redis, RedisSentinel, RedisCluster, Etcd, ZooKeeper, MySQL, Postgres}
}

// The kinds of node: what server a node runs. A backend's nodes are all of
// one kind but redis-sentinel's, whose data nodes are redis-servers and
// whose sentinels are redis-servers in sentinel mode.
const (
	KindRedis     = "redis"     // redis-server
	KindSentinel  = "sentinel"  // redis-server --sentinel
	KindEtcd      = "etcd"      // locktest's node program, an embedded etcd member
	KindZooKeeper = "zookeeper" // a JVM running ZooKeeperMain
	KindMariaDB   = "mariadb"   // mariadbd
	KindPostgres  = "postgres"  // PostgreSQL's postmaster
)

// The client ports of each kind of node, as a node with an address of its
// own listens (a provider whose nodes share an address moves them).
const (
	RedisPort     = 6379
	SentinelPort  = 26379
	EtcdPort      = 2379
	EtcdPeerPort  = 2380
	ZooKeeperPort = 2181
)

// NodeSpec is one node of a backend's cluster, as every provider names it.
type NodeSpec struct {
	// Name is n1, n2, ... for data nodes and s1, s2, ... for sentinels.
	Name string
	// Kind is the server the node runs (KindRedis, ...).
	Kind string
}

// Layout is a backend's cluster as every provider makes it: its nodes, in
// order, and the settings its backend params give. NewLayout makes it; a
// provider places the nodes on its hosts and starts them.
type Layout struct {
	// Backend is the backend's name.
	Backend string
	// Nodes are the cluster's nodes: the data nodes n1..nN, then a
	// redis-sentinel's sentinels s1..s3.
	Nodes []NodeSpec
	// Sentinel is a redis-sentinel's settings (replicas, timings).
	Sentinel SentinelSettings
	// Masters and NodeTimeout are a redis-cluster's: half its nodes are
	// masters, each with one replica.
	Masters     int
	NodeTimeout time.Duration
	// Etcd is an etcd cluster's raft timing.
	Etcd EtcdTiming
	// ZooKeeperTick is a ZooKeeper ensemble's tickTime.
	ZooKeeperTick time.Duration
}

// DefaultNodes returns the size of backend's cluster when none is asked
// for: one server for redis and the SQL backends, a master and two
// replicas for redis-sentinel, three masters and their replicas for
// redis-cluster, three members for etcd and ZooKeeper.
func DefaultNodes(b string) int {
	switch b {
	case Redis, MySQL, Postgres:
		return 1
	case RedisSentinel:
		return DefaultSentinelReplicas + 1
	case RedisCluster:
		return 2 * DefaultRedisClusterMasters
	case Etcd:
		return EtcdDefaultNodes
	case ZooKeeper:
		return ZooKeeperDefaultNodes
	}
	return 0
}

// Params returns the backend params (--cluster-opt) backend b reads, and
// whether b is a backend at all.
func Params(b string) ([]string, bool) {
	switch b {
	case RedisSentinel:
		return SentinelParams, true
	case RedisCluster:
		return RedisClusterParams, true
	case Etcd:
		return EtcdParams, true
	case ZooKeeper:
		return ZooKeeperParams, true
	case Redis, MySQL, Postgres:
		return nil, true
	}
	return nil, false
}

// NewLayout checks nodes (0 meaning DefaultNodes) and params against
// backend b and returns its cluster's layout. The params named in own are
// the provider's own (where a program is on its hosts, say): NewLayout
// lets them pass and leaves them to the provider. A redis-sentinel of nodes
// data nodes is a master and nodes-1 replicas, unless its param replicas
// says otherwise, with DefaultSentinels sentinels; a redis-cluster wants an
// even number of nodes, at least six; the SQL backends run one server.
// Errors name the backend and what is wrong, for a one-line refusal.
func NewLayout(b string, nodes int, params map[string]string, own ...string) (Layout, error) {
	known, ok := Params(b)
	if !ok {
		return Layout{}, fmt.Errorf("no backend %q (there are %s)", b, strings.Join(All(), ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !slices.Contains(known, k) && !slices.Contains(own, k) {
			known := append(slices.Clone(known), own...)
			if len(known) == 0 {
				return Layout{}, fmt.Errorf("%s: unknown cluster param %q (%s has none)", b, k, b)
			}
			return Layout{}, fmt.Errorf("%s: unknown cluster param %q (known: %s)", b, k, strings.Join(known, ", "))
		}
	}
	params = maps.Clone(params)
	maps.DeleteFunc(params, func(k, _ string) bool { return !slices.Contains(known, k) })
	if nodes < 0 {
		return Layout{}, fmt.Errorf("%s: %d nodes: want at least 1", b, nodes)
	}
	if nodes == 0 {
		nodes = DefaultNodes(b)
	}
	l := Layout{Backend: b}
	kind := map[string]string{Redis: KindRedis, RedisSentinel: KindRedis, RedisCluster: KindRedis,
		Etcd: KindEtcd, ZooKeeper: KindZooKeeper, MySQL: KindMariaDB, Postgres: KindPostgres}[b]
	var err error
	switch b {
	case MySQL, Postgres:
		if nodes != 1 {
			return Layout{}, fmt.Errorf("%s: %d nodes: the SQL backends run one server", b, nodes)
		}
	case Etcd:
		if l.Etcd, err = ParseEtcdParams(params); err != nil {
			return Layout{}, err
		}
	case ZooKeeper:
		if l.ZooKeeperTick, err = ParseZooKeeperParams(params); err != nil {
			return Layout{}, err
		}
	case RedisSentinel:
		if l.Sentinel, err = ParseSentinelParams(params, nodes-1); err != nil {
			return Layout{}, fmt.Errorf("%s: %w", b, err)
		}
		if err := l.Sentinel.Check(b); err != nil {
			return Layout{}, err
		}
		nodes = l.Sentinel.Replicas + 1
	case RedisCluster:
		if nodes%2 != 0 || nodes < 2*DefaultRedisClusterMasters {
			return Layout{}, fmt.Errorf("%s: %d nodes: want an even number, at least 6 (3 masters and one replica each)", b, nodes)
		}
		l.Masters = nodes / 2
		if l.NodeTimeout, err = ParseRedisClusterParams(params); err != nil {
			return Layout{}, fmt.Errorf("%s: %w", b, err)
		}
	}
	for i := range nodes {
		l.Nodes = append(l.Nodes, NodeSpec{Name: fmt.Sprintf("n%d", i+1), Kind: kind})
	}
	if b == RedisSentinel {
		for i := range DefaultSentinels {
			l.Nodes = append(l.Nodes, NodeSpec{Name: fmt.Sprintf("s%d", i+1), Kind: KindSentinel})
		}
	}
	return l, nil
}

// Kind returns the kind of the node called name, or "".
func (l Layout) Kind(name string) string {
	for _, n := range l.Nodes {
		if n.Name == name {
			return n.Kind
		}
	}
	return ""
}

// OfKind returns those of nodes (the cluster's nodes, in the layout's
// order) whose kind is kind.
func (l Layout) OfKind(nodes []clusters.Node, kind string) []clusters.Node {
	var out []clusters.Node
	for _, n := range nodes {
		if l.Kind(n.Name) == kind {
			out = append(out, n)
		}
	}
	return out
}

// Targets returns those of nodes a fault that stops a process picks from:
// a redis-sentinel's data nodes (killing a sentinel tests Sentinel, not
// the lock), every node of the other backends.
func (l Layout) Targets(nodes []clusters.Node) []clusters.Node {
	var out []clusters.Node
	for _, n := range nodes {
		if l.Kind(n.Name) != KindSentinel {
			out = append(out, n)
		}
	}
	return out
}

// Roles returns the roles a node called name can have: leader and follower
// for etcd members and ZooKeeper peers (standalone for a single peer),
// master and replica for the data nodes of redis-sentinel and
// redis-cluster, sentinel for a sentinel; none for the backends whose
// nodes are all alike.
func (l Layout) Roles(name string) []string {
	switch l.Backend {
	case Etcd:
		return EtcdRoles()
	case ZooKeeper:
		return ZooKeeperRoles(len(l.Nodes))
	case RedisSentinel, RedisCluster:
		if l.Kind(name) == KindSentinel {
			return []string{RoleSentinel}
		}
		return []string{RoleMaster, RoleReplica}
	}
	return nil
}

// HasRoles says whether the backend's nodes have roles that change as the
// cluster runs.
func (l Layout) HasRoles() bool { return len(l.Roles("n1")) > 0 }

// Role asks, over the network, what the node called name is now; nodes
// are the cluster's nodes with their addresses, in the layout's order. An
// etcd member says whether it leads (EtcdRole), a ZooKeeper peer its mode
// (ZooKeeperRole); a redis-sentinel data node is the master when a
// majority of the sentinels name it so, else a replica, and a sentinel is
// a sentinel; a redis-cluster node is what its own CLUSTER NODES line
// says. A node of a backend without roles has none (""). A role that
// cannot be read now (the node or the sentinels down, a failover under
// way) is an error naming the node.
func (l Layout) Role(ctx context.Context, nodes []clusters.Node, name string) (string, error) {
	var addr string
	for _, n := range nodes {
		if n.Name == name {
			addr = n.Addr
		}
	}
	if addr == "" {
		return "", fmt.Errorf("%s: no node %q", l.Backend, name)
	}
	var r string
	var err error
	switch l.Backend {
	case Etcd:
		r, err = EtcdRole(ctx, addr)
	case ZooKeeper:
		r, err = ZooKeeperRole(ctx, addr)
	case RedisSentinel:
		if l.Kind(name) == KindSentinel {
			return RoleSentinel, nil
		}
		r, err = SentinelDataRole(ctx, l.OfKind(nodes, KindSentinel), l.OfKind(nodes, KindRedis), name)
	case RedisCluster:
		r, err = RedisClusterRole(ctx, addr)
	default:
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", l.Backend, name, err)
	}
	return r, nil
}

// RedisNodeConf returns c, the redis.conf of the node called name, with
// its part in the layout added: a sentinel monitors n1 and keeps no
// append-only file; a redis-sentinel data node is the first master (n1) or
// its replica; a redis-cluster node runs in cluster mode. addrOf gives a
// node's address (host:port) as the other nodes and the clients reach it,
// which the node announces.
func (l Layout) RedisNodeConf(c RedisConf, name string, addrOf func(name string) string) RedisConf {
	self := addrOf(name)
	switch {
	case l.Kind(name) == KindSentinel:
		c.Persistence = ""
		c.Extra = SentinelConfig(addrOf("n1"), DefaultSentinels, l.Sentinel, self)
	case l.Backend == RedisSentinel && name == "n1":
		c.Extra = SentinelDataConfig("", self)
	case l.Backend == RedisSentinel:
		c.Extra = SentinelDataConfig(addrOf("n1"), self)
	case l.Backend == RedisCluster:
		host, _, _ := net.SplitHostPort(self)
		c.Extra = RedisClusterConfig(l.NodeTimeout, host)
	}
	return c
}

// ReplicatedReadyTimeout bounds the wait, once its nodes serve, for a
// redis-sentinel's replicas and sentinels or a redis-cluster's creation
// and health.
const ReplicatedReadyTimeout = 60 * time.Second

// Formation is what Form needs of a provider's cluster.
type Formation struct {
	// Provider names the provider in Form's errors ("docker").
	Provider string
	// Start starts the named nodes, all at once, and returns once each
	// serves (a provider's own start of its nodes); its errors are the
	// provider's, which Form returns as they are.
	Start func(ctx context.Context, names []string) error
	// Nodes returns the cluster's nodes with their addresses, in the
	// layout's order, and Pids each one's pid by name (0 for one that does
	// not run).
	Nodes func() []clusters.Node
	Pids  func() map[string]int
}

// Named returns those of a provider's nodes whose names are among names,
// in their order: the nodes a Formation's Start is asked to start.
func Named[N any](nodes []N, name func(N) string, names []string) []N {
	var out []N
	for _, n := range nodes {
		if slices.Contains(names, name(n)) {
			out = append(out, n)
		}
	}
	return out
}

// Roster is what a provider's cluster knows of its formation: whether its
// Redis Cluster was created, and the roles its data nodes had when Form
// last saw the cluster ready. The zero Roster knows nothing yet. It is
// safe for concurrent use.
type Roster struct {
	mu      sync.Mutex
	roles   map[string]string
	created bool
}

// Role returns the role the node called name of l had when last seen, for
// clusters.Node.Role: a sentinel is a sentinel; a redis-sentinel's n1 is
// the master it starts as, its other data nodes the replicas they start
// as; a redis-cluster's nodes have the roles Form saw when it was ready;
// other nodes have none (""). What a node is now, after a failover, its
// cluster's Role reads.
func (r *Roster) Role(l Layout, name string) string {
	switch {
	case l.Kind(name) == KindSentinel:
		return RoleSentinel
	case l.Backend == RedisSentinel && name == "n1":
		return RoleMaster
	case l.Backend == RedisSentinel:
		return RoleReplica
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.roles[name]
}

// Form starts l's cluster as every provider does and returns once it is
// ready as a whole: a redis-sentinel's data nodes start first, and its
// sentinels once every replica's link to n1 is up, Form returning when
// every sentinel names n1 as the master and knows the replicas and the
// other sentinels, so that a failover can happen from then on; a
// redis-cluster's nodes start together, it is created unless r says it
// was (CreateRedisCluster: its first half masters, each with one
// replica), and it is ready when every running node reports
// cluster_state:ok and its masters own every slot, the roles r then
// keeps. The other backends' nodes start all at once. Its own errors name
// the provider and the backend.
func (r *Roster) Form(ctx context.Context, l Layout, f Formation) error {
	names := func(kind string) []string {
		var out []string
		for _, n := range l.Nodes {
			if kind == "" || n.Kind == kind {
				out = append(out, n.Name)
			}
		}
		return out
	}
	switch l.Backend {
	case RedisSentinel:
		if err := f.Start(ctx, names(KindRedis)); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, ReplicatedReadyTimeout)
		defer cancel()
		data := l.OfKind(f.Nodes(), KindRedis)
		if err := WaitReplicasLinked(ctx, data[0], data[1:]); err != nil {
			return fmt.Errorf("%s %s: %w", f.Provider, l.Backend, err)
		}
		if err := f.Start(ctx, names(KindSentinel)); err != nil {
			return err
		}
		if err := WaitSentinelsReady(ctx, l.OfKind(f.Nodes(), KindSentinel), data[0].Addr, len(data)-1); err != nil {
			return fmt.Errorf("%s %s: %w", f.Provider, l.Backend, err)
		}
		return nil
	case RedisCluster:
		if err := f.Start(ctx, names("")); err != nil {
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
	return f.Start(ctx, names(""))
}
