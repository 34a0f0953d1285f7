package mysql

import (
	"context"
	"time"

	"github.com/locktest/locktest/impls"
)

// ForUpdate is mysql-for-update: START TRANSACTION, SELECT version FROM
// row_locks WHERE name = ? FOR UPDATE, UPDATE … SET version = version + 1,
// and the transaction stays open for the critical section; release is
// COMMIT.
//
//   - Algorithm: an InnoDB row lock on the lock's row (created on first
//     use), held until the transaction ends.
//   - Token: the row's version after the increment made under the lock.
//     The increment commits with the release; a holder whose transaction is
//     rolled back (it died, or its connection broke) did not increment it,
//     so the next holder gets the same token: a token reused by two holders.
//   - Blocking: yes; the SELECT … FOR UPDATE waits on the server under a
//     max_statement_time a little below the deadline, whose expiry is a
//     certain failure.
//   - Reentrant: within one transaction only; the harness never nests.
//   - Holder dies: the server rolls its transaction back when the
//     connection closes and the next waiter gets the row. A holder cut off
//     by a partition keeps the row until the server notices; the lease has
//     no expiry (ValidUntil 0).
//   - Survives: client crashes, not a server crash (every transaction is
//     rolled back and holders are not told until they commit).
type ForUpdate struct {
	*session
	known map[string]bool
}

var _ impls.Client = (*ForUpdate)(nil)

var forUpdateSchema = []string{
	"CREATE TABLE IF NOT EXISTS " + Database + ".row_locks (name VARCHAR(191) NOT NULL PRIMARY KEY, version BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB",
}

// Acquire takes the row lock inside a new transaction and increments the
// version. It returns impls.ErrNotAcquired when the wait timed out (the
// transaction is rolled back).
func (c *ForUpdate) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Lease{}, err
	}
	if _, open, _ := c.EndTx(); open { // a lease that was never released: end it first
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			c.Drop()
			return impls.Lease{}, err
		}
	}
	wait := waitBudget(ctx)
	if !c.known[lock] {
		// A plain read first: INSERT IGNORE of an existing row would wait
		// for the row lock of its holder.
		var n int
		if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+Database+".row_locks WHERE name = ?", lock).Scan(&n); err != nil {
			c.Drop()
			return impls.Lease{}, err
		}
		if n == 0 {
			q := bounded(wait, "INSERT IGNORE INTO "+Database+".row_locks (name) VALUES (?)")
			if _, err := conn.ExecContext(ctx, q, lock); err != nil {
				if timedOut(err) {
					return impls.Lease{}, impls.ErrNotAcquired
				}
				c.Drop()
				return impls.Lease{}, err
			}
		}
		c.known[lock] = true
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
		c.Drop()
		return impls.Lease{}, err
	}
	var version uint64
	q := bounded(wait, "SELECT version FROM "+Database+".row_locks WHERE name = ? FOR UPDATE")
	err = conn.QueryRowContext(ctx, q, lock).Scan(&version)
	if err != nil {
		if timedOut(err) {
			if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
				c.Drop()
			}
			return impls.Lease{}, impls.ErrNotAcquired
		}
		c.Drop()
		return impls.Lease{}, err
	}
	if _, err := conn.ExecContext(ctx, "UPDATE "+Database+".row_locks SET version = version + 1 WHERE name = ?", lock); err != nil {
		c.Drop()
		return impls.Lease{}, err
	}
	c.HoldTx()
	return impls.Lease{Lock: lock, Token: version + 1, HasToken: true, Value: c.Value(), Node: c.addr}, nil
}

// Release commits the transaction. It returns impls.ErrNotHeld when the
// transaction is gone with the connection that held it.
func (c *ForUpdate) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	conn, _, ok := c.EndTx()
	if !ok {
		return impls.Released{}, impls.ErrNotHeld
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		c.Drop()
		return impls.Released{}, err
	}
	return impls.Released{Removed: l.Value}, nil
}
