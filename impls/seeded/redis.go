package seeded

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/redis"
)

// redisBase is the correct recipe the Redis impls of the zoo vary.
const redisBase = "redis-set-nx-px"

// registerRedis registers a seeded variant of redis-set-nx-px over one
// Redis node, written with go-redis.
func registerRedis(i impls.Impl) {
	i.Backend, i.SeededFrom, i.Libraries = backend.Redis, redisBase, []string{redis.GoRedisModule}
	if i.Wait == "" {
		i.Wait = "fails at once"
	}
	register(i)
}

// newRedisImpl returns the impls.Impl.New of a Redis variant: the
// connection of the correct recipe (newRedisConn), wrapped by wrap.
func newRedisImpl(wrap func(*setNXPX) impls.Client) func(context.Context, impls.Config) (impls.Client, error) {
	return impls.Wrap(newRedisConn, func(c *redisConn) impls.Client { return wrap(&setNXPX{c}) })
}

// redisConn is what every Redis client of the zoo holds, as impls/redis's
// conn: the go-redis client, the configuration and the lock values.
type redisConn struct {
	rdb    *goredis.Client
	cfg    impls.Config
	addr   string
	values impls.Values
}

// newRedisConn checks cfg and builds the go-redis client of
// Config.Addrs[0] with impls/redis's options (redis.Options). It does
// not connect.
func newRedisConn(cfg impls.Config) (*redisConn, error) {
	if err := cfg.Check(backend.Redis); err != nil {
		return nil, err
	}
	if cfg.Wall == nil {
		cfg.Wall = time.Now
	}
	for k := range cfg.Params {
		return nil, fmt.Errorf("seeded: unknown impl param %q (the seeded impls take none)", k)
	}
	rdb := goredis.NewClient(redis.Options(cfg.Addrs[0]))
	return &redisConn{rdb: rdb, cfg: cfg, addr: cfg.Addrs[0], values: impls.Values{Process: cfg.Process}}, nil
}

// Close closes the client's connections.
func (c *redisConn) Close() error { return c.rdb.Close() }

// begin checks ttl and returns the acquire's unique value and the harness
// time it is sent at.
func (c *redisConn) begin(ttl time.Duration) (string, time.Duration, error) {
	if ttl < time.Millisecond {
		return "", 0, fmt.Errorf("redis: ttl %v is below Redis's 1ms resolution", ttl)
	}
	return c.values.Next(), c.cfg.Now(), nil
}

// lease is the lease of an acquire sent at start for ttl (cut to whole
// milliseconds, as sent), with token tok.
func (c *redisConn) lease(lock, value string, start, ttl time.Duration, tok int64) impls.Lease {
	return impls.Lease{Lock: lock, Value: value, ValidUntil: start + ttl.Truncate(time.Millisecond), Node: c.addr,
		Token: uint64(tok), HasToken: true}
}

// fenceKey is the key of the lock's INCR token counter.
func fenceKey(lock string) string { return lock + ":fence" }

// setNXPXIncr is redis-set-nx-px's acquire: SET KEYS[1] ARGV[1] NX PX
// ARGV[2] and, only if it set the key, INCR KEYS[2], whose value it
// returns; nil when the key existed.
var setNXPXIncr = goredis.NewScript(`if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return redis.call("incr", KEYS[2])
end
return false`)

// compareAndDelete deletes KEYS[1] only if it holds ARGV[1]; it returns 1
// if it deleted it, else 0.
var compareAndDelete = goredis.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`)

// setNXPX is the correct recipe, redis-set-nx-px as impls/redis writes
// it: Acquire runs setNXPXIncr once (impls.ErrNotAcquired when the key
// exists; any other error is returned, its outcome unknown), and the
// lease believes the ttl from the moment before the script was sent;
// Release is compareAndDelete (impls.ErrNotHeld when the key no longer
// holds the lease's value). No impl registers it: each of the zoo's Redis
// impls embeds it and replaces the part its bug breaks.
type setNXPX struct{ *redisConn }

var _ impls.Client = (*setNXPX)(nil)

// Acquire is redis-set-nx-px's.
func (c *setNXPX) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	tok, err := setNXPXIncr.Run(ctx, c.rdb, []string{lock, fenceKey(lock)}, value, ttl.Milliseconds()).Int64()
	if err := notAcquiredOnNil(err); err != nil {
		return impls.Lease{}, err
	}
	return c.lease(lock, value, start, ttl, tok), nil
}

// Release is redis-set-nx-px's.
func (c *setNXPX) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	n, err := compareAndDelete.Run(ctx, c.rdb, []string{l.Lock}, l.Value).Int64()
	if err != nil {
		return impls.Released{}, err
	}
	if n == 0 {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}

// notAcquiredOnNil maps go-redis's nil reply (the key existed) to
// impls.ErrNotAcquired.
func notAcquiredOnNil(err error) error {
	if errors.Is(err, goredis.Nil) {
		return impls.ErrNotAcquired
	}
	return err
}
