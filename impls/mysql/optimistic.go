package mysql

import (
	"context"
	"errors"
	"time"

	"github.com/locktest/locktest/impls"
)

// Optimistic is mysql-optimistic: one row per lock (name, holder, version,
// expires_at), taken by the compare-and-set
//
//	UPDATE cas_locks SET holder = ?, version = LAST_INSERT_ID(version + 1),
//	       expires_at = NOW(6) + INTERVAL ttl
//	 WHERE name = ? AND (holder IS NULL OR expires_at < NOW(6))
//
// One row changed means the caller won; none means someone holds a lease
// that has not expired. Release is UPDATE … SET holder = NULL WHERE name = ?
// AND holder = ?.
//
//   - Token: the new version, read back atomically through LAST_INSERT_ID.
//   - Blocking: no, by nature; Acquire retries every 10ms (parameter retry)
//     until a little before its deadline; an update that changed no row is a
//     certain failure.
//   - Reentrant: no.
//   - Holder dies: the lock is free once expires_at passes, on the
//     database's clock (no cleanup job is needed: the next compare-and-set
//     takes the expired row).
//   - Survives: client crashes (after the ttl), a server restart (the rows
//     are durable). Not a holder paused past its ttl: the next holder takes
//     the row while the paused one still works; only the token tells them
//     apart.
type Optimistic struct {
	*session
	retry time.Duration
	known map[string]bool
}

var _ impls.Client = (*Optimistic)(nil)

var optimisticSchema = []string{
	"CREATE TABLE IF NOT EXISTS " + Database + ".cas_locks (name VARCHAR(191) NOT NULL PRIMARY KEY, holder VARCHAR(64) NULL, " +
		"version BIGINT UNSIGNED NOT NULL DEFAULT 0, expires_at DATETIME(6) NULL) ENGINE=InnoDB",
}

func newOptimistic(ctx context.Context, cfg impls.Config) (impls.Client, error) {
	retry, err := durationParam(cfg.Params, "retry", defaultRetry)
	if err != nil {
		return nil, err
	}
	s, err := newSession(cfg, optimisticSchema, 1)
	if err != nil {
		return nil, err
	}
	return &Optimistic{session: s, retry: retry, known: map[string]bool{}}, nil
}

// Acquire runs the compare-and-set until it changes the row or a little
// before ctx's deadline. It returns impls.ErrNotAcquired when no attempt
// changed the row.
func (c *Optimistic) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	if err := checkMicros("mysql-optimistic", ttl); err != nil {
		return impls.Lease{}, err
	}
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Lease{}, err
	}
	if !c.known[lock] {
		if _, err := conn.ExecContext(ctx, "INSERT IGNORE INTO "+Database+".cas_locks (name) VALUES (?)", lock); err != nil {
			c.Drop()
			return impls.Lease{}, err
		}
		c.known[lock] = true
	}
	holder := c.Value()
	return c.pollRow(ctx, conn, c.retry, lock, holder, ttl,
		"UPDATE "+Database+".cas_locks SET holder = ?, version = LAST_INSERT_ID(version + 1), "+
			"expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE name = ? AND (holder IS NULL OR expires_at < NOW(6))",
		holder, ttl.Microseconds(), lock)
}

// Release clears the holder if it is still this lease's. It returns
// impls.ErrNotHeld when another holder took the row after the lease
// expired.
func (c *Optimistic) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Released{}, err
	}
	res, err := conn.ExecContext(ctx, bounded(waitBudget(ctx), "UPDATE "+Database+".cas_locks SET holder = NULL, expires_at = NULL WHERE name = ? AND holder = ?"), l.Lock, l.Value)
	if timedOut(err) {
		return impls.Released{}, errors.New("UPDATE waited for the row lock until its time limit and was rolled back; the lock is still held")
	}
	if err != nil {
		c.Drop()
		return impls.Released{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}
