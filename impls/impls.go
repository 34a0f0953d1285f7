// Package impls defines what a lock implementation under test looks like to
// the harness: a Client per logical process, and a registry of named impls.
// Each backend family lives in its own sub-package and registers its impls
// from an init function; import impls/all to get every one.
package impls

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters/backend"
)

// ErrNotAcquired means the lock is held by someone else and the attempt
// certainly changed nothing: the acquire completes as fail. Any other error
// from Acquire leaves the outcome unknown (info).
var ErrNotAcquired = errors.New("not acquired")

// ErrNotSent marks an error from before the request left the client: the
// connection it needed could not be opened (a dial, a TLS or database
// start-up, the schema set-up of a new connection). The attempt certainly
// changed nothing, so an acquire completes as fail, with history.NotSent
// before its error, and not as info. Impls mark such errors with NotSent;
// errors.Is(err, ErrNotSent) finds the mark.
var ErrNotSent = errors.New("not sent")

// NotSent marks err as an error from before the request was sent (see
// ErrNotSent). Its message is err's; nil stays nil.
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return notSentError{err}
}

// notSentError is err marked by NotSent.
type notSentError struct{ err error }

func (e notSentError) Error() string        { return e.err.Error() }
func (e notSentError) Unwrap() error        { return e.err }
func (e notSentError) Is(target error) bool { return target == ErrNotSent }

// ErrNotHeld means a release found the lock no longer held by this lease (it
// expired, or another holder has it) and changed nothing: the release
// completes as fail.
var ErrNotHeld = errors.New("not held")

// ErrDead means the client can never be used again (the program of an
// external client exited): the op's outcome is unknown, and the worker
// exits with it, so the history records the death of its process.
var ErrDead = errors.New("client dead")

// Lease is what a successful acquire hands its holder.
type Lease struct {
	Lock string
	// Token is the fencing token; meaningful only when HasToken.
	Token    uint64
	HasToken bool
	// Value is the unique value the holder wrote into the lock service.
	Value string
	// ValidUntil is the holder's own belief of when its lease ends, on the
	// harness clock (Config.Now); 0 means the lock never expires.
	ValidUntil time.Duration
	// Node names the node that granted the lock, where one did.
	Node string
}

// Released describes what a successful release removed.
type Released struct {
	// Removed is the lock value the release deleted from the lock service,
	// if the impl can tell; it differs from the lease's Value when the
	// release deleted another holder's lock.
	Removed string
}

// Client is one process's handle on a lock service. It is not safe for
// concurrent use; each worker process owns exactly one.
type Client interface {
	// Acquire tries once to take lock for ttl. It returns ErrNotAcquired
	// when the lock is taken; any other error means the outcome is unknown.
	Acquire(ctx context.Context, lock string, ttl time.Duration) (Lease, error)
	// Release gives the lease back. It returns ErrNotHeld when the service
	// no longer held this lease (nothing changed); any other error means the
	// outcome is unknown.
	Release(ctx context.Context, l Lease) (Released, error)
	// Close releases the client's connections.
	Close() error
}

// GuardedWriter is an optional ability of a Client whose lock service can
// hold the shared resource itself and guard each write by the lock's
// ownership in one atomic step (etcd: a transaction comparing the holder's
// key revision, as concurrency.Mutex.IsOwner does). The resource mode
// "etcd-guarded" sends the critical section's read and write through it
// instead of the resource store, so fencing happens inside the lock service.
type GuardedWriter interface {
	// GuardedRead returns the resource counter called key (0 if it was
	// never written). An error means nothing was read.
	GuardedRead(ctx context.Context, l Lease, key string) (int64, error)
	// GuardedWrite sets the counter called key to value only if l still
	// owns its lock. It reports accepted false with a nil error when the
	// lock service refused the write because l no longer owns the lock
	// (nothing changed); any error means the outcome is unknown.
	GuardedWrite(ctx context.Context, l Lease, key string, value int64) (accepted bool, err error)
}

// Node is one server of the backend as a lock client sees it: the
// provider's node without what only the harness needs. Its JSON form is
// the one the driver sends workers.
type Node struct {
	// Name is unique within the cluster, e.g. "n1".
	Name string `json:"name"`
	// Addr is the host:port the client dials.
	Addr string `json:"addr"`
	// Role says what the node is to clients when the backend has more than
	// one kind ("sentinel", "master", "replica"); "" for plain members.
	Role string `json:"role,omitempty"`
}

// Config is what an impl needs to build a client.
type Config struct {
	// Addrs are the host:port addresses of the backend's nodes, in node
	// order (the same as Nodes' addresses).
	Addrs []string
	// Nodes are the backend's nodes with their names and roles, for impls
	// that must tell nodes apart (sentinels from data nodes, say).
	Nodes []Node
	// Params holds impl settings given on the command line (--impl-opt
	// key=value), documented by each impl.
	Params map[string]string
	// Process is the logical process id of the worker; impls may put it in
	// their unique lock values.
	Process int
	// Now returns the harness clock: CLOCK_MONOTONIC since the test's start.
	// Impls compute Lease.ValidUntil with it.
	Now func() time.Duration
	// Wall returns this client's idea of the wall-clock time. The harness may
	// skew it per worker; impls that trust client clocks must read it rather
	// than time.Now.
	Wall func() time.Time
	// Hook, if set, is called at named points inside an impl's operations
	// (see the impl's doc) so the harness can pause the process there.
	Hook func(point string)
	// Lost, if set, is how an impl tells its holder that a lease is gone,
	// or may be gone, at the moment its library says so: a session that
	// expired or lost its connection, a keep-alive that failed. lock and
	// value name the lease (both "" when the impl cannot tell which);
	// reason is the library's word for it. It may be called from any
	// goroutine and returns at once; impls call it through Tell or a
	// Holding.
	Lost func(lock, value, reason string)
}

// Tell calls Lost, if there is one, for the lease lock/value.
func (c Config) Tell(lock, value, reason string) {
	if c.Lost != nil {
		c.Lost(lock, value, reason)
	}
}

// Holding is the set of leases a client holds, kept for the lost-lock
// notices a library delivers on a goroutine of its own (a session's event
// callback), which must name the leases the news is about. Its methods are
// safe for concurrent use; the zero value holds nothing and tells nobody
// until Tell is set.
type Holding struct {
	mu   sync.Mutex
	held map[string]string // lease value → lock
	// Tell receives the notices: Config.Tell, set once before use.
	Tell func(lock, value, reason string)
}

// Add records that l is held. A client adds a lease when its acquire
// succeeds.
func (h *Holding) Add(l Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[string]string{}
	}
	h.held[l.Value] = l.Lock
}

// Remove forgets the lease of value. A client removes a lease when its
// release returns, whatever its outcome, so that news that comes while
// the release is in flight still names it.
func (h *Holding) Remove(value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.held, value)
}

// Lost tells of every lease held now, with reason, and reports how many
// it told of; news while nothing is held concerns no lease and is
// dropped.
func (h *Holding) Lost(reason string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Tell != nil {
		for v, l := range h.held {
			h.Tell(l, v, reason)
		}
	}
	return len(h.held)
}

// Check returns an error, prefixed with the impl's name, unless c has what
// every impl needs: at least one address and the harness clock.
func (c Config) Check(impl string) error {
	if len(c.Addrs) == 0 {
		return fmt.Errorf("%s: Config.Addrs is empty", impl)
	}
	if c.Now == nil {
		return fmt.Errorf("%s: Config.Now is required (the harness clock for ValidUntil)", impl)
	}
	return nil
}

// Wrap returns an Impl.New that builds what an impl's clients share with
// build, and the client around it with wrap.
func Wrap[S any](build func(Config) (S, error), wrap func(S) Client) func(context.Context, Config) (Client, error) {
	return func(_ context.Context, cfg Config) (Client, error) {
		s, err := build(cfg)
		if err != nil {
			return nil, err
		}
		return wrap(s), nil
	}
}

// Pass calls Hook at the named point, if there is a hook. Impls call it at
// each of their pause points.
func (c Config) Pass(point string) {
	if c.Hook != nil {
		c.Hook(point)
	}
}

// Values hands out the unique lock values of one client: "p<process>-<n>-
// <r>", with a per-client sequence number n and 32 random bits r, which
// keep a restarted worker with the same process id apart from its previous
// life. No other acquire of any process writes the same value. The zero
// value is ready for process 0.
type Values struct {
	Process int
	seq     uint64
}

// Next returns the value of the client's next acquire.
func (v *Values) Next() string {
	v.seq++
	return fmt.Sprintf("p%d-%d-%08x", v.Process, v.seq, rand.Uint32())
}

// Impl describes one lock implementation.
type Impl struct {
	Name string
	// Backend is the cluster kind the impl needs ("redis", ...).
	Backend string
	// Nodes is how many nodes of that backend it uses. Register sets it to
	// the backend's own size (backend.DefaultNodes) when it is 0: an impl
	// states it only when it runs on a cluster of another size (Redlock's
	// independent masters).
	Nodes int
	// Fenced says whether its leases carry fencing tokens.
	Fenced bool
	// Guarded says whether its clients implement GuardedWriter, which the
	// resource mode etcd-guarded needs.
	Guarded bool
	// Doc says in one sentence what the algorithm is and how it fails.
	Doc string
	// TokenSource says where the fencing token of a lease comes from (the
	// etcd create revision, the ZooKeeper czxid, a Redis INCR counter, a
	// database sequence, ...); it is empty exactly when Fenced is false.
	TokenSource string
	// Reentrant says whether a holder that acquires the lock it already
	// holds, with the same client, is granted it again at once, as the
	// impl's code and its library document it. The harness never nests
	// acquires; this is a static property for the backend matrix.
	Reentrant bool
	// Blocking says whether Acquire waits for a held lock to be freed (on
	// the server, or by the library watching for it) rather than failing
	// at once or polling.
	Blocking bool
	// Wait says in a few words how Acquire behaves while the lock is held
	// by another client, e.g. "fails at once" or "polls the INSERT every
	// 10ms until its deadline".
	Wait string
	// Notices says in a few words what tells a holder of this impl that
	// its lease is gone, through Config.Lost ("the session's Done channel
	// closes"); empty when nothing does.
	Notices string
	// Points are the pause points the impl passes to Config.Hook inside its
	// operations, besides the worker's own (after-acquire, before-write);
	// the nemesis may pause a client at any of them.
	Points []string
	// Majority is set for a lock that a majority of independent nodes
	// grant, each a lease of the TTL, and whose holder counts it valid
	// for the TTL less the time its acquire took and an allowance for the
	// nodes' clocks (Redlock). `locktest margin` states its bounds from it
	// (the validity, the quorum, the drift allowance, the delayed
	// restart). It is nil for every other lock, whose bound is its
	// backend's (backend.LocksOf).
	Majority *Majority
	// Renewal is set for a lock whose lease no server ends
	// (backend.ContenderLeases: a contender takes it once it has watched
	// it unchanged for its duration): given the run's TTL and the impl's
	// params, it returns the lease's duration as the contenders count it
	// and how often a holder renews it. `locktest margin` states its pause
	// bound from them.
	Renewal func(ttl time.Duration, params map[string]string) (lease, every time.Duration)
	// StopsAfter, for a lease that contenders judge, is how long by its
	// own clock a holder that cannot renew goes on before its client tells
	// it the lease is lost (client-go's RenewDeadline): with Renewal's
	// lease, what margin states of a clock that runs slow. nil: the impl
	// says nothing of it.
	StopsAfter func(ttl time.Duration, params map[string]string) time.Duration
	// Libraries are the Go modules of the client libraries its clients
	// are written with, by module path as go.mod names them
	// ("github.com/redis/go-redis/v9"). A run records each one's version
	// from the binary's build info (runstore.LibraryVersions), so every Go
	// impl names at least one.
	Libraries []string
	// RuntimeClock says that its library times its leases with the Go
	// runtime's own clock (time.Now, time.Since, its timers), which
	// Config.Now and Config.Wall cannot reach: a fault that moves the
	// client's clock (clock-skew-client) moves it only in a worker built
	// with a runtime whose clock can be moved (clusters/clockrate), which
	// the run then builds.
	RuntimeClock bool
	// Seeded, when not empty, says in one line the bug planted on purpose
	// in the correct recipe that SeededFrom names: the impl is a variant
	// of that recipe with that one thing broken, kept to measure whether
	// the harness finds bugs it was not built around (the zoo of
	// impls/seeded, docs/seeded-bugs.md). A seeded impl runs only when it
	// is asked for by name: Names, and so `locktest list`, the matrix's
	// and every other default set, leave it out; SeededNames lists it.
	Seeded string
	// SeededFrom names the correct impl a seeded impl is a variant of, whose
	// results its own are compared with; empty exactly when Seeded is.
	SeededFrom string
	New        func(ctx context.Context, cfg Config) (Client, error)
	// Package is the import path of the Go package whose code registered
	// the impl ("github.com/locktest/locktest/impls/redlock"), which
	// Register fills in: what an adapter of the impl built with other
	// versions of its libraries imports (impls/golib).
	Package string
}

// Majority is what a lock granted by a majority of independent nodes
// (Impl.Majority) keeps back from its lease for the nodes' clocks.
type Majority struct {
	// DriftFactor and DriftMin make the drift allowance of a lease of
	// the TTL: TTL × DriftFactor + DriftMin.
	DriftFactor float64
	DriftMin    time.Duration
}

// Drift is the drift allowance of a lease of ttl.
func (m Majority) Drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*m.DriftFactor) + m.DriftMin
}

// DriftRule is how Drift is computed, for a bound's rule: "TTL × 0.01 +
// 2ms".
func (m Majority) DriftRule() string {
	return fmt.Sprintf("TTL × %g + %s", m.DriftFactor, m.DriftMin)
}

var (
	mu       sync.RWMutex
	registry = map[string]Impl{}
)

// Register adds an impl; it panics on a duplicate name, or on a seeded
// impl that does not name its correct recipe (or the other way round),
// which are programming errors found at start-up. It records the package
// of the function that called it as the impl's Package.
func Register(i Impl) {
	if pc, _, _, ok := runtime.Caller(1); ok {
		if f := runtime.FuncForPC(pc); f != nil {
			i.Package = funcPackage(f.Name())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[i.Name]; dup {
		panic("impls: duplicate impl " + i.Name)
	}
	if (i.Seeded == "") != (i.SeededFrom == "") {
		panic("impls: " + i.Name + " must state both Seeded and SeededFrom, or neither")
	}
	if i.Nodes == 0 {
		i.Nodes = backend.DefaultNodes(i.Backend)
	}
	registry[i.Name] = i
}

// funcPackage is the import path of the package of the function named
// name, as runtime.Func.Name gives it: "example.com/a/b.init.0.func1"
// gives "example.com/a/b".
func funcPackage(name string) string {
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// Lookup returns the impl called name, seeded or not, or an error that
// lists the known ones.
func Lookup(name string) (Impl, error) {
	mu.RLock()
	defer mu.RUnlock()
	i, ok := registry[name]
	if !ok {
		known := strings.Join(namesLocked(false), ", ")
		if s := namesLocked(true); len(s) > 0 {
			known += "; seeded with a bug, for measuring the harness: " + strings.Join(s, ", ")
		}
		return Impl{}, fmt.Errorf("unknown impl %q (known: %s)", name, known)
	}
	return i, nil
}

// Names returns the names of the registered impls that are not seeded
// with a bug, sorted: the impls a user picks from, and every default set.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked(false)
}

// SeededNames returns the names of the seeded impls (Impl.Seeded), sorted.
func SeededNames() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked(true)
}

// IsSeeded reports whether name is a registered seeded impl.
func IsSeeded(name string) bool {
	mu.RLock()
	defer mu.RUnlock()
	return registry[name].Seeded != ""
}

// namesLocked returns the sorted names of the seeded impls, or of the
// others.
func namesLocked(seeded bool) []string {
	n := make([]string, 0, len(registry))
	for k, i := range registry {
		if (i.Seeded != "") == seeded {
			n = append(n, k)
		}
	}
	sort.Strings(n)
	return n
}
