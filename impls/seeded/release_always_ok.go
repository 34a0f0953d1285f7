package seeded

import (
	"context"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-release-always-ok", Fenced: true, TokenSource: "Redis INCR counter, in the acquire's Lua script",
		Seeded: "the release ignores compare-and-delete's answer and reports every release as done, also of a lease no longer held",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &releaseAlwaysOK{c} }),
	})
}

// releaseAlwaysOK is redis-set-nx-px whose release does not read the
// script's answer: a holder whose lease had ended is told it released the
// lock, and never learns that it had lost it.
type releaseAlwaysOK struct{ *setNXPX }

// Release runs compare-and-delete and reports success unless the request
// failed.
func (c *releaseAlwaysOK) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	if err := compareAndDelete.Run(ctx, c.rdb, []string{l.Lock}, l.Value).Err(); err != nil {
		return impls.Released{}, err
	}
	return impls.Released{Removed: l.Value}, nil // BUG: 0 (not held) reads as done.
}
