package backend

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
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
	// Nodes are the cluster's nodes: the data nodes n1..nN, then the
	// service's Extra nodes (a redis-sentinel's sentinels s1..s3, a
	// kubernetes cluster's etcd members e1..eN).
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
	// Params are the backend's params the cluster was made with (those of
	// Service.Params), for a backend that reads them at its launch.
	Params map[string]string
}

// NewLayout checks nodes (0 meaning the backend's DefaultNodes) and params
// against backend b and returns its cluster's layout: the data nodes
// n1..nN of the service's kind, then its Extra nodes, with the settings
// its Configure reads from params. The params named in own are the
// provider's own (where a program is on its hosts, say): NewLayout lets
// them pass and leaves them to the provider. Errors name the backend and
// what is wrong, for a one-line refusal.
func NewLayout(b string, nodes int, params map[string]string, own ...string) (Layout, error) {
	s, ok := ServiceOf(b)
	if !ok {
		return Layout{}, fmt.Errorf("no backend %q (there are %s)", b, strings.Join(All(), ", "))
	}
	known := s.Params
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
		nodes = s.DefaultNodes
	}
	l := Layout{Backend: b, Params: params}
	if s.Configure != nil {
		var err error
		if nodes, err = s.Configure(&l, nodes, params); err != nil {
			return Layout{}, err
		}
	}
	for i := range nodes {
		l.Nodes = append(l.Nodes, NodeSpec{Name: fmt.Sprintf("n%d", i+1), Kind: s.Kind})
	}
	if s.Extra != nil {
		l.Nodes = append(l.Nodes, s.Extra(l)...)
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
// its data nodes, those of its service's Kind (a redis-sentinel's
// sentinels are not: killing one tests Sentinel, not the lock).
func (l Layout) Targets(nodes []clusters.Node) []clusters.Node {
	s, ok := ServiceOf(l.Backend)
	if !ok {
		return nodes
	}
	return l.OfKind(nodes, s.Kind)
}

// Roles returns the roles a node called name can have
// (Service.Roles): leader and follower for etcd members and ZooKeeper
// peers (standalone for a single peer), master and replica for the data
// nodes of redis-sentinel and redis-cluster, sentinel for a sentinel; none
// for the backends whose nodes are all alike.
func (l Layout) Roles(name string) []string {
	if s, ok := ServiceOf(l.Backend); ok && s.Roles != nil {
		return s.Roles(l, name)
	}
	return nil
}

// HasRoles says whether the backend's nodes have roles that change as the
// cluster runs.
func (l Layout) HasRoles() bool { return len(l.Roles("n1")) > 0 }

// Role asks, over the network, what the node called name is now
// (Service.Role); nodes are the cluster's nodes with their addresses, in
// the layout's order. A node of a backend without roles has none (""). A
// role that cannot be read now (the node down, a failover under way) is
// an error naming the node.
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
	s, ok := ServiceOf(l.Backend)
	if !ok || s.Role == nil {
		return "", nil
	}
	r, err := s.Role(ctx, l, nodes, name, addr)
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", l.Backend, name, err)
	}
	return r, nil
}

// names returns the names of the layout's nodes of kind, or of all its
// nodes for "", in its order.
func (l Layout) names(kind string) []string {
	var out []string
	for _, n := range l.Nodes {
		if kind == "" || n.Kind == kind {
			out = append(out, n.Name)
		}
	}
	return out
}

// MorePorts returns the ports a node whose first port is first also
// listens on (Service.PortOffsets: a Redis Cluster node's bus).
func (l Layout) MorePorts(first int) []int {
	s, ok := ServiceOf(l.Backend)
	if !ok {
		return nil
	}
	out := make([]int, 0, len(s.PortOffsets))
	for _, off := range s.PortOffsets {
		out = append(out, first+off)
	}
	return out
}

// KeepsConf reports whether the nodes of the layout keep the
// configuration files of their first start across restarts
// (Service.KeepsConf): those that the servers rewrite.
func (l Layout) KeepsConf() bool {
	s, ok := ServiceOf(l.Backend)
	return ok && s.KeepsConf
}

// SyncRecordReason says why the nodes of l cannot record what they sync,
// which a power cut needs to know what to cut back, or "" when they can
// (Service.SyncsRecorded): C programs whose syncs the clock shim
// (LD_PRELOAD) sees and records, and the servers locktest's node program
// embeds, which its sync tracer records (clusters/synctrace).
func (l Layout) SyncRecordReason() string {
	if s, ok := ServiceOf(l.Backend); !ok || !s.SyncsRecorded {
		var recorded []string
		for _, b := range All() {
			if s, _ := ServiceOf(b); s.SyncsRecorded {
				recorded = append(recorded, b)
			}
		}
		return fmt.Sprintf("its nodes do not record what they sync: locktest records the syncs of the nodes of %s only", strings.Join(recorded, ", "))
	}
	return ""
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
// clusters.Node.Role: the role it starts as, where its backend says
// (Service.StartRole: a redis-sentinel's nodes), else the role Form saw
// when the cluster was last ready (a redis-cluster's nodes), else none
// (""). What a node is now, after a failover, its cluster's Role reads.
func (r *Roster) Role(l Layout, name string) string {
	if s, ok := ServiceOf(l.Backend); ok && s.StartRole != nil {
		return s.StartRole(l, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.roles[name]
}

// Form starts l's cluster as every provider does and returns once it is
// ready as a whole (Service.Form: a redis-sentinel's data nodes before its
// sentinels, a redis-cluster created and healthy); the nodes of the other
// backends start all at once. Its own errors name the provider and the
// backend.
func (r *Roster) Form(ctx context.Context, l Layout, f Formation) error {
	if s, ok := ServiceOf(l.Backend); ok && s.Form != nil {
		return s.Form(ctx, r, l, f)
	}
	return f.Start(ctx, l.names(""))
}
