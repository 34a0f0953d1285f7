// Package pg holds the PostgreSQL advisory locks, the database lock many
// users pick, written with github.com/jackc/pgx/v5:
//
//   - pg-advisory: pg_advisory_lock / pg_advisory_unlock, session scope.
//   - pg-advisory-xact: pg_advisory_xact_lock inside a transaction that
//     stays open for the critical section; release = COMMIT.
//
// Lock names map to advisory lock keys with the server's
// hashtextextended(name, 0). The fencing token of both is nextval of the
// sequence locktest_fence, taken while holding the lock; sequences are not
// transactional, so a token is never handed out twice, even when the
// holder's transaction rolls back.
//
// Every client talks to one server, Config.Addrs[0], as the superuser
// postgres without a password, database postgres (parameters user,
// password and dbname change that), over one dedicated connection (a
// pgx.Conn, never a pool: the locks belong to the session). The first
// client creates the sequence, under an advisory lock so that clients
// starting together do not collide. A connection is opened within the
// op's deadline; one that could not be opened (or its set-up failed) is an
// error marked impls.NotSent, since no request of the op reached the
// server, and the acquire completes as a certain failure. After any error whose outcome is
// unknown the client closes the connection, which ends the session and
// frees its locks, and opens a new one on the next call; a lease taken on
// an earlier connection is then reported as not held.
//
// Acquire blocks until the lock is free or the caller's deadline is near:
// lock_timeout is set a little below the deadline (a quarter of the time
// left, at most 500ms, is kept for the answer), so a wait that timed out is
// a certain failure (impls.ErrNotAcquired), and only a connection that
// broke or a deadline that passed leaves the outcome unknown.
package pg

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

// Sequence is the sequence whose nextval is the fencing token.
const Sequence = "locktest_fence"

// SQLSTATEs the impls tell apart.
const (
	lockNotAvailable = "55P03" // lock_timeout expired
	queryCanceled    = "57014" // statement_timeout or a cancel request
)

// ddlLock is the two-key advisory lock (a key space apart from the one-key
// locks of the impls) that serialises the creation of the sequence.
const ddlLock = "pg_advisory_lock(1819239275, 1)"

func init() {
	for _, i := range []impls.Impl{
		{
			Name: "pg-advisory", Backend: backend.Postgres, Fenced: true,
			TokenSource: "nextval of the sequence locktest_fence, taken under the lock", Reentrant: true, Blocking: true,
			Wait: "waits on the server (lock_timeout), until its deadline; PostgreSQL stacks a session's advisory locks",
			Doc: "pg_advisory_lock / pg_advisory_unlock on one dedicated session, token = nextval of a sequence taken under the lock; " +
				"the server frees the lock when the session ends, and a holder whose connection broke goes on believing it holds it.",
			New: impls.Wrap(newSession, func(s *session) impls.Client { return &Advisory{session: s} }),
		},
		{
			Name: "pg-advisory-xact", Backend: backend.Postgres, Fenced: true,
			TokenSource: "nextval of the sequence locktest_fence, taken under the lock", Reentrant: true, Blocking: true,
			Wait: "waits on the server (lock_timeout) inside a new transaction, until its deadline; a second acquire by the holder rolls its open transaction back and takes the lock again at once, and one release frees it",
			Doc: "pg_advisory_xact_lock inside a transaction held open for the critical section, released by COMMIT, token = nextval of a sequence taken under the lock; " +
				"the server frees the lock when the transaction or session ends, and a holder whose connection broke goes on believing it holds it.",
			New: impls.Wrap(newSession, func(s *session) impls.Client { return &AdvisoryXact{session: s} }),
		},
	} {
		i.Libraries = []string{"github.com/jackc/pgx/v5"}
		impls.Register(i)
	}
}

// session is what both clients share: the dedicated connection with its
// bookkeeping (pinned.Session).
type session struct {
	*pinned.Session[*pgx.Conn]
	cfg  impls.Config
	addr string
}

// newSession checks cfg and builds the session. It does not connect: a
// server that is down when the worker starts shows up as the first
// acquire's error. The first connection creates the sequence.
func newSession(cfg impls.Config) (*session, error) {
	if err := cfg.Check("pg"); err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(cfg.Addrs[0])
	if err != nil {
		return nil, fmt.Errorf("pg: address %q: %w", cfg.Addrs[0], err)
	}
	param := func(k, def string) string {
		if v := cfg.Params[k]; v != "" {
			return v
		}
		return def
	}
	// No connect_timeout: the op's deadline bounds the dial and the
	// start-up, so a run with a longer --op-timeout waits longer for a
	// connection on a slow machine, as it does for an answer.
	connStr := fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable",
		host, port, param("user", "postgres"), param("dbname", "postgres"))
	if pw := cfg.Params["password"]; pw != "" {
		connStr += " password=" + pw
	}
	return &session{cfg: cfg, addr: cfg.Addrs[0], Session: &pinned.Session[*pgx.Conn]{
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
				for _, q := range []string{"SELECT " + ddlLock, "CREATE SEQUENCE IF NOT EXISTS " + Sequence, "SELECT pg_advisory_unlock(1819239275, 1)"} {
					if _, err := c.Exec(ctx, q); err != nil {
						return err
					}
				}
				return nil
			},
			Discard: closeConn,
			Alive:   func(c *pgx.Conn) bool { return !c.IsClosed() },
		},
	}}, nil
}

// closeConn closes c, waiting at most 100ms for the server to hear of it.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = c.Close(ctx)
}

// lockTimeout returns the lock_timeout for a wait: the time left before
// ctx's deadline minus what the answer needs (a quarter of it, at most
// 500ms); 1s when ctx has no deadline; at least 1ms (0 would mean no
// timeout at all).
func lockTimeout(ctx context.Context) string {
	w := time.Second
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		w = left - min(left/4, 500*time.Millisecond)
	}
	return fmt.Sprintf("%dms", max(w.Milliseconds(), 1))
}

// timedOut reports whether err is the server giving up a lock wait: the
// statement failed, the lock was not taken.
func timedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == lockNotAvailable || pe.Code == queryCanceled)
}
