package seeded

import (
	"context"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-release-wrong-key", Fenced: true, TokenSource: "Redis INCR counter, in the acquire's Lua script",
		Seeded: "the release deletes the wrong key: its compare-and-delete names a key the acquire never set (a prefix added in one place only)",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &releaseWrongKey{c} }),
	})
}

// wrongKeyPrefix is the prefix the release puts before the lock's name,
// which the acquire does not.
const wrongKeyPrefix = "locks:"

// releaseWrongKey is redis-set-nx-px whose release looks for the lock
// under another key: it deletes nothing, the lock stays held until its
// TTL runs out, and the holder is told its lease was not held.
type releaseWrongKey struct{ *setNXPX }

// Release runs compare-and-delete on wrongKeyPrefix + the lock.
func (c *releaseWrongKey) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	key := wrongKeyPrefix + l.Lock // BUG: the acquire set l.Lock.
	n, err := compareAndDelete.Run(ctx, c.rdb, []string{key}, l.Value).Int64()
	if err != nil {
		return impls.Released{}, err
	}
	if n == 0 {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}
