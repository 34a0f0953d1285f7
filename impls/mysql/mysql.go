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
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktest/locktest/impls"
)

// Database is the database that holds the lock tables.
const Database = "locktest"

// dialTimeout bounds a connection attempt.
const dialTimeout = time.Second

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
			Name: "mysql-unique-insert", Backend: "mysql", Nodes: 1, Fenced: true,
			TokenSource: "the lock row's AUTO_INCREMENT id", Wait: "polls the INSERT every 10ms until its deadline",
			Doc: "a lock table with a unique key on the name: INSERT to acquire (retried until the deadline), DELETE to release, an expires_at column and a cleanup loop deleting expired rows, token = the row's AUTO_INCREMENT id; " +
				"a lease that a paused holder outlives, and with the cleanup off (cleanup=off) a dead holder's row blocks the lock forever.",
			New: newUniqueInsert,
		},
		{
			Name: "mysql-for-update", Backend: "mysql", Nodes: 1, Fenced: true,
			TokenSource: "a version column incremented in the holder's transaction", Reentrant: true, Blocking: true,
			Wait: "waits on the server for the row lock (max_statement_time), until its deadline; a second acquire by the holder rolls its open transaction back and takes the row again at once, and one release frees it",
			Doc: "SELECT … FOR UPDATE on a lock row inside a transaction held open for the critical section, released by COMMIT, token = a version column incremented in that transaction; " +
				"the server frees the lock when the holder's connection dies, and a dead holder's rolled-back increment hands its token to the next holder.",
			New: newForUpdate,
		},
		{
			Name: "mysql-get-lock", Backend: "mysql", Nodes: 1, Reentrant: true, Blocking: true,
			Wait: "waits on the server (GET_LOCK timeout), until its deadline; MariaDB counts nested GET_LOCKs of one session",
			Doc: "GET_LOCK(name, timeout) / RELEASE_LOCK on one pinned session, no fencing token; " +
				"the server frees the lock when the session ends, and a holder whose connection broke goes on believing it holds it.",
			New: newGetLock,
		},
		{
			Name: "mysql-optimistic", Backend: "mysql", Nodes: 1, Fenced: true,
			TokenSource: "the version the compare-and-set increments", Wait: "polls the compare-and-set every 10ms until its deadline",
			Doc: "a compare-and-set UPDATE that takes the row when it has no holder or its expires_at passed (retried until the deadline), token = the version it increments; " +
				"a lease that a paused holder outlives, expiring on the database's clock.",
			New: newOptimistic,
		},
	} {
		impls.Register(i)
	}
}

// session is what the four clients share: the pinned connection and the
// bookkeeping that tells a lease's connection from the current one.
type session struct {
	cfg    impls.Config
	addr   string
	db     *sql.DB
	schema []string

	conn       *sql.Conn // the pinned connection; nil until needed, and after an error
	gen        uint64    // counts the connections opened; a lease remembers its own
	connID     int64     // CONNECTION_ID() of conn
	schemaDone bool
	seq        uint64
}

// newSession checks cfg and builds the connection pool the session pins
// its connection from; poolSize is 1, or 2 for a client that also runs a
// background loop. It does not connect: a server that is down when the
// worker starts shows up as the first acquire's error.
func newSession(cfg impls.Config, schema []string, poolSize int) (*session, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("mysql: Config.Addrs is empty")
	}
	if cfg.Now == nil {
		return nil, errors.New("mysql: Config.Now is required (the harness clock for ValidUntil)")
	}
	mc := mysql.NewConfig()
	mc.User, mc.Net, mc.Addr = "root", "tcp", cfg.Addrs[0]
	if u := cfg.Params["user"]; u != "" {
		mc.User = u
	}
	mc.Passwd = cfg.Params["password"]
	mc.Timeout = dialTimeout
	mc.InterpolateParams = true // one round trip per statement, no prepared statements
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	all := append([]string{"CREATE DATABASE IF NOT EXISTS " + Database}, schema...)
	return &session{cfg: cfg, addr: cfg.Addrs[0], db: db, schema: all}, nil
}

// get returns the pinned connection, opening it (and creating the schema,
// the first time) if there is none.
func (s *session) get(ctx context.Context) (*sql.Conn, error) {
	if s.conn != nil {
		return s.conn, nil
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if !s.schemaDone {
		for _, stmt := range s.schema {
			if _, err := c.ExecContext(ctx, stmt); err != nil {
				closeBad(c)
				return nil, fmt.Errorf("create schema: %w", err)
			}
		}
		s.schemaDone = true
	}
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		closeBad(c)
		return nil, err
	}
	s.conn, s.connID = c, id
	s.gen++
	return c, nil
}

// drop closes the pinned connection for good (the server ends the session
// and frees its locks as soon as it sees the connection close).
func (s *session) drop() {
	if s.conn != nil {
		closeBad(s.conn)
		s.conn = nil
	}
}

// closeBad closes c and makes database/sql discard its driver connection
// instead of keeping it for reuse.
func closeBad(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

// value returns a lock value unique to this acquire: the process, the
// connection and a sequence number, plus random bits that keep a restarted
// worker apart from its previous life.
func (s *session) value() string {
	s.seq++
	return fmt.Sprintf("p%d-c%d-%d-%06x", s.cfg.Process, s.connID, s.seq, rand.Uint32()&0xffffff)
}

// Close closes the connections.
func (s *session) Close() error {
	s.drop()
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
