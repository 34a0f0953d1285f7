package seeded

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/redis"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-setnx-expire", Fenced: true, TokenSource: "Redis INCR counter, after the SETNX and the PEXPIRE",
		Points: []string{redis.HookBetweenSetNXExpire},
		Seeded: "the acquire is not atomic: SETNX, then PEXPIRE as a second command (pause point between-setnx-expire between them)",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &setNXThenExpire{c} }),
	})
}

// setNXThenExpire is redis-set-nx-px whose acquire sets the key with SETNX
// and gives it its TTL with a second command, PEXPIRE: a client that dies
// or stalls between the two leaves a key without a TTL, which nobody can
// take again. It passes redis.HookBetweenSetNXExpire between them.
type setNXThenExpire struct{ *setNXPX }

// Acquire sends SETNX, passes the pause point, sends PEXPIRE, then INCR
// for the token.
func (c *setNXThenExpire) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	// BUG: two commands where the recipe sends one script.
	ok, err := c.rdb.SetNX(ctx, lock, value, 0).Result()
	if err != nil {
		return impls.Lease{}, err
	}
	if !ok {
		return impls.Lease{}, impls.ErrNotAcquired
	}
	c.cfg.Pass(redis.HookBetweenSetNXExpire)
	if set, err := c.rdb.PExpire(ctx, lock, ttl).Result(); err != nil || !set {
		return impls.Lease{}, fmt.Errorf("redis: PEXPIRE %s after SETNX: set %v, %v", lock, set, err)
	}
	tok, err := c.rdb.Incr(ctx, fenceKey(lock)).Result()
	if err != nil {
		return impls.Lease{}, err
	}
	return c.lease(lock, value, start, ttl, tok), nil
}
