package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/impls"
)

// SetNXPX is redis-set-nx-px: SET key value NX PX ttl with a unique value,
// and in the same Lua script, only if the SET succeeded, INCR of the counter
// key "<lock>:fence", whose new value is the lease's fencing token. Release
// is the compare-and-delete script.
//
// Failure mode: it is still a lease. A holder paused past its ttl keeps
// believing it holds the lock while the next holder has it; only a resource
// that checks the token is safe. The counter lives in the same unreplicated
// node, so a node that restarts without its data hands out tokens from 1
// again, and a lock taken before the crash is free at once.
type SetNXPX struct {
	*conn
}

var _ impls.Client = (*SetNXPX)(nil)

// setNXPXIncr sets KEYS[1] to ARGV[1] for ARGV[2] ms if it is absent and then
// returns the incremented KEYS[2]; it returns nil if KEYS[1] was present.
var setNXPXIncr = goredis.NewScript(`if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return redis.call("incr", KEYS[2])
end
return false`)

// Acquire runs the SET NX PX + INCR script once. It returns
// impls.ErrNotAcquired if the key exists; on success the lease carries the
// token.
func (c *SetNXPX) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	tok, err := setNXPXIncr.Run(ctx, c.rdb, []string{lock, lock + ":fence"}, value, ttl.Milliseconds()).Int64()
	if err := notAcquiredOnNil(err); err != nil {
		return impls.Lease{}, err
	}
	l := c.lease(lock, value, start, ttl)
	l.Token, l.HasToken = uint64(tok), true
	return l, nil
}

// Release deletes the key only if it still holds the lease's value. It
// returns impls.ErrNotHeld if the lease expired or another holder has the
// lock.
func (c *SetNXPX) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	return c.releaseCompareAndDelete(ctx, l)
}
