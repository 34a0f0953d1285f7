package seeded

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-get-then-set", Fenced: true, TokenSource: "Redis INCR counter, in the set's Lua script",
		Seeded: "check-then-set: GET the key, and SET it (without NX) when it was absent, in two steps (pause point between-get-and-set between them)",
		Points: []string{HookBetweenGetAndSet},
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &getThenSet{c} }),
	})
}

// HookBetweenGetAndSet is the Config.Hook point seeded-get-then-set passes
// after its GET found the key absent and before it sets it.
const HookBetweenGetAndSet = "between-get-and-set"

// setPXIncr sets KEYS[1] to ARGV[1] for ARGV[2] ms whatever it holds and
// returns the incremented KEYS[2].
var setPXIncr = goredis.NewScript(`redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2])
return redis.call("incr", KEYS[2])`)

// getThenSet is redis-set-nx-px whose acquire looks before it sets: two
// contenders that both find the key absent both set it and both believe
// they hold the lock.
type getThenSet struct{ *setNXPX }

// Acquire GETs the key; if it is absent, sets it and takes a token.
func (c *getThenSet) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	// BUG: the check and the set are two requests.
	if err := c.rdb.Get(ctx, lock).Err(); err == nil {
		return impls.Lease{}, impls.ErrNotAcquired
	} else if !errors.Is(err, goredis.Nil) {
		return impls.Lease{}, err
	}
	c.cfg.Pass(HookBetweenGetAndSet)
	tok, err := setPXIncr.Run(ctx, c.rdb, []string{lock, fenceKey(lock)}, value, ttl.Milliseconds()).Int64()
	if err != nil {
		return impls.Lease{}, err
	}
	return c.lease(lock, value, start, ttl, tok), nil
}
