package redis

import (
	"context"
	"time"

	"github.com/locktest/locktest/impls"
)

// NaiveDel is redis-naive-del: SET key value NX PX ttl, released by deleting
// the key without looking at whose value it holds. There is no fencing
// token.
//
// Failure mode: a holder whose lease expired, and whose lock was then taken
// by another client, deletes that client's lock on release, letting a third
// client in while the second still holds it.
//
// The delete is sent as GETDEL (Redis 6.2+) rather than DEL: it is the same
// single, unconditional, atomic delete, but it returns the value it removed,
// so the history shows whose lock the release deleted.
type NaiveDel struct {
	*conn
}

var _ impls.Client = (*NaiveDel)(nil)

// Acquire sends SET NX PX once. It returns impls.ErrNotAcquired if the key
// exists.
func (c *NaiveDel) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value, start, err := c.begin(ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	if err := notAcquiredOnNil(c.rdb.Do(ctx, "set", lock, value, "NX", "PX", ttl.Milliseconds()).Err()); err != nil {
		return impls.Lease{}, err
	}
	return c.lease(lock, value, start, ttl), nil
}

// Release deletes the key, whoever holds it. It returns impls.ErrNotHeld only
// if there was no key; otherwise Released.Removed is the value deleted,
// which is another holder's when this lease had expired.
func (c *NaiveDel) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	return c.getDel(ctx, l.Lock)
}
