package seeded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/natsbucket"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
)

// startNats starts a 3-server JetStream cluster with the lock bucket for
// the test and returns its nodes and the bucket, through a connection of
// the test's own; it skips the test under -short.
func startNats(t *testing.T) ([]clusters.Node, jetstream.KeyValue) {
	exe, env := testexe.Node()
	c, err := local.New("nats", local.Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env})
	nodes := testcluster.Started(t, c, err).Nodes()
	nc, err := nats.Connect("nats://" + nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := natsbucket.Open(bg, js, len(nodes))
	if err != nil {
		t.Fatal(err)
	}
	return nodes, kv
}

// TestNatsBaseIsCorrect: the recipe the NATS impl of the zoo varies,
// unseeded, refuses a second holder and hands the lock over with an
// increasing token.
func TestNatsBaseIsCorrect(t *testing.T) {
	nodes, _ := startNats(t)
	client := func(p int) impls.Client {
		c, err := newKVExtend(bg, impls.Config{Addrs: testcluster.Addrs(nodes), Process: p, Now: now}, checkedRenewal)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	handover(t, client(1), client(2), "lock-0")
}

// TestNatsRenewUncheckedTakesTheKeyBack: a holder whose key was deleted
// and created again by another holder writes it back with its own value
// at its next renewal.
func TestNatsRenewUncheckedTakesTheKeyBack(t *testing.T) {
	nodes, kv := startNats(t)
	a := testcluster.Client(t, "seeded-nats-renew-unchecked", nodes, 1, now, nil)
	b := testcluster.Client(t, "seeded-nats-renew-unchecked", nodes, 2, now, nil)
	la := mustAcquire(t, a, "lock-0", time.Second)
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	// The key's end, as its TTL would end it; b then creates it. a's
	// renewal may come between the two: then b tries again.
	var lb impls.Lease
	for lb.Value == "" {
		if err := kv.Delete(ctx, "lock-0"); err != nil {
			t.Fatal(err)
		}
		l, err := b.Acquire(ctx, "lock-0", time.Minute)
		switch {
		case err == nil:
			lb = l
		case !errors.Is(err, impls.ErrNotAcquired) || ctx.Err() != nil:
			t.Fatalf("b's acquire: %v", err)
		}
	}
	for {
		e, err := kv.Get(ctx, "lock-0")
		if err == nil && string(e.Value()) == la.Value {
			return // a's renewal overwrote b's key
		}
		if ctx.Err() != nil {
			t.Fatalf("the key still holds b's %s (%v): a's renewal did not take it back", lb.Value, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
