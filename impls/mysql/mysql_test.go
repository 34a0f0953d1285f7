package mysql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/servertest"
	"github.com/locktest/locktest/testkit/testcluster"
)

// startServer starts a MariaDB server for the test and returns its address.
func startServer(t *testing.T) string {
	return servertest.Start(t, "mysql").Nodes()[0].Addr
}

// A connection that opens slowly is waited for within the op's deadline,
// and one that does not open by then is a certain failure
// (testcluster.SlowConnect).
func TestSlowConnect(t *testing.T) {
	servertest.SlowConnect(t, servertest.Start(t, "mysql"), "mysql-unique-insert", "mysql-for-update", "mysql-get-lock", "mysql-optimistic")
}

// newClient returns a client of impl name for process against the server
// at addr, with the impl parameters params.
func newClient(t *testing.T, name, addr string, process int, params map[string]string) impls.Client {
	return servertest.Client(t, name, addr, process, func(c *impls.Config) { c.Params = params })
}

// Two clients of each impl contend for one lock: the second waits, gives
// up before its deadline with a certain failure, and gets the lock once the
// first released it, with a higher token; a second release of the same
// lease changes nothing.
func TestContention(t *testing.T) {
	addr := startServer(t)
	for _, name := range []string{"mysql-unique-insert", "mysql-for-update", "mysql-get-lock", "mysql-optimistic"} {
		t.Run(name, func(t *testing.T) {
			a := newClient(t, name, addr, 0, nil)
			b := newClient(t, name, addr, 1, nil)
			lock := "contention-" + name
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, lb := testcluster.Handover(t, ctx, a, b, lock)
			if _, err := b.Release(ctx, lb); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A lease of mysql-unique-insert whose row the cleanup deleted after its
// ttl is not held any more, and another client gets the lock.
func TestUniqueInsertCleanup(t *testing.T) {
	addr := startServer(t)
	params := map[string]string{"cleanup-interval": "20ms"}
	a := newClient(t, "mysql-unique-insert", addr, 0, params)
	b := newClient(t, "mysql-unique-insert", addr, 1, params)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	la, err := a.Acquire(ctx, "expiring", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var lb impls.Lease
	for { // the cleanup runs every 20ms; the lease lasts 50ms
		bctx, bcancel := context.WithTimeout(ctx, time.Second)
		lb, err = b.Acquire(bctx, "expiring", time.Minute)
		bcancel()
		if err == nil {
			break
		}
		if !errors.Is(err, impls.ErrNotAcquired) || ctx.Err() != nil {
			t.Fatalf("acquire after the lease expired: %v", err)
		}
	}
	if lb.Token <= la.Token {
		t.Errorf("token %d after %d", lb.Token, la.Token)
	}
	if _, err := a.Release(ctx, la); !errors.Is(err, impls.ErrNotHeld) {
		t.Errorf("release of the expired lease: %v, want ErrNotHeld", err)
	}
	if _, err := b.Release(ctx, lb); err != nil {
		t.Errorf("release of the live lease: %v", err)
	}
}

// TestCloseTwice closes each impl's client twice, as a run's reset and its
// end may: the second Close must neither panic nor fail.
func TestCloseTwice(t *testing.T) {
	addr := startServer(t)
	for _, name := range []string{"mysql-unique-insert", "mysql-for-update", "mysql-get-lock", "mysql-optimistic"} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, name, addr, 0, nil)
			if err := c.Close(); err != nil {
				t.Fatalf("first Close: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

func TestBadParams(t *testing.T) {
	tests := []struct {
		impl   string
		params map[string]string
		want   string
	}{
		{"mysql-unique-insert", map[string]string{"cleanup": "maybe"}, "cleanup="},
		{"mysql-unique-insert", map[string]string{"cleanup-interval": "often"}, "cleanup-interval="},
		{"mysql-unique-insert", map[string]string{"retry": "-1s"}, "retry="},
		{"mysql-optimistic", map[string]string{"retry": "0"}, "retry="},
	}
	for _, tt := range tests {
		i, err := impls.Lookup(tt.impl)
		if err != nil {
			t.Fatal(err)
		}
		_, err = i.New(context.Background(), impls.Config{Addrs: []string{"127.0.0.1:1"}, Params: tt.params, Now: func() time.Duration { return 0 }})
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %v: err %v, want one line naming %q", tt.impl, tt.params, err, tt.want)
		}
	}
	i, _ := impls.Lookup("mysql-get-lock")
	if _, err := i.New(context.Background(), impls.Config{Now: func() time.Duration { return 0 }}); err == nil {
		t.Errorf("no address accepted")
	}
}

func TestWaitBudget(t *testing.T) {
	tests := []struct {
		left time.Duration
		min  time.Duration
		max  time.Duration
	}{
		{time.Second, 700 * time.Millisecond, 750 * time.Millisecond},
		{10 * time.Second, 9400 * time.Millisecond, 9500 * time.Millisecond},
		{-time.Second, 0, 0},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(tt.left))
		got := waitBudget(ctx)
		cancel()
		if got < tt.min || got > tt.max {
			t.Errorf("waitBudget with %v left = %v, want in [%v, %v]", tt.left, got, tt.min, tt.max)
		}
	}
	if got := waitBudget(context.Background()); got != time.Second {
		t.Errorf("waitBudget without deadline = %v", got)
	}
}

// A polling acquire that meets a row lock held by a transaction of someone
// else (here: an uncommitted insert of the same name, and a row locked FOR
// UPDATE) gives up on the server before its deadline, with a certain
// failure. Without the bound its server thread would wait up to
// innodb_lock_wait_timeout after the driver abandoned the connection, and
// under contention such threads fill max_connections.
func TestRowLockWaitBounded(t *testing.T) {
	addr := startServer(t)
	tests := []struct {
		impl string
		lock string // locks the row that impl's acquire needs, in an open transaction
	}{
		{"mysql-unique-insert", "INSERT INTO " + Database + ".unique_locks (name, owner, expires_at) VALUES (?, 'other', NOW(6) + INTERVAL 1 MINUTE)"},
		{"mysql-optimistic", "SELECT version FROM " + Database + ".cas_locks WHERE name = ? FOR UPDATE"},
	}
	for _, tt := range tests {
		t.Run(tt.impl, func(t *testing.T) {
			c := newClient(t, tt.impl, addr, 0, nil)
			lock := "row-locked-" + tt.impl
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := c.Acquire(ctx, lock, time.Minute) // creates the schema and the row
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			s, err := newSession(impls.Config{Addrs: []string{addr}, Now: func() time.Duration { return 0 }}, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			conn, err := s.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, tt.lock, lock); err != nil {
				t.Fatal(err)
			}
			actx, acancel := context.WithTimeout(ctx, 600*time.Millisecond)
			_, err = c.Acquire(actx, lock, time.Minute)
			late := actx.Err()
			acancel()
			if !errors.Is(err, impls.ErrNotAcquired) {
				t.Fatalf("acquire against a locked row: %v, want ErrNotAcquired", err)
			}
			if late != nil {
				t.Errorf("the acquire returned only after its deadline: the server waited past it")
			}
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
