package seeded

import (
	"context"
	"time"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-clock-after-reply", Fenced: true, TokenSource: "Redis INCR counter, in the acquire's Lua script",
		Seeded: "the lease is timed from the acquire's reply, not from its request: ValidUntil = the reply's time + ttl",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &clockAfterReply{c} }),
	})
}

// clockAfterReply is redis-set-nx-px whose holder starts its lease's
// clock when the reply arrives: the server started the key's TTL when it
// ran the SET, earlier by the reply's way back and any stall of the
// client, so the holder believes in a lease longer than the key's.
type clockAfterReply struct{ *setNXPX }

// Acquire runs the script once and times the lease from its reply.
func (c *clockAfterReply) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, _, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	tok, err := setNXPXIncr.Run(ctx, c.rdb, []string{lock, fenceKey(lock)}, value, ttl.Milliseconds()).Int64()
	if err := notAcquiredOnNil(err); err != nil {
		return impls.Lease{}, err
	}
	return c.lease(lock, value, c.cfg.Now(), ttl, tok), nil // BUG: the clock read after the reply.
}
