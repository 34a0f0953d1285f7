package mysql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/tick"
)

// Defaults of mysql-unique-insert's parameters.
const (
	defaultCleanupInterval = 100 * time.Millisecond
	defaultRetry           = 10 * time.Millisecond
)

// UniqueInsert is mysql-unique-insert: INSERT INTO unique_locks (name,
// owner, expires_at) with a unique key on name; a duplicate-key error means
// the lock is taken. Release is DELETE … WHERE name = ? AND owner = ?. A
// cleanup loop in every client deletes the rows whose expires_at (the
// database's NOW(6) + ttl at the insert) has passed.
//
//   - Token: the row's AUTO_INCREMENT id (MariaDB keeps the counter across
//     restarts, so ids keep increasing).
//   - Blocking: no, by nature; Acquire retries the INSERT every 10ms
//     (parameter retry) until a little before its deadline, and every
//     attempt that hit the duplicate key, or waited for a row lock until
//     its max_statement_time (the time left before that point), is a
//     certain failure.
//   - Reentrant: no; a second INSERT by the holder fails like anyone's.
//   - Holder dies: its row stays until the cleanup loop of any client
//     deletes it after expires_at. With the cleanup off (parameter
//     cleanup=off), the design the articles start from, the row stays
//     forever and nobody ever gets the lock again.
//   - Survives: client crashes (after the ttl, with the cleanup on), a
//     server restart (the rows are durable). Not a holder paused past its
//     ttl: the cleanup deletes its row and the next holder gets the lock
//     while the paused one still works; only the token can tell them apart.
//
// Parameters (impls.Config.Params): cleanup=on|off (default on),
// cleanup-interval=<duration> (default 100ms), retry=<duration> (default
// 10ms).
type UniqueInsert struct {
	*session
	retry time.Duration

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

var _ impls.Client = (*UniqueInsert)(nil)

var uniqueInsertSchema = []string{
	"CREATE TABLE IF NOT EXISTS " + Database + ".unique_locks (" +
		"id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, " +
		"name VARCHAR(191) NOT NULL, owner VARCHAR(64) NOT NULL, expires_at DATETIME(6) NOT NULL, " +
		"UNIQUE KEY name (name)) ENGINE=InnoDB",
}

func newUniqueInsert(ctx context.Context, cfg impls.Config) (impls.Client, error) {
	cleanup := true
	switch v := cfg.Params["cleanup"]; v {
	case "", "on":
	case "off":
		cleanup = false
	default:
		return nil, fmt.Errorf("mysql-unique-insert: impl parameter cleanup=%q: want on or off", v)
	}
	interval, err := durationParam(cfg.Params, "cleanup-interval", defaultCleanupInterval)
	if err != nil {
		return nil, err
	}
	retry, err := durationParam(cfg.Params, "retry", defaultRetry)
	if err != nil {
		return nil, err
	}
	s, err := newSession(cfg, uniqueInsertSchema, 2)
	if err != nil {
		return nil, err
	}
	c := &UniqueInsert{session: s, retry: retry, stop: make(chan struct{})}
	if cleanup {
		c.wg.Add(1)
		go c.cleanup(interval)
	}
	return c, nil
}

// cleanup deletes expired rows every interval until Close. It uses the
// pool's second connection, so it never waits for the pinned one. Errors
// (the table does not exist yet, the server is down) are ignored: the next
// round tries again.
func (c *UniqueInsert) cleanup(interval time.Duration) {
	defer c.wg.Done()
	tick.Every(interval, c.stop, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = c.db.ExecContext(ctx, bounded(750*time.Millisecond, "DELETE FROM "+Database+".unique_locks WHERE expires_at < NOW(6)"))
		cancel()
	})
}

// Acquire inserts the lock's row, retrying while the name is taken, until a
// little before ctx's deadline. It returns impls.ErrNotAcquired when every
// attempt hit the unique key.
func (c *UniqueInsert) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	if err := checkMicros("mysql-unique-insert", ttl); err != nil {
		return impls.Lease{}, err
	}
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Lease{}, err
	}
	owner := c.Value()
	return c.pollRow(ctx, conn, c.retry, lock, owner, ttl,
		"INSERT INTO "+Database+".unique_locks (name, owner, expires_at) VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)",
		lock, owner, ttl.Microseconds())
}

// Release deletes the row if it is still this lease's, again when InnoDB
// rolled the delete back to break a deadlock. It returns impls.ErrNotHeld
// when the row is gone (cleaned up after its expiry) or another holder's.
func (c *UniqueInsert) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Released{}, err
	}
	var deleted bool
	err = retryUntil(ctx, c.retry, func(budget time.Duration) (bool, error) {
		res, err := conn.ExecContext(ctx, bounded(budget, "DELETE FROM "+Database+".unique_locks WHERE name = ? AND owner = ?"), l.Lock, l.Value)
		if errNumber(err) == errDeadlock || timedOut(err) {
			return false, nil // rolled back: try again
		}
		if err != nil {
			c.Drop()
			return false, err
		}
		n, err := res.RowsAffected()
		deleted = err == nil && n > 0
		return true, nil
	})
	switch {
	case errors.Is(err, impls.ErrNotAcquired):
		return impls.Released{}, errors.New("DELETE was rolled back (deadlock or lock wait) until the deadline; the lock is still held")
	case err != nil:
		return impls.Released{}, err
	case !deleted:
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}

// Close stops the cleanup loop and closes the connections. Closing twice
// is harmless, as for the other impls.
func (c *UniqueInsert) Close() error {
	c.stopOnce.Do(func() { close(c.stop) })
	c.wg.Wait()
	return c.session.Close()
}
