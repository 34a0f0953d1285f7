package seeded

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/redis"
	"github.com/locktest/locktest/testkit/testcluster"
)

// epoch is the start of the harness clock the tests give the clients.
var epoch = time.Now()

func now() time.Duration { return time.Since(epoch) }

// startRedis starts a one-node Redis for the test and returns its
// address; it skips the test under -short.
func startRedis(t *testing.T) string {
	t.Helper()
	c, err := local.NewProcesses("redis", local.Options{Dir: t.TempDir()})
	return testcluster.Started(t, c, err).Nodes()[0].Addr
}

// redisClient is a client of impl name for process p on the node at
// addr; edit, when not nil, adjusts its configuration first.
func redisClient(t *testing.T, name, addr string, p int, edit func(*impls.Config)) impls.Client {
	return testcluster.Client(t, name, []clusters.Node{{Name: "n1", Addr: addr}}, p, now, edit)
}

// rawRedis is a plain client to look at and change the node.
func rawRedis(t *testing.T, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

var bg = context.Background()

func mustAcquire(t *testing.T, c impls.Client, lock string, ttl time.Duration) impls.Lease {
	t.Helper()
	l, err := c.Acquire(bg, lock, ttl)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", lock, err)
	}
	return l
}

func mustRelease(t *testing.T, c impls.Client, l impls.Lease) impls.Released {
	t.Helper()
	r, err := c.Release(bg, l)
	if err != nil {
		t.Fatalf("Release(%s %s): %v", l.Lock, l.Value, err)
	}
	return r
}

// expire ends the lease on lock at once, as its TTL running out would.
func expire(t *testing.T, raw *goredis.Client, lock string) {
	t.Helper()
	if err := raw.Del(bg, lock).Err(); err != nil {
		t.Fatal(err)
	}
}

// value is what the node holds under key, "" for nothing.
func value(t *testing.T, raw *goredis.Client, key string) string {
	t.Helper()
	v, err := raw.Get(bg, key).Result()
	if errors.Is(err, goredis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// handover checks, on an unseeded recipe, what each of the zoo's bugs
// breaks one part of: a acquires lock; b's acquire, bounded by 2 s, is
// refused (impls.ErrNotAcquired); a releases; b acquires with a higher
// token and a value of its own.
func handover(t *testing.T, a, b impls.Client, lock string) {
	t.Helper()
	la := mustAcquire(t, a, lock, time.Minute)
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	l, err := b.Acquire(ctx, lock, time.Minute)
	cancel()
	if !errors.Is(err, impls.ErrNotAcquired) {
		t.Fatalf("the acquire while %s holds the lock = %+v, %v; want ErrNotAcquired", la.Value, l, err)
	}
	mustRelease(t, a, la)
	lb := mustAcquire(t, b, lock, time.Minute)
	if !la.HasToken || !lb.HasToken || lb.Token <= la.Token || la.Value == lb.Value {
		t.Errorf("leases %+v then %+v: want increasing tokens and two values", la, lb)
	}
	mustRelease(t, b, lb)
}

// TestRedisBaseIsCorrect: the recipe every Redis impl of the zoo varies,
// unseeded, hands the lock over with increasing tokens, refuses a second
// holder, and does not release a lease that is no longer held; so what
// the zoo's impls do besides is their bug's.
func TestRedisBaseIsCorrect(t *testing.T) {
	addr := startRedis(t)
	conn := func(p int) *setNXPX {
		c, err := newRedisConn(impls.Config{Addrs: []string{addr}, Process: p, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return &setNXPX{c}
	}
	a, b := conn(1), conn(2)
	handover(t, a, b, "lock-0")
	lb := mustAcquire(t, b, "lock-0", time.Minute)
	expire(t, rawRedis(t, addr), "lock-0")
	la := mustAcquire(t, a, "lock-0", time.Minute)
	if _, err := b.Release(bg, lb); !errors.Is(err, impls.ErrNotHeld) {
		t.Errorf("release of an expired lease while another holds the lock: %v, want ErrNotHeld", err)
	}
	if got := value(t, rawRedis(t, addr), "lock-0"); got != la.Value {
		t.Errorf("the lock holds %q after the stale release, want the holder's %q", got, la.Value)
	}
}

// TestSetNXExpireLeavesAKeyWithoutTTL: between its two commands the key
// seeded-setnx-expire set has no TTL; a client that died there would leave
// it for ever.
func TestSetNXExpireLeavesAKeyWithoutTTL(t *testing.T) {
	addr := startRedis(t)
	raw := rawRedis(t, addr)
	var between time.Duration = -3
	c := redisClient(t, "seeded-setnx-expire", addr, 1, func(cfg *impls.Config) {
		cfg.Hook = func(p string) {
			if p == redis.HookBetweenSetNXExpire {
				between = raw.PTTL(bg, "lock-0").Val()
			}
		}
	})
	mustAcquire(t, c, "lock-0", time.Minute)
	if between != -1 {
		t.Fatalf("PTTL at %s = %v, want -1 (a key without a TTL)", redis.HookBetweenSetNXExpire, between)
	}
	if d := raw.PTTL(bg, "lock-0").Val(); d <= 0 {
		t.Errorf("PTTL after the acquire = %v, want the ttl", d)
	}
}

// TestReleaseDelDeletesTheNextHoldersLock: a holder whose lease ended
// deletes, on release, the lock the next holder took.
func TestReleaseDelDeletesTheNextHoldersLock(t *testing.T) {
	addr := startRedis(t)
	raw := rawRedis(t, addr)
	a, b := redisClient(t, "seeded-release-del", addr, 1, nil), redisClient(t, "seeded-release-del", addr, 2, nil)
	la := mustAcquire(t, a, "lock-0", time.Minute)
	expire(t, raw, "lock-0")
	lb := mustAcquire(t, b, "lock-0", time.Minute)
	mustRelease(t, a, la)
	if got := value(t, raw, "lock-0"); got != "" {
		t.Fatalf("after the stale release the lock holds %q, want nothing: %q's lock deleted", got, lb.Value)
	}
}

// TestShortLeaseKeyLivesHalfTheBelief: the key lives half the ttl the
// lease believes.
func TestShortLeaseKeyLivesHalfTheBelief(t *testing.T) {
	addr := startRedis(t)
	c := redisClient(t, "seeded-short-lease", addr, 1, nil)
	before := now()
	l := mustAcquire(t, c, "lock-0", time.Minute)
	if belief := l.ValidUntil - before; belief < time.Minute-time.Second {
		t.Errorf("the lease believes %v, want about a minute", belief)
	}
	if d := rawRedis(t, addr).PTTL(bg, "lock-0").Val(); d > 30*time.Second || d <= 0 {
		t.Errorf("the key's PTTL is %v, want at most 30s (half the ttl)", d)
	}
}

// TestProcessTokenRepeatsAcrossClients: two clients' first grants carry
// the same token.
func TestProcessTokenRepeatsAcrossClients(t *testing.T) {
	addr := startRedis(t)
	a, b := redisClient(t, "seeded-process-token", addr, 1, nil), redisClient(t, "seeded-process-token", addr, 2, nil)
	la := mustAcquire(t, a, "lock-0", time.Minute)
	mustRelease(t, a, la)
	la2 := mustAcquire(t, a, "lock-0", time.Minute)
	mustRelease(t, a, la2)
	lb := mustAcquire(t, b, "lock-0", time.Minute)
	if !lb.HasToken || lb.Token >= la2.Token {
		t.Fatalf("tokens %d, %d, then another client's %d: want the third below the second", la.Token, la2.Token, lb.Token)
	}
}

// TestErrorGrantedTakesAFailureForAGrant: an acquire that cannot reach
// any server is granted.
func TestErrorGrantedTakesAFailureForAGrant(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := redisClient(t, "seeded-error-granted", addr, 1, nil)
	l, err := c.Acquire(bg, "lock-0", time.Minute)
	if err != nil || l.Lock != "lock-0" || l.ValidUntil == 0 {
		t.Fatalf("Acquire with no server = %+v, %v; want a lease", l, err)
	}
}

// TestReleaseWrongKeyLeavesTheLock: the release removes nothing; the lock
// stays held until its TTL ends.
func TestReleaseWrongKeyLeavesTheLock(t *testing.T) {
	addr := startRedis(t)
	c := redisClient(t, "seeded-release-wrong-key", addr, 1, nil)
	l := mustAcquire(t, c, "lock-0", time.Minute)
	if _, err := c.Release(bg, l); !errors.Is(err, impls.ErrNotHeld) {
		t.Errorf("release: %v, want ErrNotHeld (it looked in the wrong key)", err)
	}
	if got := value(t, rawRedis(t, addr), "lock-0"); got != l.Value {
		t.Fatalf("after the release the lock holds %q, want still the holder's %q", got, l.Value)
	}
}

// TestClockAfterReplyTimesTheLeaseFromTheReply: the lease's ValidUntil is
// counted from the clock read after the reply.
func TestClockAfterReplyTimesTheLeaseFromTheReply(t *testing.T) {
	addr := startRedis(t)
	var reads []time.Duration
	c := redisClient(t, "seeded-clock-after-reply", addr, 1, func(cfg *impls.Config) {
		// A clock that moves a second at every reading.
		cfg.Now = func() time.Duration {
			reads = append(reads, time.Duration(len(reads))*time.Second)
			return reads[len(reads)-1]
		}
	})
	l := mustAcquire(t, c, "lock-0", time.Minute)
	if len(reads) < 2 || l.ValidUntil != reads[len(reads)-1]+time.Minute {
		t.Fatalf("ValidUntil %v with the clock read at %v: want the last reading, after the reply, plus the ttl", l.ValidUntil, reads)
	}
}

// TestGetThenSetGrantsTwoHolders: a contender that takes the lock between
// another's GET and SET is overwritten, and both hold the lock.
func TestGetThenSetGrantsTwoHolders(t *testing.T) {
	addr := startRedis(t)
	b := redisClient(t, "seeded-get-then-set", addr, 2, nil)
	var lb impls.Lease
	a := redisClient(t, "seeded-get-then-set", addr, 1, func(cfg *impls.Config) {
		cfg.Hook = func(p string) {
			if p == HookBetweenGetAndSet {
				lb = mustAcquire(t, b, "lock-0", time.Minute)
			}
		}
	})
	la := mustAcquire(t, a, "lock-0", time.Minute)
	if lb.Value == "" || la.Value == lb.Value {
		t.Fatalf("leases %+v and %+v: want two holders", la, lb)
	}
}

// TestWallClockTokenGoesBackWithTheClock: a client whose wall clock is
// behind gets a lower token than the holder before it.
func TestWallClockTokenGoesBackWithTheClock(t *testing.T) {
	addr := startRedis(t)
	a := redisClient(t, "seeded-wall-clock-token", addr, 1, nil)
	b := redisClient(t, "seeded-wall-clock-token", addr, 2, func(cfg *impls.Config) {
		cfg.Wall = func() time.Time { return time.Now().Add(-time.Second) }
	})
	la := mustAcquire(t, a, "lock-0", time.Minute)
	mustRelease(t, a, la)
	lb := mustAcquire(t, b, "lock-0", time.Minute)
	if lb.Token >= la.Token {
		t.Fatalf("tokens %d then %d: want the second lower", la.Token, lb.Token)
	}
}

// TestReleaseAlwaysOKReportsAReleaseOfALostLease: the release of a lease
// that another holder replaced reports success, and changes nothing.
func TestReleaseAlwaysOKReportsAReleaseOfALostLease(t *testing.T) {
	addr := startRedis(t)
	raw := rawRedis(t, addr)
	a, b := redisClient(t, "seeded-release-always-ok", addr, 1, nil), redisClient(t, "seeded-release-always-ok", addr, 2, nil)
	la := mustAcquire(t, a, "lock-0", time.Minute)
	expire(t, raw, "lock-0")
	lb := mustAcquire(t, b, "lock-0", time.Minute)
	if r := mustRelease(t, a, la); r.Removed != la.Value {
		t.Errorf("the release says it removed %q, want the lost lease's %q", r.Removed, la.Value)
	}
	if got := value(t, raw, "lock-0"); got != lb.Value {
		t.Fatalf("the lock holds %q, want the new holder's %q", got, lb.Value)
	}
}
