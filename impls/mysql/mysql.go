// Package mysql holds the MySQL/MariaDB locks of the lock-selection
// articles and the one most users pick, each written the way its users
// write it, flaws included:
//
//   - mysql-unique-insert: a lock table with a unique key on the lock name;
//     acquire = INSERT, release = DELETE; an expires_at column and a
//     cleanup loop that deletes expired rows. Token: the row's
//     AUTO_INCREMENT id.
//   - mysql-for-update: SELECT … FOR UPDATE on a lock row inside a
//     transaction; release = COMMIT. Token: a version column incremented
//     in the same transaction.
//   - mysql-get-lock: GET_LOCK / RELEASE_LOCK, a named lock owned by the
//     session. No token.
//   - mysql-optimistic: a compare-and-set UPDATE on a holder, version and
//     expiry row. Token: the new version.
//
// Every client talks to one server, Config.Addrs[0], as root without a
// password, through github.com/go-sql-driver/mysql, and keeps its tables in
// the database "locktest", which the first client to connect creates
// (idempotently, as it does the tables). Each client pins one connection
// (database/sql's Conn): the session-scoped locks (GET_LOCK, an open
// transaction) belong to it, and a pooled connection would hand them to
// whoever used it next. After any error whose outcome is unknown the client
// closes that connection, which also frees whatever session lock it held,
// and opens a new one on the next call; a lease taken on an earlier
// connection is then reported as not held.
//
// Acquire blocks until the lock is free or the caller's deadline is near:
// the server is told to give up a little before the deadline (a quarter of
// the time left, at most 500ms, is kept for the answer), so that a wait
// that timed out is a certain failure (impls.ErrNotAcquired), and only a
// connection that broke or a deadline that passed leaves the outcome
// unknown.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/pinned"
)

// Database is the database that holds the lock tables.
const Database = "locktest"

// MariaDB error numbers the impls tell apart.
const (
	errDupEntry         = 1062 // ER_DUP_ENTRY
	errLockWaitTimeout  = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock         = 1213 // ER_LOCK_DEADLOCK: the statement was rolled back
	errStatementTimeout = 1969 // ER_STATEMENT_TIMEOUT (max_statement_time)
)

func init() {
	for _, i := range []impls.Impl{
		{
			Name: "mysql-unique-insert", Backend: backend.MySQL, Fenced: true,
			TokenSource: "the lock row's AUTO_INCREMENT id", Wait: "polls the INSERT every 10ms until its deadline",
			Doc: "a lock table with a unique key on the name: INSERT to acquire (retried until the deadline), DELETE to release, an expires_at column and a cleanup loop deleting expired rows, token = the row's AUTO_INCREMENT id; " +
				"a lease that a paused holder outlives, and with the cleanup off (cleanup=off) a dead holder's row blocks the lock forever.",
			New: newUniqueInsert,
		},
		{
			Name: "mysql-for-update", Backend: backend.MySQL, Fenced: true,
			TokenSource: "a version column incremented in the holder's transaction", Reentrant: true, Blocking: true,
			Wait: "waits on the server for the row lock (max_statement_time), until its deadline; a second acquire by the holder rolls its open transaction back and takes the row again at once, and one release frees it",
			Doc: "SELECT … FOR UPDATE on a lock row inside a transaction held open for the critical section, released by COMMIT, token = a version column incremented in that transaction; " +
				"the server frees the lock when the holder's connection dies, and a dead holder's rolled-back increment hands its token to the next holder.",
			New: impls.Wrap(sessionWith(forUpdateSchema), func(s *session) impls.Client { return &ForUpdate{session: s, known: map[string]bool{}} }),
		},
		{
			Name: "mysql-get-lock", Backend: backend.MySQL, Reentrant: true, Blocking: true,
			Wait: "waits on the server (GET_LOCK timeout), until its deadline; MariaDB counts nested GET_LOCKs of one session",
			Doc: "GET_LOCK(name, timeout) / RELEASE_LOCK on one pinned session, no fencing token; " +
				"the server frees the lock when the session ends, and a holder whose connection broke goes on believing it holds it.",
			New: impls.Wrap(sessionWith(nil), func(s *session) impls.Client { return &GetLock{session: s} }),
		},
		{
			Name: "mysql-optimistic", Backend: backend.MySQL, Fenced: true,
			TokenSource: "the version the compare-and-set increments", Wait: "polls the compare-and-set every 10ms until its deadline",
			Doc: "a compare-and-set UPDATE that takes the row when it has no holder or its expires_at passed (retried until the deadline), token = the version it increments; " +
				"a lease that a paused holder outlives, expiring on the database's clock.",
			New: newOptimistic,
		},
	} {
		i.Libraries = []string{"github.com/go-sql-driver/mysql"}
		impls.Register(i)
	}
}

// session is what the four clients share: the connection pool, and the
// connection pinned from it with its bookkeeping (pinned.Session).
type session struct {
	*pinned.Session[*sql.Conn]
	cfg  impls.Config
	addr string
	db   *sql.DB
}

// newSession checks cfg and builds the connection pool the session pins
// its connection from; poolSize is 1, or 2 for a client that also runs a
// background loop. The first connection creates the database and then runs
// schema. It does not connect: a server that is down when the worker
// starts shows up as the first acquire's error.
func newSession(cfg impls.Config, schema []string, poolSize int) (*session, error) {
	if err := cfg.Check(backend.MySQL); err != nil {
		return nil, err
	}
	mc := mysql.NewConfig()
	mc.User, mc.Net, mc.Addr = "root", "tcp", cfg.Addrs[0]
	if u := cfg.Params["user"]; u != "" {
		mc.User = u
	}
	mc.Passwd = cfg.Params["password"]
	// No dial timeout of its own: the op's deadline bounds the dial and
	// the handshake (the connector watches the context), so a run with a
	// longer --op-timeout waits longer for a connection on a slow machine.
	mc.InterpolateParams = true // one round trip per statement, no prepared statements
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	all := append([]string{"CREATE DATABASE IF NOT EXISTS " + Database}, schema...)
	return &session{cfg: cfg, addr: cfg.Addrs[0], db: db, Session: &pinned.Session[*sql.Conn]{
		Process: cfg.Process, Tag: "c",
		Driver: pinned.Driver[*sql.Conn]{
			Open: func(ctx context.Context) (*sql.Conn, int64, error) {
				c, err := db.Conn(ctx)
				if err != nil {
					return nil, 0, err
				}
				var id int64
				if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
					closeBad(c)
					return nil, 0, err
				}
				return c, id, nil
			},
			Setup: func(ctx context.Context, c *sql.Conn) error {
				for _, stmt := range all {
					if _, err := c.ExecContext(ctx, stmt); err != nil {
						return err
					}
				}
				return nil
			},
			Discard: closeBad,
		},
	}}, nil
}

// sessionWith returns the builder of a session whose first connection runs
// schema, with a pool of one connection.
func sessionWith(schema []string) func(impls.Config) (*session, error) {
	return func(cfg impls.Config) (*session, error) { return newSession(cfg, schema, 1) }
}

// closeBad closes c and makes database/sql discard its driver connection
// instead of keeping it for reuse.
func closeBad(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

// Close closes the pinned connection and the pool.
func (s *session) Close() error {
	s.Drop()
	return s.db.Close()
}

// waitBudget returns how long the server may wait for a lock: the time
// left before ctx's deadline minus what the answer needs (a quarter of it,
// at most 500ms); 1s when ctx has no deadline; never negative.
func waitBudget(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Second
	}
	left := time.Until(dl)
	w := left - min(left/4, 500*time.Millisecond)
	return max(w, 0)
}

// bounded prefixes stmt with a MariaDB max_statement_time of at most
// budget (and at least 1ms, since 0 would mean no limit), so that a
// statement waiting on a row lock gives up on the server before the
// caller's deadline. A statement that hits the limit (errStatementTimeout)
// or the server's own lock wait timeout (errLockWaitTimeout) is rolled
// back: it changed nothing. Without the bound, a connection the driver
// abandons at the deadline leaves its server thread waiting for up to
// innodb_lock_wait_timeout (50s by default), and under contention those
// threads fill max_connections.
func bounded(budget time.Duration, stmt string) string {
	return fmt.Sprintf("SET STATEMENT max_statement_time=%.3f FOR %s", max(budget, time.Millisecond).Seconds(), stmt)
}

// timedOut reports whether err says the server gave up a statement on a
// time limit, which rolls the statement back.
func timedOut(err error) bool {
	n := errNumber(err)
	return n == errStatementTimeout || n == errLockWaitTimeout
}

// errNumber returns the MariaDB error number of err, or 0.
func errNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// retryUntil runs try until it reports done, with pauses of pause between
// attempts, until the wait budget of ctx is spent; try is passed what is
// left of that budget, to bound its statement with. It returns
// impls.ErrNotAcquired when every attempt found the lock taken, or the
// first error.
func retryUntil(ctx context.Context, pause time.Duration, try func(budget time.Duration) (bool, error)) error {
	end := time.Now().Add(waitBudget(ctx))
	for {
		done, err := try(time.Until(end))
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().Add(pause).After(end) {
			return impls.ErrNotAcquired
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return impls.ErrNotAcquired // no attempt is in flight: nothing changed
		case <-t.C:
		}
	}
}

// pollRow runs the statement q with args, bounded by each attempt's
// budget, every retry until it changes a row or retryUntil gives up with
// impls.ErrNotAcquired. An attempt that hit the unique key, or that InnoDB
// rolled back (a deadlock, a lock wait that reached its time limit),
// changed nothing and is tried again; any other error drops the
// connection. On success it returns the lease of lock with value: its token
// is the statement's LAST_INSERT_ID, and it is valid for ttl from the start
// of the attempt that changed the row.
func (s *session) pollRow(ctx context.Context, conn *sql.Conn, retry time.Duration, lock, value string, ttl time.Duration, q string, args ...any) (impls.Lease, error) {
	var lease impls.Lease
	err := retryUntil(ctx, retry, func(budget time.Duration) (bool, error) {
		start := s.cfg.Now()
		res, err := conn.ExecContext(ctx, bounded(budget, q), args...)
		if n := errNumber(err); n == errDupEntry || n == errDeadlock || timedOut(err) {
			return false, nil // taken, or rolled back: nothing changed
		}
		if err != nil {
			s.Drop()
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return false, err
		}
		token, err := res.LastInsertId()
		if err != nil {
			return false, err
		}
		lease = impls.Lease{Lock: lock, Token: uint64(token), HasToken: true, Value: value,
			ValidUntil: start + ttl.Truncate(time.Microsecond), Node: s.addr}
		return true, nil
	})
	return lease, err
}

// checkMicros rejects a ttl below the 1µs resolution of DATETIME(6).
func checkMicros(impl string, ttl time.Duration) error {
	if ttl < time.Microsecond {
		return fmt.Errorf("%s: ttl %v is below the 1µs resolution of DATETIME(6)", impl, ttl)
	}
	return nil
}

// durationParam reads an impl parameter holding a Go duration.
func durationParam(p map[string]string, key string, def time.Duration) (time.Duration, error) {
	v, ok := p[key]
	if !ok || v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("mysql: impl parameter %s=%q: want a positive duration such as 100ms", key, v)
	}
	return d, nil
}
