package seeded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/pinned"
)

// pgBase is the correct recipe the PostgreSQL impls of the zoo vary.
const pgBase = "pg-advisory"

// pgLockKey is the SQL expression of a lock name's advisory key ($1 is
// the name), as pg-advisory's.
const pgLockKey = "hashtextextended($1, 0)"

// pgDDLLock is the two-key advisory lock that serialises the clients'
// creation of the sequence, as pg-advisory's.
const pgDDLLock = "1819239275, 1"

// registerPG registers a seeded variant of pg-advisory, written with
// github.com/jackc/pgx/v5.
func registerPG(i impls.Impl) {
	i.Backend, i.SeededFrom, i.Libraries = backend.Postgres, pgBase, []string{"github.com/jackc/pgx/v5"}
	i.Reentrant, i.Blocking = true, true
	i.Wait = "waits on the server (lock_timeout), until its deadline; PostgreSQL stacks a session's advisory locks"
	register(i)
}

// advisory is the correct recipe, pg-advisory as impls/pg writes it, with
// the sequence of its tokens named by sequence and created by create (a
// statement with one %s, the name): SELECT pg_advisory_lock(key) on one
// pinned session under a lock_timeout a little below the deadline (whose
// expiry is impls.ErrNotAcquired), then nextval of the sequence as the
// token; release is pg_advisory_unlock on the session that took the lock
// (impls.ErrNotHeld when that session is gone or the server says it did
// not hold it). No impl registers it: the zoo's PostgreSQL impls build it
// with the part their bug breaks.
type advisory struct {
	*pinned.Session[*pgx.Conn]
	addr     string
	sequence string
}

var _ impls.Client = (*advisory)(nil)

// newAdvisory checks cfg and builds the session of a client whose tokens
// come from sequence, which the statement create makes if it is missing.
// It does not connect.
func newAdvisory(cfg impls.Config, sequence, create string) (*advisory, error) {
	if err := cfg.Check(backend.Postgres); err != nil {
		return nil, err
	}
	for k := range cfg.Params {
		return nil, fmt.Errorf("seeded: unknown impl param %q (the seeded impls take none)", k)
	}
	host, port, err := net.SplitHostPort(cfg.Addrs[0])
	if err != nil {
		return nil, fmt.Errorf("pg: address %q: %w", cfg.Addrs[0], err)
	}
	connStr := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", host, port)
	return &advisory{addr: cfg.Addrs[0], sequence: sequence, Session: &pinned.Session[*pgx.Conn]{
		Process: cfg.Process, Tag: "b",
		Driver: pinned.Driver[*pgx.Conn]{
			Open: func(ctx context.Context) (*pgx.Conn, int64, error) {
				c, err := pgx.Connect(ctx, connStr)
				if err != nil {
					return nil, 0, err
				}
				return c, int64(c.PgConn().PID()), nil
			},
			Setup: func(ctx context.Context, c *pgx.Conn) error {
				for _, q := range []string{"SELECT pg_advisory_lock(" + pgDDLLock + ")", fmt.Sprintf(create, sequence), "SELECT pg_advisory_unlock(" + pgDDLLock + ")"} {
					if _, err := c.Exec(ctx, q); err != nil {
						return err
					}
				}
				return nil
			},
			Discard: func(c *pgx.Conn) {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_ = c.Close(ctx)
			},
			Alive: func(c *pgx.Conn) bool { return !c.IsClosed() },
		},
	}}, nil
}

// pgLockTimeout is the lock_timeout of a wait: the time left before ctx's
// deadline less a quarter of it (at most 500ms) for the answer; 1s
// without a deadline; at least 1ms.
func pgLockTimeout(ctx context.Context) string {
	w := time.Second
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		w = left - min(left/4, 500*time.Millisecond)
	}
	return fmt.Sprintf("%dms", max(w.Milliseconds(), 1))
}

// pgTimedOut reports whether err is the server giving up a lock wait
// (lock_timeout or a cancel): the lock was not taken.
func pgTimedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "55P03" || pe.Code == "57014")
}

// Acquire is pg-advisory's.
func (c *advisory) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	conn, err := c.Get(ctx)
	if err != nil {
		return impls.Lease{}, err
	}
	if _, err := conn.Exec(ctx, "SELECT set_config('lock_timeout', $1, false)", pgLockTimeout(ctx)); err != nil {
		c.Drop()
		return impls.Lease{}, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock("+pgLockKey+")", lock); err != nil {
		if pgTimedOut(err) {
			return impls.Lease{}, impls.ErrNotAcquired
		}
		c.Drop()
		return impls.Lease{}, err
	}
	var tok int64
	if err := conn.QueryRow(ctx, "SELECT nextval('"+c.sequence+"')").Scan(&tok); err != nil {
		c.Drop() // ends the session, which frees the lock
		return impls.Lease{}, err
	}
	c.Hold(lock)
	return impls.Lease{Lock: lock, Token: uint64(tok), HasToken: true, Value: c.Value(), Node: c.addr}, nil
}

// Release is pg-advisory's.
func (c *advisory) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	conn, ok := c.Unhold(l.Lock)
	if !ok {
		return impls.Released{}, impls.ErrNotHeld
	}
	var released bool
	if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock("+pgLockKey+")", l.Lock).Scan(&released); err != nil {
		c.Drop()
		return impls.Released{}, err
	}
	if !released {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{Removed: l.Value}, nil
}
