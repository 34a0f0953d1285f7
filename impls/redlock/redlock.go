// Package redlock holds Redlock as go-redsync/redsync v4 implements it, used
// the way its users call it: one Mutex per acquire built with NewMutex(name,
// WithExpiry, WithTries, WithDriftFactor, WithGenValueFunc), LockContext,
// UnlockContext and, with auto-extend, ExtendContext from a keep-alive
// goroutine. The nodes are independent redis-server processes (backend
// "redis"), each reached through redsync's go-redis v9 pool.
//
//   - redlock: 5 nodes, quorum 3.
//   - redlock-3: 3 nodes, quorum 2.
//   - redlock-extend: 5 nodes with the keep-alive on.
//
// The flaw the harness measures: Redlock grants a lease, not a fenced lock.
// It has no fencing token (Lease.HasToken is false), so a holder that is
// paused after Lock returned (a GC pause) writes to the resource after its
// lease has ended and another process holds the lock. The only protection
// the resource can add is to check the holder's unique value (the
// check-and-set resource mode), which needs a resource that can compare and
// set. Redsync measures the acquisition with Go's monotonic clock and
// refuses a lock whose validity ran out during the acquisition; nothing
// measures the time after it.
//
// Params (impls.Config.Params):
//
//   - extend=on|off: keep the lease alive by calling ExtendContext every
//     ttl/3 while holding (default off; on for redlock-extend). A holder
//     with the keep-alive believes it holds the lock until it releases it,
//     so its Lease.ValidUntil is 0; a whole-process pause stops the
//     keep-alive with the rest of the process.
//   - extend-every=D: the keep-alive's period instead of ttl/3 (with
//     extend=on).
//   - setnx-on-extend=on|off: build each Mutex with what redsync's
//     WithSetNXOnExtend option sets (with extend=on; default off, as in
//     redsync): ExtendContext then SETs the key with NX on a node that
//     lacks it ("extend or lock", go-redsync/redsync#149, in v4.12.0 and
//     later), so a node that restarted empty holds the lease again at the
//     next extend. Without it a lease held across restarts of its nodes
//     without persistence is extended on fewer and fewer of them, until a
//     majority of empty nodes grants the lock to another client. The
//     option is applied by setting the Mutex's field that
//     WithSetNXOnExtend sets (setNXOnExtend) through reflection rather than
//     by calling it, so that this package also builds with the releases
//     before v4.12.0 (an adapter built with --lib); with those the param is
//     an error.
//   - tries=N: WithTries(N), default 1 (Acquire tries once, as the harness
//     expects; redsync's own default is 32).
//   - drift=F: WithDriftFactor(F), default redsync's 0.01.
//   - timeout-factor=F: WithTimeoutFactor(F), default redsync's 0.05: each
//     node gets ttl·F to answer an acquire (15ms for a 300ms ttl), after
//     which its reply counts as a failure.
//
// Pause points (Config.Hook), inside LockContext; redsync asks all nodes
// at once, one goroutine per node, and waits for every reply before it
// computes the validity (see the [Points] doc):
//
//   - after-node-K (K = 1..N): the K-th node's SET NX reply (granted,
//     refused or failed) has arrived; the goroutine that carries it stops
//     before handing it to redsync.
//   - after-majority: the reply that makes a majority of grants has
//     arrived; redsync cannot compute the validity before it gets it.
package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/tick"
	"github.com/locktest/locktest/runstore"
)

// The pause points of the acquisition besides after-node-K.
const (
	// PointAfterMajority is reached in the goroutine of the SET NX reply
	// that makes a majority of grants, before redsync receives it.
	PointAfterMajority = "after-majority"
)

// PointAfterNode returns the pause point reached when the k-th node (1-based,
// in reply order) has answered the SET NX.
func PointAfterNode(k int) string { return "after-node-" + strconv.Itoa(k) }

// Timeouts of the go-redis client of each node. Redsync itself bounds each
// acquire's node calls by ttl·0.05 (its timeout factor).
const (
	dialTimeout = time.Second
	ioTimeout   = time.Second
)

func init() {
	for _, i := range []struct {
		name   string
		nodes  int
		extend bool
	}{{"redlock", 5, false}, {"redlock-3", 3, false}, {"redlock-extend", 5, true}} {
		doc := fmt.Sprintf("Redlock by go-redsync/redsync v4 over %d independent redis-servers (quorum %d), ", i.nodes, i.nodes/2+1)
		if i.extend {
			doc += "its lease kept alive by ExtendContext every ttl/3; "
		}
		doc += "a lease without a fencing token: a holder paused after Lock returned writes after another process took the lock, " +
			"and a node that restarts without its data gives a second majority."
		// The keep-alive is a param of every Redlock impl (extend), on by
		// default for redlock-extend: its failure is the lost notice.
		notices := "a failed ExtendContext of its keep-alive"
		if !i.extend {
			notices += " (with extend=on)"
		}
		impls.Register(impls.Impl{
			Name: i.name, Backend: backend.Redis, Nodes: i.nodes, Doc: doc, Points: Points(i.nodes), Notices: notices,
			Wait:      "fails at once (tries=1)",
			Majority:  &impls.Majority{DriftFactor: 0.01, DriftMin: 2 * time.Millisecond}, // the Redis docs' Redlock
			Libraries: []string{redsyncModule, "github.com/redis/go-redis/v9"},
			New: func(ctx context.Context, cfg impls.Config) (impls.Client, error) {
				return New(ctx, cfg, i.extend)
			},
		})
	}
}

// Points returns the pause points of a Redlock over n nodes:
// after-node-1..after-node-n and after-majority.
//
// What redsync v4.18.1 does (mutex.go, lockContext and actOnPoolsAsync):
// it reads time.Now() (start), runs one goroutine per node that sends SET
// key value NX PX ttl, and collects exactly one reply per node from a
// channel; without WithFailFast it waits for all of them. Only then does it
// read time.Now() again and compute until = now + ttl - (now - start) -
// ttl·drift, and accept the lock if a majority granted and now is before
// until. A reply goroutine stopped at a pause point therefore stops the
// validity computation: after-majority is exact, "majority answered, validity
// not computed yet", whatever the other nodes are doing. Both readings of
// time.Now() carry Go's monotonic clock, which keeps running while the
// process is SIGSTOPped, so a pause there longer than the ttl makes redsync
// refuse the lock (it releases it on all nodes and returns ErrFailed): it
// never hands back an Until() in the past.
func Points(n int) []string {
	var ps []string
	for k := 1; k <= n; k++ {
		ps = append(ps, PointAfterNode(k))
	}
	return append(ps, PointAfterMajority)
}

// ErrValidityExpired is returned, wrapping impls.ErrNotAcquired, when a
// majority granted the lock but the acquisition took so long that redsync
// computed a validity already over and released the lock again.
var ErrValidityExpired = fmt.Errorf("%w: majority granted but the validity ran out during the acquisition (redsync released it)", impls.ErrNotAcquired)

// Client is one process's Redlock. It keeps one go-redis client per node and
// builds a redsync instance whose pools report each SET NX reply to the
// attempt in progress. It is not safe for concurrent use, except that a
// held lease's keep-alive runs in its own goroutine.
type Client struct {
	cfg    impls.Config
	names  []string // node names, in Addrs order
	rdbs   []*goredis.Client
	pools  []redsyncredis.Pool
	extend bool
	every  time.Duration // the keep-alive's period; 0 is ttl/3
	tries  int
	drift  float64
	tf     float64
	values impls.Values
	// opts are the Mutex options of the params beyond those every
	// acquire gives (setnx-on-extend).
	opts []redsync.Option

	held map[string]*holding // by lock value
}

var _ impls.Client = (*Client)(nil)

// holding is one held lease: its mutex and its keep-alive, if any.
type holding struct {
	m    *redsync.Mutex
	stop context.CancelFunc
	done chan struct{}
	// extendErr is the keep-alive's first failure, for the release error.
	extendErr atomic.Pointer[error]
}

// New builds a Redlock client over cfg.Addrs. extend turns the keep-alive on
// by default; the extend param overrides it.
func New(ctx context.Context, cfg impls.Config, extend bool) (*Client, error) {
	if err := cfg.Check("redlock"); err != nil {
		return nil, err
	}
	p, err := parseParams(cfg.Params, extend)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, values: impls.Values{Process: cfg.Process}, extend: p.extend, every: p.every, tries: p.tries, drift: p.drift, tf: p.timeoutFactor, held: map[string]*holding{}}
	if p.setNX {
		opt, err := setNXOnExtend()
		if err != nil {
			return nil, err
		}
		c.opts = append(c.opts, opt)
	}
	for i, addr := range cfg.Addrs {
		name := fmt.Sprintf("node%d", i+1)
		if i < len(cfg.Nodes) && cfg.Nodes[i].Name != "" {
			name = cfg.Nodes[i].Name
		}
		rdb := goredis.NewClient(&goredis.Options{
			Addr: addr, DialTimeout: dialTimeout, DialerRetries: 1, ReadTimeout: ioTimeout, WriteTimeout: ioTimeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		c.names = append(c.names, name)
		c.rdbs = append(c.rdbs, rdb)
		c.pools = append(c.pools, redsyncgoredis.NewPool(rdb))
	}
	return c, nil
}

// params are the impl's settings.
type params struct {
	extend        bool
	every         time.Duration
	setNX         bool
	tries         int
	drift         float64
	timeoutFactor float64
}

// parseParams reads the params (see the package doc) from p; extend is
// the impl's default of the keep-alive.
func parseParams(p map[string]string, extend bool) (params, error) {
	out := params{extend: extend, tries: 1, drift: 0.01, timeoutFactor: 0.05}
	for k, v := range p {
		switch k {
		case "extend":
			switch v {
			case "on", "true", "1":
				out.extend = true
			case "off", "false", "0":
				out.extend = false
			default:
				return out, fmt.Errorf("redlock: param extend=%q: want on or off", v)
			}
		case "extend-every":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return out, fmt.Errorf("redlock: param extend-every=%q: want a positive duration", v)
			}
			out.every = d
		case "setnx-on-extend":
			switch v {
			case "on", "true", "1":
				out.setNX = true
			case "off", "false", "0":
				out.setNX = false
			default:
				return out, fmt.Errorf("redlock: param setnx-on-extend=%q: want on or off", v)
			}
		case "tries":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return out, fmt.Errorf("redlock: param tries=%q: want a positive integer", v)
			}
			out.tries = n
		case "drift":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f >= 1 {
				return out, fmt.Errorf("redlock: param drift=%q: want a number in [0, 1)", v)
			}
			out.drift = f
		case "timeout-factor":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				return out, fmt.Errorf("redlock: param timeout-factor=%q: want a positive number", v)
			}
			out.timeoutFactor = f
		default:
			return out, fmt.Errorf("redlock: unknown param %q (known: extend, extend-every, setnx-on-extend, tries, drift, timeout-factor)", k)
		}
	}
	if !out.extend && (out.setNX || out.every != 0) {
		return out, errors.New("redlock: params extend-every and setnx-on-extend change nothing without the keep-alive (extend=on)")
	}
	return out, nil
}

// setNXOnExtend returns an option that does what redsync's
// WithSetNXOnExtend does in every release that has it (v4.12.0 and
// later): it sets the Mutex's field setNXOnExtend, which makes
// ExtendContext run the "extend or lock" script. It sets the field
// through reflection, so that this package builds with the releases
// before v4.12.0 too; with those, which have no such field, it returns an
// error. TestSetNXOnExtendIsTheLibrarysOption holds it to the real option.
func setNXOnExtend() (redsync.Option, error) {
	f, ok := reflect.TypeFor[redsync.Mutex]().FieldByName("setNXOnExtend")
	if !ok || f.Type.Kind() != reflect.Bool {
		return nil, fmt.Errorf("redlock: param setnx-on-extend=on: this program's redsync (%s) has no WithSetNXOnExtend, which v4.12.0 added",
			runstore.LibraryVersions([]string{redsyncModule})[redsyncModule])
	}
	return redsync.OptionFunc(func(m *redsync.Mutex) {
		*(*bool)(unsafe.Add(unsafe.Pointer(m), f.Offset)) = true
	}), nil
}

// redsyncModule is redsync's module path, as Libraries names it.
const redsyncModule = "github.com/go-redsync/redsync/v4"

// Acquire runs one LockContext (WithTries, default 1) on a fresh mutex. It
// returns impls.ErrNotAcquired when redsync certainly holds nothing: a
// majority of nodes refused (the lock is taken), or ErrValidityExpired.
// Any node error that left no majority is returned as is (outcome unknown:
// redsync tried to release, but a node that did not answer may hold the
// key until it expires). The lease's ValidUntil is redsync's Until() moved
// onto the harness clock, 0 with the keep-alive on; Node lists the nodes
// that granted.
func (c *Client) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	if ttl < time.Millisecond {
		return impls.Lease{}, fmt.Errorf("redlock: ttl %v is below Redis's 1ms resolution", ttl)
	}
	value := c.values.Next()
	at := &attempt{quorum: len(c.pools)/2 + 1, hook: c.cfg.Pass, granted: make([]bool, len(c.pools))}
	pools := make([]redsyncredis.Pool, len(c.pools))
	for i, p := range c.pools {
		pools[i] = &hookedPool{Pool: p, at: at, node: i}
	}
	opts := append([]redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(c.tries), redsync.WithDriftFactor(c.drift), redsync.WithTimeoutFactor(c.tf),
		redsync.WithGenValueFunc(func() (string, error) { return value, nil })}, c.opts...)
	m := redsync.New(pools...).NewMutex(lock, opts...)
	err := m.LockContext(ctx)
	if err != nil {
		return impls.Lease{}, classifyLockErr(err, at.grants(), at.quorum, len(c.pools))
	}
	l := impls.Lease{Lock: lock, Value: m.Value(), Node: strings.Join(at.grantedNames(c.names), ",")}
	if !c.extend {
		l.ValidUntil = onHarnessClock(m.Until(), c.cfg.Now(), time.Now())
	}
	h := &holding{m: m}
	if c.extend {
		kctx, cancel := context.WithCancel(context.Background())
		h.stop, h.done = cancel, make(chan struct{})
		every := c.every
		if every == 0 {
			every = ttl / 3
		}
		go h.keepAlive(kctx, every, func(err error) {
			c.cfg.Tell(lock, l.Value, fmt.Sprintf("redsync ExtendContext failed, the keep-alive gave up: %v", err))
		})
	}
	c.held[l.Value] = h
	return l, nil
}

// onHarnessClock converts until, a time.Time with a monotonic reading, to
// the harness clock, given the harness clock now and time.Now() read at the
// same moment.
func onHarnessClock(until time.Time, now time.Duration, wallNow time.Time) time.Duration {
	return now + until.Sub(wallNow)
}

// classifyLockErr maps LockContext's error: ErrValidityExpired when a
// majority granted (redsync then fails only because the validity ran out),
// ErrNotAcquired when no node failed (the lock is taken on a majority),
// else the error, whose outcome is unknown. grants is how many nodes
// granted.
func classifyLockErr(err error, grants, quorum, nodes int) error {
	var re *redsync.RedisError
	failed := errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	switch {
	case grants >= quorum:
		// With a majority of grants, redsync fails only when the validity
		// it computed is over (its error is then ErrFailed, or the refusals
		// and failures of the other nodes). It released on every node, and
		// the caller never holds the lock: a certain failure, even if a node
		// that failed may keep the key until it expires.
		return fmt.Errorf("%w (%d of %d nodes granted; %v)", ErrValidityExpired, grants, nodes, err)
	case failed:
		return fmt.Errorf("redlock: %d of %d nodes granted, quorum %d: %w", grants, nodes, quorum, err)
	default:
		return fmt.Errorf("%w: %d of %d nodes granted, quorum %d: %v", impls.ErrNotAcquired, grants, nodes, quorum, err)
	}
}

// keepAlive extends the lease every period until stopped. It stops at the
// first failure: the lock is lost, and redsync's users typically only log
// that; lost hears of it (the lost-lock notice).
func (h *holding) keepAlive(ctx context.Context, every time.Duration, lost func(error)) {
	defer close(h.done)
	tick.Until(every, ctx.Done(), func() bool {
		ok, err := h.m.ExtendContext(ctx)
		if ctx.Err() != nil {
			return false
		}
		if !ok || err != nil {
			if err == nil {
				err = redsync.ErrExtendFailed
			}
			h.extendErr.Store(&err)
			lost(err)
			return false
		}
		return true
	})
}

// Release stops the lease's keep-alive, if any, and runs UnlockContext. It
// returns impls.ErrNotHeld when no node failed and fewer than a majority
// still held the lease's value; a node error leaves the outcome unknown.
func (c *Client) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	h, ok := c.held[l.Value]
	if !ok {
		return impls.Released{}, fmt.Errorf("redlock: release of a lease this client does not hold (%s %s)", l.Lock, l.Value)
	}
	delete(c.held, l.Value)
	if h.stop != nil {
		h.stop()
		<-h.done
	}
	ok, err := h.m.UnlockContext(ctx)
	if ok {
		return impls.Released{Removed: l.Value}, nil
	}
	var re *redsync.RedisError
	if err != nil && (errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return impls.Released{}, fmt.Errorf("redlock: unlock: %w", err)
	}
	if e := h.extendErr.Load(); e != nil {
		return impls.Released{}, fmt.Errorf("%w (keep-alive failed earlier: %v)", impls.ErrNotHeld, *e)
	}
	return impls.Released{}, impls.ErrNotHeld
}

// Close stops every keep-alive and closes the node connections. It does not
// release held locks: they expire.
func (c *Client) Close() error {
	for v, h := range c.held {
		if h.stop != nil {
			h.stop()
			<-h.done
		}
		delete(c.held, v)
	}
	var errs []error
	for _, r := range c.rdbs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// attempt counts the SET NX replies of one LockContext round and calls the
// hook at the pause points. With WithTries(N > 1) redsync runs up to N
// rounds, each asking every node once and waiting for every reply before
// the next; the counts start again with each round, so the points name the
// replies of one round.
type attempt struct {
	quorum int
	hook   func(string)

	mu       sync.Mutex
	sent     int    // SET NX sent, over all rounds
	answered int    // replies of this round
	granting int    // grants of this round
	granted  []bool // by node index, this round
}

// send is called before each SET NX goes out; the first of a round starts
// the counts again (it precedes every reply of its round). Connections
// taken for redsync's unlock send no SET NX and count for nothing.
func (a *attempt) send() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sent%len(a.granted) == 0 {
		a.answered, a.granting = 0, 0
		clear(a.granted)
	}
	a.sent++
}

// reply records one node's SET NX reply and calls the hook at
// after-node-K and, for the grant that makes the majority, after-majority.
func (a *attempt) reply(node int, ok bool) {
	a.mu.Lock()
	a.answered++
	k := a.answered
	majority := false
	if ok {
		a.granted[node] = true
		a.granting++
		majority = a.granting == a.quorum
	}
	a.mu.Unlock()
	a.hook(PointAfterNode(k)) // may block: outside the lock
	if majority {
		a.hook(PointAfterMajority)
	}
}

// grants returns how many nodes granted in the last round.
func (a *attempt) grants() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.granting
}

// grantedNames returns the names of the nodes that granted, in node order.
func (a *attempt) grantedNames(names []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for i, g := range a.granted {
		if g {
			out = append(out, names[i])
		}
	}
	return out
}

// hookedPool wraps a redsync pool so that its connections report SET NX
// replies to the attempt.
type hookedPool struct {
	redsyncredis.Pool
	at   *attempt
	node int
}

// Get returns a connection that reports its SET NX replies.
func (p *hookedPool) Get(ctx context.Context) (redsyncredis.Conn, error) {
	c, err := p.Pool.Get(ctx)
	if err != nil {
		return nil, err
	}
	return &hookedConn{Conn: c, at: p.at, node: p.node}, nil
}

// hookedConn is a redsync connection whose SetNX reports to the attempt.
type hookedConn struct {
	redsyncredis.Conn
	at   *attempt
	node int
}

// SetNX sends the SET NX and, once the reply is in, reports it (which may
// stop at a pause point) before returning it to redsync.
func (c *hookedConn) SetNX(name, value string, expiry time.Duration) (bool, error) {
	c.at.send()
	ok, err := c.Conn.SetNX(name, value, expiry)
	c.at.reply(c.node, ok && err == nil)
	return ok, err
}
