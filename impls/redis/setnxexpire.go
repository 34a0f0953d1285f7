package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/impls"
)

// HookBetweenSetNXExpire is the Config.Hook point redis-setnx-expire passes
// after its SETNX succeeded and before it sends PEXPIRE. A client killed
// there leaves a lock without a TTL.
const HookBetweenSetNXExpire = "between-setnx-expire"

// SetNXExpire is redis-setnx-expire: SETNX key value, and if that set the
// key, PEXPIRE key ttl as a second command. Release is the compare-and-delete
// script. There is no fencing token.
//
// Failure mode: the two commands are not atomic. A client that crashes, or
// loses its connection, after SETNX and before PEXPIRE leaves a key with no
// TTL: a lock that nobody can ever take again (a liveness failure). The
// harness reaches that window through the HookBetweenSetNXExpire hook.
type SetNXExpire struct {
	*conn
}

var _ impls.Client = (*SetNXExpire)(nil)

// Acquire sends SETNX, calls the hook, then sends PEXPIRE. It returns
// impls.ErrNotAcquired if SETNX found the key. An error from PEXPIRE is
// returned as is, although the lock is then held without a TTL: the outcome
// is unknown to the harness, as it would be to the user.
func (c *SetNXExpire) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	ok, err := c.rdb.SetNX(ctx, lock, value, 0).Result() // 0: plain SETNX
	if err != nil {
		return impls.Lease{}, err
	}
	if !ok {
		return impls.Lease{}, impls.ErrNotAcquired
	}
	c.cfg.Pass(HookBetweenSetNXExpire)
	set, err := c.rdb.PExpire(ctx, lock, ttl).Result()
	if err != nil {
		return impls.Lease{}, err
	}
	if !set {
		// Someone deleted the key between the two commands.
		return impls.Lease{}, fmt.Errorf("redis: lock %q vanished between SETNX and PEXPIRE", lock)
	}
	return c.lease(lock, value, start, ttl), nil
}

// Release deletes the key only if it still holds the lease's value. It
// returns impls.ErrNotHeld if the lease expired or another holder has the
// lock.
func (c *SetNXExpire) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	return c.releaseCompareAndDelete(ctx, l)
}
