package seeded

import (
	"context"
	"time"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-wall-clock-token", Fenced: true, TokenSource: "the client's wall clock in nanoseconds",
		Seeded: "the fencing token is the client's wall-clock time, which is not monotonic across clients",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &wallClockToken{c} }),
	})
}

// wallClockToken is redis-set-nx-px whose token is the time on the
// client's wall clock (Config.Wall) when it was granted, in nanoseconds:
// it increases from holder to holder only while the clients' clocks agree.
type wallClockToken struct{ *setNXPX }

// Acquire sets the key and takes the wall clock's time as the token.
func (c *wallClockToken) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	if err := notAcquiredOnNil(setNXPXOnly.Run(ctx, c.rdb, []string{lock}, value, ttl.Milliseconds()).Err()); err != nil {
		return impls.Lease{}, err
	}
	return c.lease(lock, value, start, ttl, c.cfg.Wall().UnixNano()), nil // BUG: a clock is no counter.
}
