package mysql

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/locktest/locktest/impls"
)

// GetLock is mysql-get-lock: SELECT GET_LOCK(name, timeout) on the pinned
// session, released by SELECT RELEASE_LOCK(name).
//
//   - Algorithm: a named lock owned by the server session; the server frees
//     it when the session ends (the client closed its connection, or the
//     server saw it die).
//   - Token: none (HasToken false); the lock value names the session.
//   - Blocking: yes; GET_LOCK waits on the server up to the timeout this
//     client passes (a little less than its deadline); a timeout returns 0,
//     a certain failure.
//   - Reentrant: yes within one session (MariaDB counts nested GET_LOCKs of
//     one name), not across sessions; the harness never nests.
//   - Holder dies: its TCP connection closes, the server ends the session at
//     once and the next waiter gets the lock. A holder cut off by a
//     partition keeps the lock until the server notices (wait_timeout, 8
//     hours by default), and a holder whose connection broke goes on
//     believing it holds the lock: the lease has no expiry (ValidUntil 0).
//   - Survives: client crashes (the lock is freed), not a server crash or
//     restart (every lock is gone, and holders are not told).
type GetLock struct {
	*session
}

var _ impls.Client = (*GetLock)(nil)

// Acquire waits on the server for the lock until a little before ctx's
// deadline. It returns impls.ErrNotAcquired when GET_LOCK timed out.
func (c *GetLock) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Lease{}, err
	}
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lock, waitBudget(ctx).Seconds()).Scan(&got)
	switch {
	case err != nil:
		c.Drop()
		return impls.Lease{}, err
	case !got.Valid:
		c.Drop()
		return impls.Lease{}, errors.New("GET_LOCK returned NULL (an error on the server)")
	case got.Int64 == 0:
		return impls.Lease{}, impls.ErrNotAcquired
	}
	c.Hold(lock)
	return impls.Lease{Lock: lock, Value: c.Value(), Node: c.addr}, nil
}

// Release runs RELEASE_LOCK on the session that took the lock. It returns
// impls.ErrNotHeld when that session is gone or the server says the lock is
// not this session's.
func (c *GetLock) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	conn, ok := c.Unhold(l.Lock)
	if !ok {
		return impls.Released{}, impls.ErrNotHeld
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", l.Lock).Scan(&got); err != nil {
		c.Drop()
		return impls.Released{}, err
	}
	if !got.Valid || got.Int64 != 1 {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}
