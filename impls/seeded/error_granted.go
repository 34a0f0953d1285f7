package seeded

import (
	"context"
	"errors"
	"time"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-error-granted", Fenced: true, TokenSource: "Redis INCR counter, in the acquire's Lua script (none when an error was taken for a grant)",
		Seeded: "an acquire whose request failed (an error, a timeout) is taken as granted",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &errorGranted{c} }),
	})
}

// errorGranted is redis-set-nx-px that reads only the "key exists" answer
// as a refusal: any other outcome, an error or a timeout included, is
// taken as a grant (a lease without a token, since none came back).
type errorGranted struct{ *setNXPX }

// Acquire runs the script once; only the nil reply is impls.ErrNotAcquired.
func (c *errorGranted) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	tok, err := setNXPXIncr.Run(ctx, c.rdb, []string{lock, fenceKey(lock)}, value, ttl.Milliseconds()).Int64()
	if err := notAcquiredOnNil(err); errors.Is(err, impls.ErrNotAcquired) {
		return impls.Lease{}, err
	} else if err != nil {
		// BUG: an error is not a refusal, so the lock is taken as ours.
		l := c.lease(lock, value, start, ttl, 0)
		l.HasToken = false
		return l, nil
	}
	return c.lease(lock, value, start, ttl, tok), nil
}
