package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/impls"
)

// TestMutexStaleUnlockRetry pins etcd-io/etcd#22082 against a real
// 3-member cluster, request by request: p1's release of its lease la is
// delivered and deletes la's key, but its reply is lost (the wire applies
// the delete and returns the deadline: what reply-loss does), so the
// release is of unknown outcome. p1 acquires again on the same session:
// the key has the same name, a new create revision. Then p1 retries the
// release of la, with la's own mutex, as an application whose cleanup
// retries a failed Unlock does.
//
// With unlock=library, the retry is the released library's Mutex.Unlock,
// which deletes the key by its name: it deletes p1's new key, returns ok,
// and p2 is granted the lock while p1 still holds it: mutual-exclusion
// reports the overlap. With unlock=fenced (the library's Unlock plus the
// IsOwner guard, the fix of etcd-io/etcd#22115), the retry finds the key
// at another revision, deletes nothing and fails (not held); p1's new key
// survives, and p2 waits for it and gives up.
func TestMutexStaleUnlockRetry(t *testing.T) {
	addrs := startCluster(t)
	for p, tc := range []struct {
		unlock  string
		retryOK bool // the retry returns ok and deletes p1's new key
	}{
		{unlockLibrary, true},
		{unlockFenced, false},
	} {
		t.Run(tc.unlock, func(t *testing.T) {
			ctx := context.Background()
			p1, p2 := 2*p+1, 2*p+2 // the subtests' sessions and keys apart
			a, w := wiredMutex(t, addrs, p1, "unlock="+tc.unlock)
			b := newClientWith(t, "etcd-mutex", addrs, p2, "unlock="+tc.unlock)
			r := &recorder{}
			la, err := r.acquire(p1, func() (impls.Lease, error) { return acquire(a, 5*time.Second) })
			if err != nil {
				t.Fatal(err)
			}
			w.loseNextReply()
			if err := r.release(p1, a, la, 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("release whose reply is lost: %v, want the deadline", err)
			}
			if resp, err := a.cli.Get(ctx, la.Value); err != nil || len(resp.Kvs) != 0 {
				t.Fatalf("p1's key after the release whose reply was lost: %v %v, want it deleted", resp, err)
			}
			la2 := r.acquireAbove(t, p1, a, la, "on the same session")
			if la2.Value != la.Value {
				t.Fatalf("p1's second key %s, want the session's key %s again", la2.Value, la.Value)
			}

			err = r.release(p1, a, la, 5*time.Second) // the retry, with la's mutex
			switch {
			case tc.retryOK && err != nil:
				t.Fatalf("the retried release: %v, want ok", err)
			case !tc.retryOK && !errors.Is(err, impls.ErrNotHeld):
				t.Fatalf("the retried release: %v, want not held", err)
			}
			resp, err := a.cli.Get(ctx, la2.Value)
			if err != nil {
				t.Fatal(err)
			}
			if deleted := len(resp.Kvs) == 0; deleted != tc.retryOK {
				t.Fatalf("p1's new key %s deleted by the retry: %v, want %v", la2.Value, deleted, tc.retryOK)
			}
			if !tc.retryOK && resp.Kvs[0].CreateRevision != int64(la2.Token) {
				t.Fatalf("p1's key has revision %d, want %d", resp.Kvs[0].CreateRevision, la2.Token)
			}

			lb, err := r.acquire(p2, func() (impls.Lease, error) { return acquire(b, 500*time.Millisecond) })
			switch {
			case tc.retryOK && err != nil:
				t.Fatalf("p2's acquire after p1's key was deleted: %v, want it granted", err)
			case !tc.retryOK && !errors.Is(err, impls.ErrNotAcquired):
				t.Fatalf("p2's acquire while p1 holds the lock: %v, want not acquired", err)
			}
			if err := r.release(p1, a, la2, 5*time.Second); err != nil {
				t.Fatalf("p1's release of its second lease: %v", err)
			}
			if tc.retryOK {
				if err := r.release(p2, b, lb, 5*time.Second); err != nil {
					t.Fatal(err)
				}
			}

			ft, me := fencing(r.h)
			if ft.Valid != checker.Valid {
				t.Errorf("fencing-tokens %s %+v, want valid: every token was fresh", ft.Valid, ft.Anomalies)
			}
			switch {
			case tc.retryOK && (me.Valid != checker.Invalid || len(me.Anomalies) != 1 || me.Anomalies[0].Kind != checker.KindOverlappingHolds):
				t.Errorf("mutual-exclusion %s %+v; want one overlapping-holds, p1's second hold and p2's:\n%s", me.Valid, me.Anomalies, historyText(r.h))
			case !tc.retryOK && me.Valid != checker.Valid:
				t.Errorf("mutual-exclusion %s %+v, want valid:\n%s", me.Valid, me.Anomalies, historyText(r.h))
			}
		})
	}
}

// TestMutexRetryAfterReentrantGrant: a release of unknown outcome that was
// not applied leaves the key, so the next acquire on the session is a
// re-entrant grant of the same key and revision, a mutex of its own. When
// that grant is released (ok) and the session acquires again (a newer
// revision), the retry of the first release still has the first grant's
// mutex: with unlock=library it deletes the newest key by name, as an
// application's retried Unlock would; fenced, it deletes nothing and fails.
func TestMutexRetryAfterReentrantGrant(t *testing.T) {
	addrs := startCluster(t)
	for p, unlock := range []string{unlockLibrary, unlockFenced} {
		t.Run(unlock, func(t *testing.T) {
			ctx := context.Background()
			a, w := wiredMutex(t, addrs, p+1, "unlock="+unlock)
			la, err := acquire(a, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if unlock == unlockLibrary {
				w.dropNextDelete()
			} else {
				w.holdNextTxn() // held, never landed
			}
			rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err = a.Release(rctx, la)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the lost release: %v, want the deadline", err)
			}
			la2, err := acquire(a, 5*time.Second)
			if err != nil || la2.Token != la.Token || la2.Value != la.Value {
				t.Fatalf("re-grant %d %s %v, want the same key %s and revision %d", la2.Token, la2.Value, err, la.Value, la.Token)
			}
			if _, err := release(a, la2); err != nil {
				t.Fatalf("release of the re-grant: %v", err)
			}
			la3, err := acquire(a, 5*time.Second)
			if err != nil || la3.Value != la.Value || la3.Token <= la.Token {
				t.Fatalf("third grant %d %s %v, want key %s at a revision above %d", la3.Token, la3.Value, err, la.Value, la.Token)
			}
			_, err = release(a, la) // the retry of the first release
			resp, gerr := a.cli.Get(ctx, la3.Value)
			if gerr != nil {
				t.Fatal(gerr)
			}
			switch {
			case unlock == unlockLibrary && (err != nil || len(resp.Kvs) != 0):
				t.Errorf("the retry: %v, key left %d; want ok, and the newest key deleted by name", err, len(resp.Kvs))
			case unlock == unlockFenced && (!errors.Is(err, impls.ErrNotHeld) || len(resp.Kvs) != 1):
				t.Errorf("the retry: %v, key left %d; want not held, and the newest key kept", err, len(resp.Kvs))
			}
		})
	}
}

// TestMutexUnlockParam: etcd-mutex refuses an unlock other than fenced or
// library (TestMutexStaleUnlockRetry runs both), and any other param;
// etcd-lease-txn takes none. Each is refused before a connection is made.
func TestMutexUnlockParam(t *testing.T) {
	for _, tc := range []struct {
		impl, param string
		want        string
	}{
		{"etcd-mutex", "unlock=sometimes", `etcd-mutex: impl param unlock="sometimes": want fenced or library`},
		{"etcd-mutex", "lease=1", `etcd-mutex: unknown impl param "lease" (it takes: unlock)`},
		{"etcd-lease-txn", "unlock=library", `etcd-lease-txn: unknown impl param "unlock" (it takes: none)`},
	} {
		i, err := impls.Lookup(tc.impl)
		if err != nil {
			t.Fatal(err)
		}
		k, v, _ := strings.Cut(tc.param, "=")
		c, err := i.New(context.Background(), impls.Config{Addrs: []string{"127.0.0.1:1"}, Now: now, Params: map[string]string{k: v}})
		if err == nil {
			c.Close()
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s %s: %v, want %q", tc.impl, tc.param, err, tc.want)
		}
	}
}
