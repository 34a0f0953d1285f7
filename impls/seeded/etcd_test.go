package seeded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
)

// startEtcd starts a 3-member etcd for the test and returns its members;
// it skips the test under -short.
func startEtcd(t *testing.T) []clusters.Node {
	exe, env := testexe.Node()
	c, err := local.New("etcd", local.Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env})
	return testcluster.Started(t, c, err).Nodes()
}

// TestEtcdBaseIsCorrect: the recipe the etcd impls of the zoo vary,
// unseeded, refuses a second holder and hands the lock over with an
// increasing token.
func TestEtcdBaseIsCorrect(t *testing.T) {
	nodes := startEtcd(t)
	client := func(p int) impls.Client {
		c, err := newLeaseTxn(impls.Config{Addrs: testcluster.Addrs(nodes), Process: p, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	handover(t, client(1), client(2), "lock-0")
}

// TestEtcdTxnUncheckedGrantsAHeldLock: a second client is granted the lock
// its holder still holds.
func TestEtcdTxnUncheckedGrantsAHeldLock(t *testing.T) {
	nodes := startEtcd(t)
	a := testcluster.Client(t, "seeded-etcd-txn-unchecked", nodes, 1, now, nil)
	b := testcluster.Client(t, "seeded-etcd-txn-unchecked", nodes, 2, now, nil)
	la := mustAcquire(t, a, "lock-0", time.Minute)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	lb, err := b.Acquire(ctx, "lock-0", time.Minute)
	if err != nil {
		t.Fatalf("the second acquire while %s holds the lock: %v, want a grant", la.Value, err)
	}
	if lb.Value == la.Value {
		t.Fatalf("two grants of one value %q", la.Value)
	}
}

// TestEtcdLeaseIDTokenIsNoCounter: a grant taken through one member has a
// lower token than the grant through another member before it. Each
// member makes the IDs of the leases granted through it with its own ID
// in their top bits: the test learns each member's order from one grant
// through each, then takes the lock through the highest and then the
// lowest.
func TestEtcdLeaseIDTokenIsNoCounter(t *testing.T) {
	nodes := startEtcd(t)
	via := make([]impls.Client, len(nodes))
	first := make([]uint64, len(nodes))
	for i, n := range nodes {
		via[i] = testcluster.Client(t, "seeded-etcd-lease-id-token", []clusters.Node{n}, i+1, now, nil)
		l := mustAcquire(t, via[i], "lock-0", time.Minute)
		mustRelease(t, via[i], l)
		first[i] = l.Token
	}
	hi, lo := 0, 0
	for i := range first {
		if first[i] > first[hi] {
			hi = i
		}
		if first[i] < first[lo] {
			lo = i
		}
	}
	if first[hi]>>48 == first[lo]>>48 {
		t.Fatalf("lease IDs %x through the members %v share their top bits: want each member's own", first, nodes)
	}
	lh := mustAcquire(t, via[hi], "lock-0", time.Minute)
	mustRelease(t, via[hi], lh)
	ll := mustAcquire(t, via[lo], "lock-0", time.Minute)
	if ll.Token >= lh.Token {
		t.Fatalf("token %x through %s, then %x through %s: want the second lower", lh.Token, nodes[hi].Name, ll.Token, nodes[lo].Name)
	}
	t.Log(fmt.Sprintf("tokens %x then %x", lh.Token, ll.Token))
}
