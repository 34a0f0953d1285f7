package seeded

import (
	"context"
	"time"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-short-lease", Fenced: true, TokenSource: "Redis INCR counter, in the acquire's Lua script",
		Seeded: "the lease is shorter on the server than the client believes: PX is ttl/2, ValidUntil is the whole ttl",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &shortLease{c} }),
	})
}

// shortLease is redis-set-nx-px whose key lives half the ttl the holder
// believes it holds (a unit mistake, a TTL the server cut): the lock is
// free, and granted again, while its holder still believes it holds it.
type shortLease struct{ *setNXPX }

// Acquire sets the key for ttl/2 and returns a lease valid for ttl.
func (c *shortLease) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	px := max(ttl.Milliseconds()/2, 1) // BUG: the server's lease is half the holder's.
	tok, err := setNXPXIncr.Run(ctx, c.rdb, []string{lock, fenceKey(lock)}, value, px).Int64()
	if err := notAcquiredOnNil(err); err != nil {
		return impls.Lease{}, err
	}
	return c.lease(lock, value, start, ttl, tok), nil
}
