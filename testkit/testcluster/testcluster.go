// Package testcluster starts real lock servers and lock clients for the
// integration tests of the impls and the run: the set-up every such test
// shares, so that each keeps only what it checks.
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/gate"
)

// Started starts c, which a provider's constructor returned with err, for
// the test t and returns it: a constructor error (a server that is not
// installed, bad options) or a start that fails within a minute fails t,
// and c is stopped when t ends. Under -short it skips t (gate.Servers).
func Started[C clusters.Cluster](t testing.TB, c C, err error) C {
	t.Helper()
	gate.Servers(t, fmt.Sprintf("a cluster (%T)", c))
	if err != nil {
		t.Fatalf("%v (make setup installs the servers)", err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// Addrs returns the nodes' addresses, in order.
func Addrs(nodes []clusters.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Addr
	}
	return out
}

// Client returns a client of the impl named impl for process p against
// nodes (their names, addresses and roles), reading the harness clock
// from now and the wall clock from time.Now; edit, when not nil, adjusts
// the configuration first. A failure fails t; the client is closed when t
// ends.
func Client(t testing.TB, impl string, nodes []clusters.Node, p int, now func() time.Duration, edit func(*impls.Config)) impls.Client {
	t.Helper()
	i, err := impls.Lookup(impl)
	if err != nil {
		t.Fatal(err)
	}
	cfg := impls.Config{Addrs: Addrs(nodes), Process: p, Now: now, Wall: time.Now}
	for _, n := range nodes {
		cfg.Nodes = append(cfg.Nodes, impls.Node{Name: n.Name, Addr: n.Addr, Role: n.Role})
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := i.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Handover checks one handover of lock between two clients of a blocking
// lock: a acquires it; b's acquire, bounded by 1 s, fails certainly
// (ErrNotAcquired) before its deadline; a releases it, and a second
// release of the same lease says ErrNotHeld; then b acquires it, with a
// higher token when the impl gives tokens and a value of its own. It
// returns both leases; b still holds the lock.
func Handover(t testing.TB, ctx context.Context, a, b impls.Client, lock string) (la, lb impls.Lease) {
	t.Helper()
	la, err := a.Acquire(ctx, lock, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, time.Second)
	_, err = b.Acquire(bctx, lock, time.Minute)
	late := bctx.Err()
	bcancel()
	if !errors.Is(err, impls.ErrNotAcquired) {
		t.Fatalf("contended acquire: %v, want ErrNotAcquired", err)
	}
	if late != nil {
		t.Errorf("the contended acquire returned only after its deadline: its failure is not certain")
	}
	if _, err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Release(ctx, la); !errors.Is(err, impls.ErrNotHeld) {
		t.Errorf("second release: %v, want ErrNotHeld", err)
	}
	lb, err = b.Acquire(ctx, lock, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if la.HasToken != lb.HasToken || (la.HasToken && lb.Token <= la.Token) {
		t.Errorf("tokens %d then %d (has token: %v, %v), want increasing", la.Token, lb.Token, la.HasToken, lb.HasToken)
	}
	if la.Value == lb.Value {
		t.Errorf("two leases share the value %q", la.Value)
	}
	return la, lb
}

// EtcdLeader asks every etcd member of nodes but skip for its status, each
// with a client of its own (not through the provider's role reader, which
// it checks), and returns the name of the leader they all name; members
// that disagree, know no leader, or name none of the members asked are an
// error.
func EtcdLeader(ctx context.Context, nodes []clusters.Node, skip string) (string, error) {
	ids := map[uint64]string{}
	var lead uint64
	for _, n := range nodes {
		if n.Name == skip {
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.Addr}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return "", err
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, n.Addr)
		cancel()
		cli.Close()
		if err != nil {
			return "", err
		}
		ids[st.Header.MemberId] = n.Name
		if st.Leader == 0 || (lead != 0 && st.Leader != lead) {
			return "", fmt.Errorf("%s names leader %x", n.Name, st.Leader)
		}
		lead = st.Leader
	}
	if ids[lead] == "" {
		return "", fmt.Errorf("leader %x is none of the members asked", lead)
	}
	return ids[lead], nil
}

// Eventually polls cond every 20 ms until it holds, and fails t with what
// and cond's last error when it still does not after limit. The limit is
// no speed goal: it only keeps a broken cluster from hanging the test.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SlowConnect checks how a client of impl, on the one-node cluster c,
// opens its connection while the node is paused (its kernel still accepts
// TCP connections, but the server answers nothing):
//   - a first client's acquire, whose op deadline is far off, waits for
//     the connection past the node's resume 1.5 s later and takes the lock
//     (a connect bounded by a second of its own failed here);
//   - a second client's acquire, bounded by 1 s while the node stays
//     paused, fails with an error marked impls.ErrNotSent, the mark that
//     makes the worker record a certain failure, and not ErrNotAcquired;
//     once the node is resumed, the same client takes the lock.
func SlowConnect(t testing.TB, c clusters.Cluster, impl string) {
	t.Helper()
	p, ok := c.(clusters.Pauser)
	if !ok {
		t.Fatalf("%T cannot pause its nodes", c)
	}
	n := c.Nodes()[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	now := func() time.Duration { return time.Since(start) }
	lock := "slow-connect-" + impl

	a := Client(t, impl, c.Nodes(), 0, now, nil)
	if err := p.Pause(ctx, n); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		resumed <- p.Resume(ctx, n)
	}()
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	la, err := a.Acquire(actx, lock, time.Minute)
	acancel()
	if rerr := <-resumed; rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("acquire through a connection that opened after 1.5 s, with 30 s to go: %v", err)
	}
	if _, err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}

	b := Client(t, impl, c.Nodes(), 1, now, nil)
	if err := p.Pause(ctx, n); err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, time.Second)
	_, err = b.Acquire(bctx, lock, time.Minute)
	bcancel()
	if rerr := p.Resume(ctx, n); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, impls.ErrNotSent) || errors.Is(err, impls.ErrNotAcquired) {
		t.Errorf("acquire whose connection never opened: %v, want an error marked ErrNotSent", err)
	}
	lb, err := b.Acquire(ctx, lock, time.Minute)
	if err != nil {
		t.Fatalf("acquire after the node resumed: %v", err)
	}
	if _, err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}

// SentinelFailover waits, for at most a minute, until the sentinels among
// nodes (those of Role sentinel) name a master other than old, and that
// node answers ROLE master, and returns it: a failover after old was
// killed.
func SentinelFailover(ctx context.Context, nodes []clusters.Node, old clusters.Node) (clusters.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var sentinels []clusters.Node
	for _, n := range nodes {
		if n.Role == backend.RoleSentinel {
			sentinels = append(sentinels, n)
		}
	}
	var master clusters.Node
	err := backend.Poll(ctx, func() error {
		addr, err := backend.SentinelsMaster(ctx, sentinels)
		if err != nil {
			return err
		}
		if addr == old.Addr {
			return fmt.Errorf("the sentinels still name %s (%s)", old.Name, addr)
		}
		if role, err := backend.RedisRole(ctx, addr); err != nil || role != backend.RoleMaster {
			return fmt.Errorf("%s answers ROLE %q, %v", addr, role, err)
		}
		for _, n := range nodes {
			if n.Addr == addr {
				master = n
				return nil
			}
		}
		return fmt.Errorf("the sentinels name %s, none of the nodes", addr)
	})
	if err != nil {
		return clusters.Node{}, fmt.Errorf("no failover from %s: %w", old.Name, err)
	}
	return master, nil
}
