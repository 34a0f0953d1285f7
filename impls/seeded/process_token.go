package seeded

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-process-token", Fenced: true, TokenSource: "a counter in the client's own memory",
		Seeded: "the fencing token comes from a per-process counter, not from the lock service",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &processToken{setNXPX: c} }),
	})
}

// processToken is redis-set-nx-px whose token counts this client's own
// grants instead of the service's: each client's tokens increase, two
// clients' do not.
type processToken struct {
	*setNXPX
	n uint64
}

// setNXPXOnly is SET NX PX alone: setNXPXIncr without its INCR.
var setNXPXOnly = goredis.NewScript(`return redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2])`)

// Acquire sets the key and takes the next number of the client's counter.
func (c *processToken) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	if err := notAcquiredOnNil(setNXPXOnly.Run(ctx, c.rdb, []string{lock}, value, ttl.Milliseconds()).Err()); err != nil {
		return impls.Lease{}, err
	}
	c.n++ // BUG: the token is this process's, not the lock service's.
	return c.lease(lock, value, start, ttl, int64(c.n)), nil
}
