package backend

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/locktest/locktest/clusters"
)

// Service is one backend as locktest runs it on every provider. Each of
// its facts that is not a provider's is written once, in the backend's own
// file (redis.go, sentinel.go, rediscluster.go, etcd.go, zookeeper.go,
// mysql.go, postgres.go, nats.go), which registers it with its kinds of
// node in an init: its size and params, how its nodes are laid out, what
// roles they have and how to read them, how its cluster forms, how its
// servers are asked for their version, whether its nodes take the
// persistence setting, what its locks are, and, on its kinds, the programs
// it runs and the image the docker provider runs it in. NewLayout,
// Roster.Form, Layout.Roles, Layout.Role, Versions and the rest read the
// registered services, and so do the run, the results and the providers:
// no other code of the module names a backend (TestBackendNamesStayHome).
type Service struct {
	// Name is the backend's name, as --backend and the impls give it.
	Name string
	// Rank places the backend in All, the order the docs list them in.
	Rank int
	// Kind is the kind of its data nodes n1..nN (a registered Kind).
	Kind string
	// DefaultNodes is the size of its cluster when none is asked for: the
	// number of data nodes the Go impls that use the cluster as it comes
	// run with, and an external client (--client) always.
	DefaultNodes int
	// Params are the cluster params (--cluster-opt) it reads.
	Params []string
	// Configure checks the number of data nodes asked for (at least 1)
	// against the service, reads its params (only those of Params reach
	// it) into l, and returns how many data nodes the cluster has. Its
	// errors start with the backend's name. Nil takes any number and
	// reads nothing.
	Configure func(l *Layout, nodes int, params map[string]string) (int, error)
	// Extra returns the nodes of the cluster after its data nodes, given
	// its layout as Configure left it (a redis-sentinel's sentinels, a
	// kubernetes cluster's etcd members); nil for none.
	Extra func(l Layout) []NodeSpec
	// Roles returns the roles the node called name can have; nil for a
	// backend whose nodes are all alike.
	Roles func(l Layout, name string) []string
	// Role asks the node called name, at addr, what it is now; nodes are
	// the cluster's nodes with their addresses. Nil for a backend without
	// roles.
	Role func(ctx context.Context, l Layout, nodes []clusters.Node, name, addr string) (string, error)
	// StartRole, when set, returns the role the node called name has as
	// it starts, before anything has been read of it (Roster.Role).
	StartRole func(l Layout, name string) string
	// Form starts the cluster's nodes through f and returns once the
	// cluster is ready as a whole, keeping in r what it learns (see
	// Roster.Form). Nil starts every node at once.
	Form func(ctx context.Context, r *Roster, l Layout, f Formation) error
	// PortOffsets are how far above its first port each node's server
	// also listens (Redis Cluster's bus, 10000 above): a provider keeps
	// those ports free too.
	PortOffsets []int
	// KeepsConf says its nodes keep the configuration files of their
	// first start across restarts, because the servers rewrite them.
	KeepsConf bool
	// Version asks the server at addr for the product it is and its
	// version, within ctx; params are the cluster's params. A product of
	// "" leaves the node's Product.
	Version func(ctx context.Context, addr string, params map[string]string) (product, version string, err error)
	// Product returns what a node is before it says so itself, the key its
	// version goes under when it cannot be asked; nil means the backend's
	// name.
	Product func(n clusters.Node) string
	// ClockShimReason says why the LD_PRELOAD clock shim cannot move its
	// nodes' clocks; "" when it can.
	ClockShimReason string
	// Persistence says that its nodes take the persistence setting
	// (--persistence, Placement.Persistence), which chooses how durable
	// their data is; a run refuses the setting for a backend without it.
	Persistence bool
	// Locks says what a lock taken on the backend is when it is not a
	// lease an impl writes itself, and so what bounds how long a holder
	// that stopped keeps it (LockKind). Every backend states it.
	Locks LockKind
	// SyncsRecorded says that its nodes record what they sync, which a
	// power cut needs: a C program's syncs through the clock shim, which
	// sees its fsyncs, and locktest's node program's through its sync
	// tracer (clusters/synctrace), when the node's environment names a
	// record (durable.EnvFile).
	SyncsRecorded bool
	// Reset returns the data of a started, healthy cluster of the backend
	// (nodes as its Deployment gives them, laid out as l) to what a
	// fresh start of it holds: it removes every lock key, znode, row,
	// table, sequence, lease, bucket or stream the impls make and ends
	// the sessions other clients still hold, and returns once every
	// node shows it. It writes nothing a fresh cluster lacks. Its errors
	// start with the backend's name. A backend without Reset, or without
	// Residue, is never reused across runs: each run starts its own
	// cluster (Reusable).
	Reset func(ctx context.Context, l Layout, nodes []clusters.Node) error
	// Residue lists what the cluster's nodes hold that a freshly started
	// cluster of the backend would not (each item a short phrase naming
	// the node and the thing: "redis n1: key lock-0"), read from every
	// node that keeps data and independent of what Reset did; nil after
	// a good reset. An error means it could not read, which is no proof
	// of a clean cluster.
	Residue func(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error)
}

var services = struct {
	sync.RWMutex
	byName map[string]*Service
	kinds  map[string]*Kind
}{byName: map[string]*Service{}, kinds: map[string]*Kind{}}

// Register adds a backend and the kinds of node it brings (a kind two
// backends share is registered by one of them). It panics on a name or a
// kind registered twice, and on a service whose data nodes are of no
// registered kind once its kinds are in: programming errors found at
// start-up.
func Register(s Service, kinds ...*Kind) {
	services.Lock()
	defer services.Unlock()
	if _, dup := services.byName[s.Name]; dup {
		panic(fmt.Sprintf("backend: %q registered twice", s.Name))
	}
	for _, k := range kinds {
		if _, dup := services.kinds[k.Name]; dup {
			panic(fmt.Sprintf("backend: kind %q registered twice", k.Name))
		}
		services.kinds[k.Name] = k
	}
	services.byName[s.Name] = &s
}

// ServiceOf returns the backend called name.
func ServiceOf(name string) (*Service, bool) {
	services.RLock()
	defer services.RUnlock()
	s, ok := services.byName[name]
	return s, ok
}

// All returns every backend, in the order the docs list them.
func All() []string {
	services.RLock()
	defer services.RUnlock()
	ss := slices.Collect(maps.Values(services.byName))
	slices.SortFunc(ss, func(a, b *Service) int { return cmp.Or(cmp.Compare(a.Rank, b.Rank), strings.Compare(a.Name, b.Name)) })
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

// Kinds returns every kind of node, by name.
func Kinds() map[string]*Kind {
	services.RLock()
	defer services.RUnlock()
	return maps.Clone(services.kinds)
}

// KindOf returns the kind called name, or an error naming the kinds
// there are.
func KindOf(name string) (*Kind, error) {
	kinds := Kinds()
	if k, ok := kinds[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("no kind of node %q (want one of %s)", name, strings.Join(slices.Sorted(maps.Keys(kinds)), ", "))
}

// DefaultNodes returns the size of backend b's cluster when none is asked
// for (Service.DefaultNodes), 0 for no backend.
func DefaultNodes(b string) int {
	if s, ok := ServiceOf(b); ok {
		return s.DefaultNodes
	}
	return 0
}

// Params returns the backend params (--cluster-opt) backend b reads, and
// whether b is a backend at all.
func Params(b string) ([]string, bool) {
	s, ok := ServiceOf(b)
	if !ok {
		return nil, false
	}
	return s.Params, true
}

// ClockShimReason says why the LD_PRELOAD clock shim (package
// clusters/clockshim) cannot move the clocks of the nodes of backend, or
// "" when it can (Service.ClockShimReason). Every provider asks here.
func ClockShimReason(backend string) string {
	if s, ok := ServiceOf(backend); ok {
		return s.ClockShimReason
	}
	return ""
}

// ImageOf returns the name of the image the nodes of backend b run on the
// docker provider: that of the kind of its data nodes, whose Kind.Image
// says how the image is made (the three Redis backends share redis's,
// mysql runs mariadb's). It returns b for no backend.
func ImageOf(b string) string {
	if s, ok := ServiceOf(b); ok {
		return s.Kind
	}
	return b
}

// HasPersistence reports whether the nodes of backend b take the
// persistence setting (Service.Persistence).
func HasPersistence(b string) bool {
	s, ok := ServiceOf(b)
	return ok && s.Persistence
}

// WithPersistence returns the backends whose nodes take the persistence
// setting, in All's order.
func WithPersistence() []string {
	var out []string
	for _, b := range All() {
		if HasPersistence(b) {
			out = append(out, b)
		}
	}
	return out
}

// LockKind is what a lock taken on a backend is, and so what bounds how
// long a holder that stopped (paused, or cut off from the servers) goes on
// holding it: the bound `locktest margin` states.
type LockKind int

// The kinds of lock a backend grants.
const (
	// Leases end by themselves a TTL after they were taken or last
	// renewed, on the servers' clocks (Redis's keys with an expiry, etcd's
	// leases, the per-key TTL of NATS's JetStream KV): a holder that
	// stopped loses its lock once the TTL has passed, whatever it believes.
	Leases LockKind = iota + 1
	// ClientSessions are sessions of the client that the servers end
	// once they have not heard from it for the session timeout, the
	// client's TTL (ZooKeeper's ephemeral nodes): a holder that stopped
	// loses its lock after the timeout, and the sessions outlive a
	// restart of a server.
	ClientSessions
	// ServerSessions are sessions of the one server the lock was taken
	// on, its connection to the client (MariaDB's GET_LOCK and row locks,
	// PostgreSQL's advisory and row locks): they state no time bound,
	// live in the server's memory, and end with the connection or with
	// the server, whose crash ends every one.
	ServerSessions
	// ContenderLeases are lease records that no server ends: the
	// contenders judge them, each taking one once it has seen it
	// unchanged for the lease's duration on its own clock (a Kubernetes
	// Lease, which client-go's leader election renews and takes). A
	// holder that stopped keeps its lock until a contender has watched
	// the record that long, on a clock the servers do not check.
	ContenderLeases
)

// LocksOf returns what a lock taken on backend b is (Service.Locks), 0 for
// no backend.
func LocksOf(b string) LockKind {
	if s, ok := ServiceOf(b); ok {
		return s.Locks
	}
	return 0
}

// ServerSessionsOf reports whether the locks of a run of backend b on the
// given number of nodes, when they are not leases, are sessions of one
// server, so that a crash of its node ends every one (a one-node MariaDB or
// PostgreSQL: checker.RunFacts.ServerSessions).
func ServerSessionsOf(b string, nodes int) bool {
	return nodes == 1 && LocksOf(b) == ServerSessions
}

// ProductOf returns the product a node of backend is before it has said
// so itself (Service.Product): the key its version goes under when it
// cannot be asked.
func ProductOf(backend string, n clusters.Node) string {
	if s, ok := ServiceOf(backend); ok && s.Product != nil {
		return s.Product(n)
	}
	return backend
}
