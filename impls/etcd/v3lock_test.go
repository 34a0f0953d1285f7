package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/impls"
)

// keysOf returns the keys under etcd-v3lock's name of lock-0, read with
// admin.
func keysOf(t *testing.T, admin *clientv3.Client) []string {
	t.Helper()
	r, err := admin.Get(context.Background(), v3lockPrefix+"lock-0", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range r.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// TestV3lock runs etcd's lock service on a real cluster: it excludes and
// hands the lock on with a higher token; a waiter that gives up leaves no
// key; a holder whose lease was revoked is refused by the guarded write,
// but its Unlock still succeeds (it deletes by name, and its key is
// gone); and an Unlock of an old grant, retried after the same session
// locked again, deletes the newer grant's key and lets another client in
// (etcd-io/etcd#22082's mechanism in the service).
func TestV3lock(t *testing.T) {
	addrs := startCluster(t)
	admin, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	a, b := newClient(t, "etcd-v3lock", addrs, 1), newClient(t, "etcd-v3lock", addrs, 2)

	before := now()
	la, err := acquire(a, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after := now()
	if !la.HasToken || la.Token == 0 || la.Lock != "lock-0" || la.Value == "" {
		t.Fatalf("lease %+v", la)
	}
	if la.ValidUntil < before+time.Second || la.ValidUntil > after+time.Second {
		t.Errorf("valid until %v, want the acquire's time + 1s (acquire ran %v..%v)", la.ValidUntil, before, after)
	}
	r, err := admin.Get(ctx, la.Value)
	if err != nil || len(r.Kvs) != 1 || uint64(r.Kvs[0].CreateRevision) != la.Token || r.Kvs[0].Lease == 0 {
		t.Fatalf("the key the service returned, %s: %v %v; want it created at the token %d, with a lease", la.Value, r, err, la.Token)
	}
	// A waiter that gives up is a fail and leaves nothing behind.
	if _, err := acquire(b, 300*time.Millisecond); !errors.Is(err, impls.ErrNotAcquired) {
		t.Fatalf("second acquire while held: %v, want ErrNotAcquired", err)
	}
	if keys := keysOf(t, admin); len(keys) != 1 || keys[0] != la.Value {
		t.Errorf("keys after a waiter gave up: %v, want only the holder's %s", keys, la.Value)
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
	// Unlock deletes by name and says nothing of what it deleted: a
	// second release of a's grant succeeds, and b's key stays.
	if _, err := release(a, la); err != nil {
		t.Errorf("second release: %v; v3lock's Unlock succeeds whatever it deletes", err)
	}
	if keys := keysOf(t, admin); len(keys) != 1 || keys[0] != lb.Value {
		t.Errorf("keys after a's second release: %v, want b's %s", keys, lb.Value)
	}

	// b's lease ends on the server, as a paused holder's does.
	r, err = admin.Get(ctx, lb.Value)
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("b's key: %v %v", r, err)
	}
	if _, err := admin.Revoke(ctx, clientv3.LeaseID(r.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	la2, err := acquire(a, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ga, gb := a.(impls.GuardedWriter), b.(impls.GuardedWriter)
	if ok, err := gb.GuardedWrite(ctx, lb, "r", 1); ok || err != nil {
		t.Errorf("stale holder's guarded write: accepted %v, %v; want refused", ok, err)
	}
	if ok, err := ga.GuardedWrite(ctx, la2, "r", 2); !ok || err != nil {
		t.Errorf("new holder's guarded write: accepted %v, %v", ok, err)
	}
	if n, err := gb.GuardedRead(ctx, lb, "r"); n != 2 || err != nil {
		t.Errorf("read %d %v, want 2", n, err)
	}
	if _, err := release(b, lb); err != nil {
		t.Errorf("stale release: %v; v3lock's Unlock succeeds for a holder that lost the lock", err)
	}
	// b's next Lock goes with its revoked lease, unless its keep-alive
	// noticed first: either way a fail, and a's lock is still a's.
	if lb2, err := acquire(b, 500*time.Millisecond); !errors.Is(err, impls.ErrNotAcquired) {
		t.Fatalf("b's acquire while a holds %+v: %+v %v, want ErrNotAcquired", la2, lb2, err)
	}
	if _, err := release(a, la2); err != nil {
		t.Fatal(err)
	}

	// The same session locks again under the same key name, and a retried
	// Unlock of the older grant deletes the newer one.
	la3, err := acquire(a, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if la3.Value != la2.Value || la3.Token <= la2.Token {
		t.Fatalf("a's next grant %+v after %+v: want the same key, a newer revision", la3, la2)
	}
	if _, err := release(a, la2); err != nil {
		t.Fatalf("retried release of the older grant: %v", err)
	}
	lb3, err := acquire(b, 5*time.Second)
	if err != nil {
		t.Fatalf("b after the retried release deleted a's newer key: %v, want granted (two holders)", err)
	}
	if lb3.Token <= la3.Token {
		t.Errorf("token %d after %d", lb3.Token, la3.Token)
	}
	for _, rel := range []struct {
		c impls.Client
		l impls.Lease
	}{{b, lb3}, {a, la3}} {
		if _, err := release(rel.c, rel.l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestV3lockRefusesParams: etcd-v3lock takes no impl params.
func TestV3lockRefusesParams(t *testing.T) {
	_, err := newV3lock(impls.Config{Addrs: []string{"127.0.0.1:1"}, Now: now, Params: map[string]string{"unlock": "fenced"}})
	if err == nil || err.Error() != `etcd-v3lock: unknown impl param "unlock" (it takes: none)` {
		t.Errorf("an impl param: %v", err)
	}
}
