// Package redis holds the single-node Redis locks of the lock-selection
// articles, each written the way the articles and their readers write it,
// flaws included, because the flaws are what the harness measures:
//
//   - redis-set-nx-px: SET NX PX plus an INCR fencing token, released by
//     compare-and-delete. The recommended form.
//   - redis-setnx-expire: SETNX, then PEXPIRE as a second command.
//   - redis-setnx-getset: the pre-2.6.12 timestamp recipe with GETSET.
//   - redis-naive-del: SET NX PX released by a plain delete.
//
// Every impl talks to one redis-server, Config.Addrs[0], with a go-redis
// client that gives up quickly (1s to dial, read or write; no retries), so a
// dead or paused node yields an error, not a hang. Acquire returns
// impls.ErrNotAcquired only when the lock is taken by someone else; every
// other error is returned as go-redis gave it and leaves the outcome
// unknown. Lease.ValidUntil is Config.Now read just before the acquire is
// sent, plus the ttl: the holder's most conservative belief.
package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
)

// Timeouts of the go-redis client every impl uses.
const (
	dialTimeout = time.Second
	ioTimeout   = time.Second
)

func init() {
	for _, i := range []impls.Impl{
		{
			Name: "redis-set-nx-px", Backend: backend.Redis, Fenced: true,
			TokenSource: "Redis INCR counter, in the acquire's Lua script", Wait: "fails at once",
			Doc: "SET NX PX with a unique value plus an INCR fencing token in one Lua script, released by compare-and-delete; " +
				"the recommended single-node form, still a lease that a paused holder outlives, and its tokens restart when the node loses its data.",
			New: impls.Wrap(newConn, func(c *conn) impls.Client { return &SetNXPX{c} }),
		},
		{
			Name: "redis-setnx-expire", Backend: backend.Redis, Points: []string{HookBetweenSetNXExpire}, Wait: "fails at once",
			Doc: "SETNX then PEXPIRE as two commands, released by compare-and-delete; " +
				"a client that dies between the two leaves a lock with no TTL that nobody can ever take.",
			New: impls.Wrap(newConn, func(c *conn) impls.Client { return &SetNXExpire{c} }),
		},
		{
			Name: "redis-setnx-getset", Backend: backend.Redis, Wait: "fails at once (unless the holder's timestamp has passed)",
			Doc: "the pre-2.6.12 SETNX/GET/GETSET recipe with the expiry timestamp in the value and no TTL; " +
				"it trusts every client's wall clock, so a skewed clock steals a live lock, and a losing GETSET still overwrites the winner's value.",
			New: impls.Wrap(newConn, func(c *conn) impls.Client { return &SetNXGetSet{c} }),
		},
		{
			Name: "redis-naive-del", Backend: backend.Redis, Wait: "fails at once",
			Doc: "SET NX PX released by a plain delete; " +
				"a holder whose lease expired deletes the next holder's lock.",
			New: impls.Wrap(newConn, func(c *conn) impls.Client { return &NaiveDel{c} }),
		},
	} {
		i.Libraries = []string{GoRedisModule}
		impls.Register(i)
	}
}

// GoRedisModule is the module of go-redis, the client every Redis impl of
// this package is written with.
const GoRedisModule = "github.com/redis/go-redis/v9"

// conn is what the four clients share: the connection, the configuration
// and the source of unique lock values.
type conn struct {
	rdb    *goredis.Client
	cfg    impls.Config
	addr   string
	values impls.Values
}

// newConn checks cfg and builds the go-redis client. It does not connect:
// go-redis dials on the first command, so a node that is down when the
// worker starts shows up as the first acquire's error.
func newConn(cfg impls.Config) (*conn, error) {
	if err := cfg.Check(backend.Redis); err != nil {
		return nil, err
	}
	if cfg.Wall == nil {
		cfg.Wall = time.Now
	}
	addr := cfg.Addrs[0]
	rdb := goredis.NewClient(Options(addr))
	return &conn{rdb: rdb, cfg: cfg, addr: addr, values: impls.Values{Process: cfg.Process}}, nil
}

// Options are the go-redis options of a single-node client of addr, as
// this package's impls and their seeded variants (impls/seeded) use them:
// dialTimeout to dial, ioTimeout to read or write, no retries, each
// command bounded by its context.
func Options(addr string) *goredis.Options {
	return &goredis.Options{
		Addr:                  addr,
		DialTimeout:           dialTimeout,
		DialerRetries:         1,
		ReadTimeout:           ioTimeout,
		WriteTimeout:          ioTimeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		// Redis 7.0 knows neither CLIENT SETINFO nor CLIENT
		// MAINT_NOTIFICATIONS; skip them rather than pay a failing round
		// trip on every new connection.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// lease builds the lease of a successful acquire sent at start. The ttl is
// cut to whole milliseconds, as it was sent to Redis, so that the belief
// never outlasts the key.
func (c *conn) lease(lock, value string, start, ttl time.Duration) impls.Lease {
	return impls.Lease{Lock: lock, Value: value, ValidUntil: start + ttl.Truncate(time.Millisecond), Node: c.addr}
}

// Close closes the client's connections.
func (c *conn) Close() error {
	return c.rdb.Close()
}

// begin starts an acquire with ttl: it checks the ttl and returns a unique
// lock value and the harness time the acquire is sent at.
func (c *conn) begin(ttl time.Duration) (value string, start time.Duration, err error) {
	if err := checkTTL(ttl); err != nil {
		return "", 0, err
	}
	return c.values.Next(), c.cfg.Now(), nil
}

// notAcquiredOnNil maps go-redis's nil reply, which a conditional set
// gives when the key exists, to impls.ErrNotAcquired, and returns any other
// error as it is.
func notAcquiredOnNil(err error) error {
	if errors.Is(err, goredis.Nil) {
		return impls.ErrNotAcquired
	}
	return err
}

// getDel deletes lock with GETDEL, whoever holds it, and returns the value
// it removed; impls.ErrNotHeld when there was no key.
func (c *conn) getDel(ctx context.Context, lock string) (impls.Released, error) {
	v, err := c.rdb.GetDel(ctx, lock).Result()
	if errors.Is(err, goredis.Nil) {
		return impls.Released{}, impls.ErrNotHeld
	}
	if err != nil {
		return impls.Released{}, err
	}
	return impls.Released{Removed: v}, nil
}

// checkTTL rejects a ttl Redis cannot express in PX milliseconds.
func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("redis: ttl %v is below Redis's 1ms resolution", ttl)
	}
	return nil
}

// compareAndDelete is the release script of the Redis documentation: delete
// the key only if it still holds the caller's value. It returns 1 if it
// deleted the key, else 0.
var compareAndDelete = goredis.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`)

// releaseCompareAndDelete releases l with compareAndDelete: ErrNotHeld if
// the key no longer holds l.Value, else Released{Removed: l.Value}.
func (c *conn) releaseCompareAndDelete(ctx context.Context, l impls.Lease) (impls.Released, error) {
	n, err := compareAndDelete.Run(ctx, c.rdb, []string{l.Lock}, l.Value).Int64()
	if err != nil {
		return impls.Released{}, err
	}
	if n == 0 {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}
