package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
)

// The test binary doubles as the etcd member program.
func TestMain(m *testing.M) { testexe.Main(m) }

var start = time.Now()

func now() time.Duration { return time.Since(start) }

// startCluster starts a 3-member cluster for the test and returns its
// client addresses.
func startCluster(t *testing.T) []string {
	exe, env := testexe.Node()
	e, err := local.New("etcd", local.Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env})
	return testcluster.Addrs(testcluster.Started(t, e, err).Nodes())
}

// newClient builds a client of impl as process p.
func newClient(t *testing.T, impl string, addrs []string, p int) impls.Client {
	return newClientWith(t, impl, addrs, p)
}

// newClientWith builds a client of impl as process p with the impl params
// params, each key=value.
func newClientWith(t *testing.T, impl string, addrs []string, p int, params ...string) impls.Client {
	t.Helper()
	var nodes []clusters.Node
	for i, a := range addrs {
		nodes = append(nodes, clusters.Node{Name: fmt.Sprintf("n%d", i+1), Addr: a})
	}
	return testcluster.Client(t, impl, nodes, p, now, func(cfg *impls.Config) {
		for _, kv := range params {
			k, v, _ := strings.Cut(kv, "=")
			if cfg.Params == nil {
				cfg.Params = map[string]string{}
			}
			cfg.Params[k] = v
		}
	})
}

func acquire(c impls.Client, d time.Duration) (impls.Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Acquire(ctx, "lock-0", 300*time.Millisecond)
}

func release(c impls.Client, l impls.Lease) (impls.Released, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Release(ctx, l)
}

var both = []string{"etcd-mutex", "etcd-lease-txn"}

// The lock excludes a second holder, hands it over on release with a higher
// token, and a waiter that times out fails cleanly.
func TestExclusionAndTokens(t *testing.T) {
	addrs := startCluster(t)
	for _, impl := range both {
		t.Run(impl, func(t *testing.T) {
			a, b := newClient(t, impl, addrs, 1), newClient(t, impl, addrs, 2)
			before := now()
			la, err := acquire(a, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			after := now()
			if !la.HasToken || la.Token == 0 || la.Lock != "lock-0" || la.Value == "" {
				t.Fatalf("lease %+v", la)
			}
			// The 300ms TTL is rounded up to etcd's whole second.
			if la.ValidUntil < before+time.Second || la.ValidUntil > after+time.Second {
				t.Errorf("valid until %v, want the acquire's time + 1s (acquire ran %v..%v)", la.ValidUntil, before, after)
			}
			if _, err := acquire(b, 300*time.Millisecond); !errors.Is(err, impls.ErrNotAcquired) {
				t.Fatalf("second acquire while held: %v, want ErrNotAcquired", err)
			}
			// A blocked acquire gets the lock as soon as it is released.
			got := make(chan impls.Lease, 1)
			errc := make(chan error, 1)
			go func() {
				l, err := acquire(b, 10*time.Second)
				got <- l
				errc <- err
			}()
			time.Sleep(100 * time.Millisecond)
			if rel, err := release(a, la); err != nil || rel.Removed != la.Value {
				t.Fatalf("release: %+v %v", rel, err)
			}
			lb, err := <-got, <-errc
			if err != nil {
				t.Fatalf("waiting acquire: %v", err)
			}
			if lb.Token <= la.Token {
				t.Errorf("token %d after %d: not increasing", lb.Token, la.Token)
			}
			if _, err := release(a, la); !errors.Is(err, impls.ErrNotHeld) {
				t.Errorf("second release: %v, want ErrNotHeld", err)
			}
			if _, err := release(b, lb); err != nil {
				t.Fatal(err)
			}
			// The same client takes the lock again with a newer token.
			la2, err := acquire(a, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if la2.Token <= lb.Token {
				t.Errorf("token %d after %d: not increasing", la2.Token, lb.Token)
			}
			if _, err := release(a, la2); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A holder whose lease is gone is refused by the guarded write and fails
// its release; the next holder's guarded write is accepted.
func TestLostLeaseIsRefused(t *testing.T) {
	addrs := startCluster(t)
	admin, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	for _, impl := range both {
		t.Run(impl, func(t *testing.T) {
			a, b := newClient(t, impl, addrs, 1), newClient(t, impl, addrs, 2)
			la, err := acquire(a, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			ga, gb := a.(impls.GuardedWriter), b.(impls.GuardedWriter)
			if ok, err := ga.GuardedWrite(ctx, la, "r", 1); !ok || err != nil {
				t.Fatalf("holder's guarded write: %v %v", ok, err)
			}
			// The lease ends on the server, as it does for a paused holder.
			key := la.Value
			if impl == "etcd-lease-txn" {
				key = txnPrefix + la.Lock
			}
			r, err := admin.Get(ctx, key)
			if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
				t.Fatalf("holder's key %s: %v %v", key, r, err)
			}
			if _, err := admin.Revoke(ctx, clientv3.LeaseID(r.Kvs[0].Lease)); err != nil {
				t.Fatal(err)
			}
			lb, err := acquire(b, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if lb.Token <= la.Token {
				t.Errorf("token %d after %d", lb.Token, la.Token)
			}
			if ok, err := ga.GuardedWrite(ctx, la, "r", 2); ok || err != nil {
				t.Errorf("stale holder's guarded write: accepted %v, %v; want refused", ok, err)
			}
			if ok, err := gb.GuardedWrite(ctx, lb, "r", 2); !ok || err != nil {
				t.Errorf("new holder's guarded write: accepted %v, %v", ok, err)
			}
			if n, err := ga.GuardedRead(ctx, la, "r"); n != 2 || err != nil {
				t.Errorf("read %d %v, want 2", n, err)
			}
			if impl == "etcd-mutex" {
				// Session.Done fires once the keep-alive learns the lease
				// is gone; the release then says so.
				mc := a.(*mutexClient)
				deadline := time.Now().Add(10 * time.Second)
				for !sessionExpired(mc.sess) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
			}
			_, err = release(a, la)
			if !errors.Is(err, impls.ErrNotHeld) {
				t.Errorf("stale release: %v, want ErrNotHeld", err)
			}
			if impl == "etcd-mutex" && (err == nil || !strings.Contains(err.Error(), "session expired")) {
				t.Errorf("stale release error %v does not say the session expired", err)
			}
			if _, err := release(b, lb); err != nil {
				t.Fatal(err)
			}
			// The client recovers: a new session, a new hold.
			la2, err := acquire(a, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := release(a, la2); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An acquire on a session whose lease was revoked a moment ago, before the
// keep-alive noticed, is refused whole by etcd: a certain fail, and the
// client starts a new session for the next one.
func TestMutexOnARevokedSession(t *testing.T) {
	addrs := startCluster(t)
	a := newClient(t, "etcd-mutex", addrs, 1)
	l, err := acquire(a, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := release(a, l); err != nil {
		t.Fatal(err)
	}
	mc := a.(*mutexClient)
	if _, err := mc.cli.Revoke(context.Background(), mc.sess.Lease()); err != nil {
		t.Fatal(err)
	}
	l, err = acquire(a, 5*time.Second)
	t.Logf("acquire on the revoked session: %v", err)
	switch {
	case err == nil:
		// The keep-alive noticed first (it renews every TTL/3): a new
		// session took the lock. Rare, and fine.
		release(a, l)
	case !errors.Is(err, impls.ErrNotAcquired) || !strings.Contains(err.Error(), "lease expired"):
		t.Fatalf("acquire on a revoked session: %v, want ErrNotAcquired saying the lease expired", err)
	}
	l, err = acquire(a, 5*time.Second)
	if err != nil {
		t.Fatalf("acquire after the session was replaced: %v", err)
	}
	release(a, l)
}

func TestTTLSeconds(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want int64
	}{
		{time.Millisecond, 1}, {300 * time.Millisecond, 1}, {time.Second, 1},
		{time.Second + time.Nanosecond, 2}, {2500 * time.Millisecond, 3}, {0, 1},
	} {
		if got := ttlSeconds(tc.ttl); got != tc.want {
			t.Errorf("ttlSeconds(%v) = %d, want %d", tc.ttl, got, tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, impl := range both {
		i, _ := impls.Lookup(impl)
		if !i.Fenced || !i.Guarded || i.Backend != "etcd" || i.Nodes != 3 {
			t.Errorf("%s registered as %+v", impl, i)
		}
		if _, err := i.New(context.Background(), impls.Config{Now: now}); err == nil {
			t.Errorf("%s without addresses: no error", impl)
		}
		_, err := i.New(context.Background(), impls.Config{Addrs: []string{"127.0.0.1:1"}, Now: now, Params: map[string]string{"x": "1"}})
		if err == nil || !strings.Contains(err.Error(), `unknown impl param "x"`) {
			t.Errorf("%s with a param: %v", impl, err)
		}
	}
}
