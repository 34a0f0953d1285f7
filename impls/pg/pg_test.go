package pg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/servertest"
	"github.com/locktest/locktest/testkit/testcluster"
)

// startServer starts a PostgreSQL server for the test and returns its address.
func startServer(t *testing.T) string {
	return servertest.Start(t, "postgres").Nodes()[0].Addr
}

// A connection that opens slowly is waited for within the op's deadline,
// and one that does not open by then is a certain failure
// (testcluster.SlowConnect).
func TestSlowConnect(t *testing.T) {
	servertest.SlowConnect(t, servertest.Start(t, "postgres"), "pg-advisory", "pg-advisory-xact")
}

// newClient returns a client of impl name for process against the server
// at addr.
func newClient(t *testing.T, name, addr string, process int) impls.Client {
	return servertest.Client(t, name, addr, process, nil)
}

// Two clients of each impl contend for one lock: the second waits, gives
// up before its deadline with a certain failure, and gets the lock once the
// first released it, with a higher token; a second release of the same
// lease changes nothing. A client whose session ended loses its lock to
// the other at once, and its release says so.
func TestContention(t *testing.T) {
	addr := startServer(t)
	for _, name := range []string{"pg-advisory", "pg-advisory-xact"} {
		t.Run(name, func(t *testing.T) {
			a := newClient(t, name, addr, 0)
			b := newClient(t, name, addr, 1)
			lock := "contention-" + name
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			la, lb := testcluster.Handover(t, ctx, a, b, lock)
			if la.ValidUntil != 0 || !la.HasToken {
				t.Errorf("lease %+v: want a token and no expiry", la)
			}

			// b's session ends (as when its connection breaks): the lock
			// is free for a, and b's release reports it lost.
			b.(interface{ Drop() }).Drop()
			lc, err := a.Acquire(ctx, lock, time.Minute)
			if err != nil {
				t.Fatalf("acquire after the holder's session ended: %v", err)
			}
			if _, err := b.Release(ctx, lb); !errors.Is(err, impls.ErrNotHeld) {
				t.Errorf("release on a lost session: %v, want ErrNotHeld", err)
			}
			if _, err := a.Release(ctx, lc); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLockTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if got := lockTimeout(ctx); got < "700ms" || got > "750ms" || len(got) != 5 {
		t.Errorf("lockTimeout with 1s left = %q", got)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if got := lockTimeout(past); got != "1ms" {
		t.Errorf("lockTimeout past the deadline = %q, want 1ms (0 would wait forever)", got)
	}
	if got := lockTimeout(context.Background()); got != "1000ms" {
		t.Errorf("lockTimeout without deadline = %q", got)
	}
}
