// Package rueidislock holds the lock of github.com/redis/rueidis's
// rueidislock package, used the way its users call it: one Locker per
// process (NewLocker with the test's ttl as KeyValidity), an acquire by
// TryWithContext, which hands back a context that stays alive while the
// lock is held, and a release by the CancelFunc it returned.
//
//   - rueidislock: one redis-server, rueidislock's defaults otherwise.
//
// What rueidislock v1.0.79 does (rueidislock/lock.go): a lock is a
// majority (KeyMajority, default 2) of KeyMajority·2−1 keys
// "rueidislock:<i>:<name>" on the same Redis, each set by a Lua script
// with SET NX PXAT deadline, where deadline is the client's own
// time.Now() plus KeyValidity, sent as Unix milliseconds. A goroutine per
// key extends it every ExtendInterval (KeyValidity/2) with PEXPIREAT
// time.Now()+KeyValidity, and client-side caching (CLIENT TRACKING)
// tells it at once when another client writes the key, when it checks
// the key again. When a majority of its keys are lost (an extend or a
// check finds another value), the library cancels the lock's context.
//
// The flaw the harness measures: the keys' expiry is an absolute time on
// the client's clock, which the server compares with its own. A server
// clock ahead of the client's by more than KeyValidity (or a client clock
// that far behind the server's) makes every SET PXAT set a key that is
// already expired: the acquire succeeds, nothing is left in Redis, and a
// second client is granted the same lock. An offset of more than half
// the validity makes each key expire before its next extend. Only the
// relative offset matters; locktest's clock-bump moves the node's clock
// (a client clock offset reaches no Go library: see docs/faults.md).
// FallbackSETPX (param setpx=on) sends the acquire as a relative PX
// instead, but the extends still send PEXPIREAT.
//
// It has no fencing token (Lease.HasToken is false). The lease's Value is
// the harness's unique value, which the check-and-set resource mode
// claims with; the keys themselves hold rueidislock's own random value,
// which it does not expose. Acquire fails at once when the lock is held
// (TryWithContext); the Locker is built on the first Acquire, so that a
// node that is down when the worker starts is that acquire's failure.
//
// Params (impls.Config.Params):
//
//   - setpx=on|off: FallbackSETPX, default off (rueidislock's default).
//   - majority=N: KeyMajority, default 2 (rueidislock's default: 3 keys).
package rueidislock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
)

// Module is the Go module of rueidislock.
const Module = "github.com/redis/rueidis"

// Timeouts of the rueidis client: a dial, and a reply to a command sent.
const (
	dialTimeout = time.Second
	ioTimeout   = time.Second
)

// The impl params.
const (
	ParamSetPX    = "setpx"
	ParamMajority = "majority"
)

func init() {
	impls.Register(impls.Impl{
		Name: "rueidislock", Backend: backend.Redis,
		Wait:    "fails at once (TryWithContext)",
		Notices: "rueidislock cancels the lock's context: a majority of its keys were found taken or gone, by an extend or a client-side-caching invalidation",
		Doc: "rueidislock of github.com/redis/rueidis: a majority of 3 keys on one redis-server set with SET NX PXAT, the client's time.Now() plus the validity, " +
			"kept alive by PEXPIREAT every validity/2; a lease without a fencing token, and a server clock ahead of the client's by more than the validity makes every acquire set an expired key, so two clients hold the lock.",
		Libraries: []string{Module},
		New: func(_ context.Context, cfg impls.Config) (impls.Client, error) {
			return New(cfg)
		},
	})
}

// params are the impl's settings.
type params struct {
	setpx    bool
	majority int32
}

// parseParams reads the impl params, refusing unknown ones and bad values.
func parseParams(ps map[string]string) (params, error) {
	p := params{majority: 2}
	for _, k := range slices.Sorted(maps.Keys(ps)) {
		v := ps[k]
		switch k {
		case ParamSetPX:
			switch v {
			case "on":
				p.setpx = true
			case "off":
				p.setpx = false
			default:
				return p, fmt.Errorf("rueidislock: impl param %s=%q must be on or off", k, v)
			}
		case ParamMajority:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 16 {
				return p, fmt.Errorf("rueidislock: impl param %s=%q must be a whole number from 1 to 16", k, v)
			}
			p.majority = int32(n)
		default:
			return p, fmt.Errorf("rueidislock: unknown impl param %q (known: %s, %s)", k, ParamSetPX, ParamMajority)
		}
	}
	return p, nil
}

// Client is one process's rueidislock. The Locker is built on the first
// Acquire with that acquire's ttl as its KeyValidity, and again when a
// later acquire asks for another ttl. It is not safe for concurrent use,
// except that the notices of lost locks come from rueidislock's
// goroutines.
type Client struct {
	cfg    impls.Config
	p      params
	values impls.Values

	locker rueidislock.Locker
	ttl    time.Duration // the Locker's KeyValidity

	// base is the parent of every lock's context: it has no deadline, which
	// rueidislock would take as the lock's validity, and ends at Close.
	base context.Context
	stop context.CancelFunc

	held map[string]*holding // by the lease's value
}

var _ impls.Client = (*Client)(nil)

// holding is one held lock: rueidislock's CancelFunc, which releases it,
// and the stop of the watch that tells the holder when the library
// cancels the lock's context by itself.
type holding struct {
	cancel    context.CancelFunc
	stopWatch func() bool
}

// New checks cfg and its params. It does not connect.
func New(cfg impls.Config) (*Client, error) {
	if err := cfg.Check("rueidislock"); err != nil {
		return nil, err
	}
	p, err := parseParams(cfg.Params)
	if err != nil {
		return nil, err
	}
	base, stop := context.WithCancel(context.Background())
	return &Client{cfg: cfg, p: p, values: impls.Values{Process: cfg.Process}, base: base, stop: stop, held: map[string]*holding{}}, nil
}

// lockerFor returns the Locker whose KeyValidity is ttl, building it (and
// closing one of another validity that holds nothing) when there is none.
func (c *Client) lockerFor(ttl time.Duration) (rueidislock.Locker, error) {
	if c.locker != nil && c.ttl == ttl {
		return c.locker, nil
	}
	if c.locker != nil {
		if len(c.held) > 0 {
			return nil, fmt.Errorf("rueidislock: an acquire with ttl %v while locks of ttl %v are held by the same client", ttl, c.ttl)
		}
		c.locker.Close()
		c.locker = nil
	}
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{
			InitAddress:      []string{c.cfg.Addrs[0]},
			Dialer:           net.Dialer{Timeout: dialTimeout},
			ConnWriteTimeout: ioTimeout,
			// Redis 7.0 does not know CLIENT SETINFO.
			ClientSetInfo: rueidis.DisableClientSetInfo,
		},
		KeyValidity:   ttl,
		KeyMajority:   c.p.majority,
		FallbackSETPX: c.p.setpx,
	})
	if err != nil {
		return nil, err
	}
	c.locker, c.ttl = l, ttl
	return l, nil
}

// Acquire takes lock with TryWithContext, the keys' validity ttl. A lock
// that is held is impls.ErrNotAcquired (rueidislock.ErrNotLocked); a
// client that cannot connect is a failure before anything was sent; any
// other error leaves the outcome unknown. The lease's ValidUntil is 0:
// the library keeps the keys alive until the release, and says when it
// could not.
func (c *Client) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	if ttl < time.Millisecond {
		return impls.Lease{}, fmt.Errorf("rueidislock: ttl %v is under a millisecond", ttl)
	}
	if err := ctx.Err(); err != nil {
		return impls.Lease{}, err
	}
	locker, err := c.lockerFor(ttl)
	if err != nil {
		return impls.Lease{}, impls.NotSent(fmt.Errorf("rueidislock: %w", err))
	}
	value := c.values.Next()
	lctx, cancel, err := locker.TryWithContext(c.base, lock)
	switch {
	case errors.Is(err, rueidislock.ErrNotLocked):
		return impls.Lease{}, fmt.Errorf("%w: %v", impls.ErrNotAcquired, err)
	case errors.Is(err, rueidislock.ErrLockerClosed):
		return impls.Lease{}, impls.NotSent(fmt.Errorf("rueidislock: %w", err))
	case err != nil:
		return impls.Lease{}, fmt.Errorf("rueidislock %s: %w", lock, err)
	}
	h := &holding{cancel: cancel}
	h.stopWatch = context.AfterFunc(lctx, func() {
		c.cfg.Tell(lock, value, "rueidislock cancelled the lock's context: a majority of its keys were taken or gone")
	})
	c.held[value] = h
	return impls.Lease{Lock: lock, Value: value, Node: c.cfg.Addrs[0]}, nil
}

// Release calls the lock's CancelFunc, which stops the extends and deletes
// each key that still holds the lock's value, and waits for them. A lock
// whose context the library had already cancelled (it lost the lock) is
// impls.ErrNotHeld. rueidislock does not say whether its deletes
// succeeded, so Released names nothing.
func (c *Client) Release(_ context.Context, l impls.Lease) (impls.Released, error) {
	h, ok := c.held[l.Value]
	if !ok {
		return impls.Released{}, fmt.Errorf("rueidislock: release of a lease this client does not hold (%s %s)", l.Lock, l.Value)
	}
	delete(c.held, l.Value)
	told := !h.stopWatch()
	h.cancel()
	if told {
		return impls.Released{}, fmt.Errorf("%w: rueidislock had cancelled the lock's context before the release (the lock was lost)", impls.ErrNotHeld)
	}
	return impls.Released{}, nil
}

// Close stops the watches, closes the Locker (whose key goroutines then
// delete the keys they still hold) and its connections.
func (c *Client) Close() error {
	for v, h := range c.held {
		h.stopWatch()
		delete(c.held, v)
	}
	if c.locker != nil {
		c.locker.Close()
	}
	c.stop()
	return nil
}
