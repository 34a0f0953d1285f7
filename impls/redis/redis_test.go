package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/testcluster"
)

var allImpls = []string{"redis-set-nx-px", "redis-setnx-expire", "redis-setnx-getset", "redis-naive-del"}

// compareAndDeleteImpls are the impls whose release checks the holder.
var compareAndDeleteImpls = []string{"redis-set-nx-px", "redis-setnx-expire", "redis-setnx-getset"}

// epoch is the start of the harness clock the tests give the clients.
var epoch = time.Now()

func now() time.Duration { return time.Since(epoch) }

// startKind starts a local cluster of kind with opts for the test and
// returns it; as testcluster.Started does, it skips the test under -short,
// fails it when the cluster cannot start, and stops the cluster when the
// test ends.
func startKind(t *testing.T, kind string, opts local.Options) *local.Processes {
	t.Helper()
	c, err := local.NewProcesses(kind, opts)
	return testcluster.Started(t, c, err)
}

// startNode starts a one-node Redis cluster in a temporary directory,
// stopped when the test ends, and returns the cluster and its address.
func startNode(t *testing.T) (*local.Processes, string) {
	r := startKind(t, "redis", local.Options{Dir: t.TempDir()})
	return r, r.Nodes()[0].Addr
}

// pair starts a node and two clients of impl name on it, processes 1 and
// 2, and returns the node's address and the clients.
func pair(t *testing.T, name string) (string, impls.Client, impls.Client) {
	_, addr := startNode(t)
	return addr, newClient(t, name, addr, 1, nil), newClient(t, name, addr, 2, nil)
}

// eachPair runs test for each impl named, each in a parallel subtest of
// its name, with a pair of its own: a node at addr and two clients of the
// impl on it, a (process 1) and b (process 2).
func eachPair(t *testing.T, names []string, test func(t *testing.T, name, addr string, a, b impls.Client)) {
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			addr, a, b := pair(t, name)
			test(t, name, addr, a, b)
		})
	}
}

// newClient builds a client of impl name for process p; edit may adjust the
// configuration first.
func newClient(t *testing.T, name, addr string, p int, edit func(*impls.Config)) impls.Client {
	return testcluster.Client(t, name, []clusters.Node{{Name: "n1", Addr: addr}}, p, now, edit)
}

// raw returns a plain client to inspect the node.
func raw(t *testing.T, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func mustAcquire(t *testing.T, c impls.Client, lock string, ttl time.Duration) impls.Lease {
	t.Helper()
	l, err := c.Acquire(context.Background(), lock, ttl)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", lock, err)
	}
	return l
}

func wantNotAcquired(t *testing.T, c impls.Client, lock string, ttl time.Duration) {
	t.Helper()
	l, err := c.Acquire(context.Background(), lock, ttl)
	if !errors.Is(err, impls.ErrNotAcquired) {
		t.Fatalf("Acquire(%s) = %+v, %v; want ErrNotAcquired", lock, l, err)
	}
}

func TestRegistry(t *testing.T) {
	for _, name := range allImpls {
		i, err := impls.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if i.Backend != "redis" || i.Nodes != 1 || i.Doc == "" || i.New == nil {
			t.Errorf("%s: %+v", name, i)
		}
		if i.Fenced != (name == "redis-set-nx-px") {
			t.Errorf("%s: Fenced = %v", name, i.Fenced)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, name := range allImpls {
		i, _ := impls.Lookup(name)
		if _, err := i.New(context.Background(), impls.Config{Now: now}); err == nil {
			t.Errorf("%s: New without Addrs succeeded", name)
		}
		if _, err := i.New(context.Background(), impls.Config{Addrs: []string{"127.0.0.1:1"}}); err == nil {
			t.Errorf("%s: New without Now succeeded", name)
		}
	}
}

// Acquire, contend, release, acquire again.
func TestMutualExclusion(t *testing.T) {
	eachPair(t, allImpls, func(t *testing.T, name, addr string, a, b impls.Client) {
		ctx := context.Background()
		const ttl = 10 * time.Second

		before := now()
		la := mustAcquire(t, a, "L", ttl)
		after := now()
		if la.Lock != "L" || la.Value == "" || la.Node != addr {
			t.Errorf("lease %+v", la)
		}
		if la.ValidUntil < before+ttl || la.ValidUntil > after+ttl {
			t.Errorf("ValidUntil %v not within [%v, %v]", la.ValidUntil, before+ttl, after+ttl)
		}
		if la.HasToken != (name == "redis-set-nx-px") {
			t.Errorf("HasToken = %v", la.HasToken)
		}
		if !strings.Contains(la.Value, "p1-") {
			t.Errorf("value %q does not name process 1", la.Value)
		}

		wantNotAcquired(t, b, "L", ttl)
		wantNotAcquired(t, a, "L", ttl) // not reentrant
		lo := mustAcquire(t, b, "other", ttl)

		rel, err := a.Release(ctx, la)
		if err != nil {
			t.Fatalf("Release: %v", err)
		}
		if rel.Removed != la.Value {
			t.Errorf("Removed %q, want own value %q", rel.Removed, la.Value)
		}
		lb := mustAcquire(t, b, "L", ttl)
		if lb.Value == la.Value {
			t.Errorf("two acquires wrote the same value %q", lb.Value)
		}
		if _, err := b.Release(ctx, lb); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Release(ctx, lo); err != nil {
			t.Fatal(err)
		}
		// Released twice: nothing left to delete.
		if _, err := b.Release(ctx, lb); !errors.Is(err, impls.ErrNotHeld) {
			t.Errorf("second Release: %v, want ErrNotHeld", err)
		}
	})
}

// A lease ends after its ttl and another client can take the lock.
func TestExpiry(t *testing.T) {
	eachPair(t, allImpls, func(t *testing.T, name, addr string, a, b impls.Client) {
		const ttl = time.Second
		la := mustAcquire(t, a, "L", ttl)
		wantNotAcquired(t, b, "L", ttl)
		time.Sleep(ttl + 100*time.Millisecond)
		lb := mustAcquire(t, b, "L", ttl)
		if lb.Value == la.Value {
			t.Errorf("same value %q", lb.Value)
		}
	})
}

// Releasing an expired lease changes nothing for the impls that check the
// holder, also when another client has the lock by then.
func TestReleaseExpired(t *testing.T) {
	eachPair(t, compareAndDeleteImpls, func(t *testing.T, name, addr string, a, b impls.Client) {
		ctx := context.Background()
		const ttl = time.Second
		la := mustAcquire(t, a, "L", ttl)
		time.Sleep(ttl + 100*time.Millisecond)
		if _, err := a.Release(ctx, la); !errors.Is(err, impls.ErrNotHeld) {
			t.Fatalf("Release of an expired lease: %v, want ErrNotHeld", err)
		}
		lb := mustAcquire(t, b, "L", 10*time.Second)
		if _, err := a.Release(ctx, la); !errors.Is(err, impls.ErrNotHeld) {
			t.Fatalf("Release of an expired lease while B holds: %v, want ErrNotHeld", err)
		}
		v, err := raw(t, addr).Get(ctx, "L").Result()
		if err != nil || v != lb.Value {
			t.Fatalf("B's lock is now %q, %v; want %q", v, err, lb.Value)
		}
	})
}

// A dead or frozen node gives an error that is not ErrNotAcquired, promptly.
func TestNodeDown(t *testing.T) {
	for _, name := range allImpls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, addr := startNode(t)
			c := newClient(t, name, addr, 1, nil)
			ctx := context.Background()
			node := r.Nodes()[0]
			mustAcquire(t, c, "warm-up", time.Second) // open a connection first

			if err := r.Pause(ctx, node); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err := c.Acquire(ctx, "L", time.Second)
			if err == nil || errors.Is(err, impls.ErrNotAcquired) {
				t.Errorf("Acquire on a paused node: %v, want a timeout", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Acquire on a paused node took %v", d)
			}
			if err := r.Resume(ctx, node); err != nil {
				t.Fatal(err)
			}

			if err := r.Kill(ctx, node); err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			_, err = c.Acquire(ctx, "L", time.Second)
			if err == nil || errors.Is(err, impls.ErrNotAcquired) {
				t.Errorf("Acquire on a dead node: %v, want a connection error", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Acquire on a dead node took %v", d)
			}
		})
	}
}

func TestSetNXPXTokensIncrease(t *testing.T) {
	t.Parallel()
	_, addr := startNode(t)
	cs := []impls.Client{
		newClient(t, "redis-set-nx-px", addr, 1, nil),
		newClient(t, "redis-set-nx-px", addr, 2, nil),
	}
	ctx := context.Background()
	var last uint64
	for i := range 6 {
		c := cs[i%2]
		l := mustAcquire(t, c, "L", 10*time.Second)
		if !l.HasToken || l.Token <= last {
			t.Fatalf("acquire %d: token %d (HasToken %v) after %d", i, l.Token, l.HasToken, last)
		}
		last = l.Token
		wantNotAcquired(t, cs[(i+1)%2], "L", time.Second) // a refused acquire takes no token
		if _, err := c.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	// A takeover after expiry also gets a larger token.
	l := mustAcquire(t, cs[0], "L", 200*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	l2 := mustAcquire(t, cs[1], "L", time.Second)
	if l.Token <= last || l2.Token <= l.Token {
		t.Fatalf("tokens %d, %d after %d", l.Token, l2.Token, last)
	}
	if got, err := raw(t, addr).Get(ctx, "L:fence").Uint64(); err != nil || got != l2.Token {
		t.Fatalf("fence counter %d, %v; want %d", got, err, l2.Token)
	}
}

// A: acquire, expire; B: acquire; A: release deletes B's lock.
func TestNaiveDelDeletesOthersLock(t *testing.T) {
	t.Parallel()
	addr, a, b := pair(t, "redis-naive-del")
	c := newClient(t, "redis-naive-del", addr, 3, nil)
	ctx := context.Background()
	la := mustAcquire(t, a, "L", 200*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	lb := mustAcquire(t, b, "L", 10*time.Second)
	rel, err := a.Release(ctx, la)
	if err != nil {
		t.Fatalf("A's release: %v", err)
	}
	if rel.Removed != lb.Value {
		t.Fatalf("A's release removed %q, want B's value %q", rel.Removed, lb.Value)
	}
	// B still believes it holds the lock, and C gets it too.
	mustAcquire(t, c, "L", 10*time.Second)
}

func TestSetNXExpireHook(t *testing.T) {
	t.Parallel()
	_, addr := startNode(t)
	ctx := context.Background()
	rc := raw(t, addr)
	var points []string
	var ttlInHook time.Duration
	c := newClient(t, "redis-setnx-expire", addr, 1, func(cfg *impls.Config) {
		cfg.Hook = func(p string) {
			points = append(points, p)
			ttlInHook, _ = rc.PTTL(ctx, "L").Result()
		}
	})
	l := mustAcquire(t, c, "L", 5*time.Second)
	if len(points) != 1 || points[0] != HookBetweenSetNXExpire {
		t.Fatalf("hook points %q, want [%q]", points, HookBetweenSetNXExpire)
	}
	if ttlInHook != -1 {
		t.Errorf("PTTL inside the hook = %v, want -1 (key without TTL)", ttlInHook)
	}
	if d, err := rc.PTTL(ctx, "L").Result(); err != nil || d <= 0 || d > 5*time.Second {
		t.Errorf("PTTL after Acquire = %v, %v; want within (0, 5s]", d, err)
	}
	if _, err := c.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	points = nil
	mustAcquire(t, c, "busy", time.Second)
	wantNotAcquired(t, c, "busy", time.Second)
	if len(points) != 1 {
		t.Errorf("hook called %d times for one successful and one refused acquire", len(points))
	}
}

// A client that dies between SETNX and PEXPIRE leaves a lock nobody can take.
func TestSetNXExpireCrashLeavesLockForever(t *testing.T) {
	t.Parallel()
	_, addr := startNode(t)
	type crash struct{}
	a := newClient(t, "redis-setnx-expire", addr, 1, func(cfg *impls.Config) {
		cfg.Hook = func(string) { panic(crash{}) }
	})
	func() {
		defer func() {
			if r := recover(); r != (crash{}) {
				t.Fatalf("recovered %v", r)
			}
		}()
		a.Acquire(context.Background(), "L", 100*time.Millisecond)
		t.Fatal("hook did not run")
	}()
	time.Sleep(300 * time.Millisecond)
	b := newClient(t, "redis-setnx-expire", addr, 2, nil)
	wantNotAcquired(t, b, "L", 100*time.Millisecond)
	if d, err := raw(t, addr).PTTL(context.Background(), "L").Result(); err != nil || d != -1 {
		t.Fatalf("PTTL = %v, %v; want -1", d, err)
	}
}

func TestSetNXGetSetTakeover(t *testing.T) {
	t.Parallel()
	_, addr := startNode(t)
	ctx := context.Background()
	rc := raw(t, addr)
	a := newClient(t, "redis-setnx-getset", addr, 1, nil)
	b := newClient(t, "redis-setnx-getset", addr, 2, nil)
	// Long enough that b's first try (which also dials) comes before a's
	// expiry on a loaded machine.
	const ttl = time.Second

	wallBefore := time.Now()
	la := mustAcquire(t, a, "L", ttl)
	exp, ok := parseExpiry(la.Value)
	if !ok || exp < wallBefore.Add(ttl).UnixMilli() || exp > time.Now().Add(ttl+2*time.Millisecond).UnixMilli() {
		t.Fatalf("value %q: expiry not wall clock + ttl + 1ms", la.Value)
	}
	if d, _ := rc.PTTL(ctx, "L").Result(); d != -1 {
		t.Errorf("PTTL = %v, want -1: the recipe sets no TTL", d)
	}
	wantNotAcquired(t, b, "L", ttl)
	time.Sleep(ttl + 100*time.Millisecond)
	// The expired key is still there; B takes it over with GETSET.
	if v, _ := rc.Get(ctx, "L").Result(); v != la.Value {
		t.Fatalf("key holds %q before takeover, want A's %q", v, la.Value)
	}
	lb := mustAcquire(t, b, "L", ttl)
	if v, _ := rc.Get(ctx, "L").Result(); v != lb.Value {
		t.Fatalf("key holds %q after takeover, want B's %q", v, lb.Value)
	}
	if _, err := a.Release(ctx, la); !errors.Is(err, impls.ErrNotHeld) {
		t.Fatalf("A's release after takeover: %v, want ErrNotHeld", err)
	}
	if rel, err := b.Release(ctx, lb); err != nil || rel.Removed != lb.Value {
		t.Fatalf("B's release: %+v, %v", rel, err)
	}

	// An unparsable value is a lock nobody can take.
	if err := rc.Set(ctx, "junk", "not-a-timestamp", 0).Err(); err != nil {
		t.Fatal(err)
	}
	wantNotAcquired(t, b, "junk", ttl)
}

// A client whose wall clock runs 2×ttl ahead steals a live lock: two holders.
func TestSetNXGetSetSkewStealsLiveLock(t *testing.T) {
	t.Parallel()
	_, addr := startNode(t)
	ctx := context.Background()
	const ttl = 10 * time.Second
	a := newClient(t, "redis-setnx-getset", addr, 1, nil)
	b := newClient(t, "redis-setnx-getset", addr, 2, func(cfg *impls.Config) {
		cfg.Wall = func() time.Time { return time.Now().Add(2 * ttl) }
	})
	c := newClient(t, "redis-setnx-getset", addr, 3, nil)
	la := mustAcquire(t, a, "L", ttl)
	wantNotAcquired(t, c, "L", ttl) // an honest clock sees the lock live
	lb := mustAcquire(t, b, "L", ttl)
	if now() > la.ValidUntil {
		t.Fatal("test too slow: A's lease ended")
	}
	// Both A and B now believe they hold L.
	if _, err := a.Release(ctx, la); !errors.Is(err, impls.ErrNotHeld) {
		t.Fatalf("A's release: %v, want ErrNotHeld", err)
	}
	if _, err := b.Release(ctx, lb); err != nil {
		t.Fatalf("B's release: %v", err)
	}
}

func TestParseExpiry(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1700000000000:p1-1-00", 1700000000000, true},
		{"5:", 5, true},
		{"5", 0, false},
		{"x:y", 0, false},
		{"", 0, false},
	} {
		got, ok := parseExpiry(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseExpiry(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
