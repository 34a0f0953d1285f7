package pg

import (
	"context"
	"time"

	"github.com/locktest/locktest/impls"
)

// lockKey is the SQL expression of a lock name's advisory key ($1 is the
// name).
const lockKey = "hashtextextended($1, 0)"

// Advisory is pg-advisory: SELECT pg_advisory_lock(key) on the dedicated
// session under a lock_timeout, then SELECT nextval('locktest_fence');
// release is SELECT pg_advisory_unlock(key).
//
//   - Token: the nextval taken while holding the lock.
//   - Blocking: yes, up to lock_timeout (a little below the deadline), whose
//     expiry is a certain failure.
//   - Reentrant: yes within one session (PostgreSQL stacks advisory locks;
//     each needs its own unlock), not across sessions; the harness never
//     nests.
//   - Holder dies: its connection closes, the backend ends the session at
//     once and the next waiter gets the lock. A holder cut off by a
//     partition keeps the lock until the server notices (TCP keepalive, by
//     default hours), and a holder whose connection broke goes on believing
//     it holds the lock: the lease has no expiry (ValidUntil 0).
//   - Survives: client crashes (the lock is freed), not a server crash or
//     restart (every lock is gone, holders are not told; the sequence
//     survives, so tokens keep increasing).
type Advisory struct {
	*session
}

var _ impls.Client = (*Advisory)(nil)

// Acquire waits for the lock until a little before ctx's deadline, then
// takes a token. It returns impls.ErrNotAcquired when the wait timed out.
func (c *Advisory) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Lease{}, err
	}
	if _, err := conn.Exec(ctx, "SELECT set_config('lock_timeout', $1, false)", lockTimeout(ctx)); err != nil {
		c.Drop()
		return impls.Lease{}, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock("+lockKey+")", lock); err != nil {
		if timedOut(err) {
			return impls.Lease{}, impls.ErrNotAcquired
		}
		c.Drop()
		return impls.Lease{}, err
	}
	var tok int64
	if err := conn.QueryRow(ctx, "SELECT nextval('"+Sequence+"')").Scan(&tok); err != nil {
		c.Drop() // ends the session, which frees the lock
		return impls.Lease{}, err
	}
	c.Hold(lock)
	return impls.Lease{Lock: lock, Token: uint64(tok), HasToken: true, Value: c.Value(), Node: c.addr}, nil
}

// Release unlocks on the session that took the lock. It returns
// impls.ErrNotHeld when that session is gone or the server says this
// session does not hold the lock.
func (c *Advisory) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	conn, ok := c.Unhold(l.Lock)
	if !ok {
		return impls.Released{}, impls.ErrNotHeld
	}
	var released bool
	if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock("+lockKey+")", l.Lock).Scan(&released); err != nil {
		c.Drop()
		return impls.Released{}, err
	}
	if !released {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}

// AdvisoryXact is pg-advisory-xact: BEGIN, SET LOCAL lock_timeout,
// SELECT pg_advisory_xact_lock(key), SELECT nextval('locktest_fence'), and
// the transaction stays open for the critical section; release is COMMIT,
// which frees the lock.
//
//   - Token: the nextval taken while holding the lock; it stays used even
//     if the transaction rolls back.
//   - Blocking: yes, up to lock_timeout (a little below the deadline), whose
//     expiry is a certain failure, returned at once: the aborted
//     transaction is rolled back by the next acquire, so the answer needs
//     no second round trip before the deadline.
//   - Reentrant: within one transaction only; the harness never nests.
//   - Holder dies: the backend rolls the transaction back when the
//     connection closes, and the next waiter gets the lock. A holder cut off
//     by a partition keeps it until the server notices; the lease has no
//     expiry (ValidUntil 0).
//   - Survives: client crashes, not a server crash or restart (holders are
//     not told until they commit).
type AdvisoryXact struct {
	*session
	// aborted: the last acquire's wait timed out, and its transaction
	// awaits the ROLLBACK that the next acquire sends first.
	aborted bool
}

var _ impls.Client = (*AdvisoryXact)(nil)

// Acquire opens a transaction, waits for the lock until a little before
// ctx's deadline, and takes a token. It returns impls.ErrNotAcquired when
// the wait timed out.
func (c *AdvisoryXact) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Lease{}, err
	}
	if _, open, _ := c.EndTx(); open || c.aborted { // a lease never released, or a wait that timed out: end it first
		c.aborted = false
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			c.Drop()
			return impls.Lease{}, err
		}
	}
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		c.Drop()
		return impls.Lease{}, err
	}
	if _, err := conn.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", lockTimeout(ctx)); err != nil {
		c.Drop()
		return impls.Lease{}, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_xact_lock("+lockKey+")", lock); err != nil {
		if timedOut(err) {
			c.aborted = true
			return impls.Lease{}, impls.ErrNotAcquired
		}
		c.Drop()
		return impls.Lease{}, err
	}
	var tok int64
	if err := conn.QueryRow(ctx, "SELECT nextval('"+Sequence+"')").Scan(&tok); err != nil {
		c.Drop()
		return impls.Lease{}, err
	}
	c.HoldTx()
	return impls.Lease{Lock: lock, Token: uint64(tok), HasToken: true, Value: c.Value(), Node: c.addr}, nil
}

// Release commits the transaction, which frees the lock. It returns
// impls.ErrNotHeld when the transaction is gone with the connection that
// held it.
func (c *AdvisoryXact) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	conn, _, ok := c.EndTx()
	if !ok {
		return impls.Released{}, impls.ErrNotHeld
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		c.Drop()
		return impls.Released{}, err
	}
	return impls.Released{Removed: l.Value}, nil
}
