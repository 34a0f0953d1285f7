package seeded

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/servertest"
)

// TestPGBaseIsCorrect: the recipe the PostgreSQL impl of the zoo varies,
// with pg-advisory's logged sequence, refuses a second holder and hands
// the lock over with an increasing token.
func TestPGBaseIsCorrect(t *testing.T) {
	c := servertest.Start(t, "postgres")
	client := func(p int) impls.Client {
		a, err := newAdvisory(impls.Config{Addrs: []string{c.Nodes()[0].Addr}, Process: p, Now: now}, "locktest_fence", "CREATE SEQUENCE IF NOT EXISTS %s")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	handover(t, client(1), client(2), "lock-0")
}

// TestPGUnloggedFenceRestartsAfterACrash: after the server is killed and
// restarted, its crash recovery resets the token sequence, and a token
// is granted again.
func TestPGUnloggedFenceRestartsAfterACrash(t *testing.T) {
	c := servertest.Start(t, "postgres")
	k, ok := c.(clusters.Killer)
	if !ok {
		t.Fatalf("%T cannot kill its node", c)
	}
	n := c.Nodes()[0]
	before := servertest.Client(t, "seeded-pg-unlogged-fence", n.Addr, 1, nil)
	var last uint64
	for range 3 {
		l := mustAcquire(t, before, "lock-0", time.Minute)
		mustRelease(t, before, l)
		last = l.Token
	}
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	if err := k.Kill(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := k.Restart(ctx, n); err != nil {
		t.Fatal(err)
	}
	after := servertest.Client(t, "seeded-pg-unlogged-fence", n.Addr, 2, nil)
	l := mustAcquire(t, after, "lock-0", time.Minute)
	if l.Token > last {
		t.Fatalf("token %d after the crash, %d before: want it granted again (the sequence restarted)", l.Token, last)
	}
}
