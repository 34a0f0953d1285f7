package rueidislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters/clockshim"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/testcluster"
)

var epoch = time.Now()

func now() time.Duration { return time.Since(epoch) }

// notice is one lost-lock notice a client sent.
type notice struct{ lock, value, reason string }

// node starts a one-node Redis, under the clock shim clocks when it is not
// nil, stopped when the test ends, and returns its address.
func node(t *testing.T, clocks *clockshim.Clocks) string {
	opts := local.Options{Dir: t.TempDir()}
	if clocks != nil {
		opts.NodeEnv = func(n string) []string {
			env, err := clocks.Env(n)
			if err != nil {
				t.Error(err)
			}
			return env
		}
	}
	c, err := local.NewProcesses("redis", opts)
	return testcluster.Started(t, c, err).Nodes()[0].Addr
}

// client returns a rueidislock client of process p on addr with params,
// closed when the test ends; its notices go to the channel it returns.
func client(t *testing.T, addr string, p int, params map[string]string) (*Client, chan notice) {
	t.Helper()
	ch := make(chan notice, 16)
	c, err := New(impls.Config{Addrs: []string{addr}, Process: p, Now: now, Params: params,
		Lost: func(lock, value, reason string) { ch <- notice{lock, value, reason} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ch
}

func TestParams(t *testing.T) {
	for _, tt := range []struct {
		params map[string]string
		want   params
		err    string
	}{
		{nil, params{majority: 2}, ""},
		{map[string]string{"setpx": "on", "majority": "1"}, params{setpx: true, majority: 1}, ""},
		{map[string]string{"setpx": "yes"}, params{}, `rueidislock: impl param setpx="yes" must be on or off`},
		{map[string]string{"majority": "0"}, params{}, `rueidislock: impl param majority="0" must be a whole number from 1 to 16`},
		{map[string]string{"keys": "3"}, params{}, `rueidislock: unknown impl param "keys" (known: setpx, majority)`},
	} {
		p, err := parseParams(tt.params)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%v: error %v, want %q", tt.params, err, tt.err)
			}
			continue
		}
		if err != nil || p != tt.want {
			t.Errorf("%v: %+v, %v; want %+v", tt.params, p, err, tt.want)
		}
	}
}

// A held lock refuses a second client until its holder releases it; a
// second release of the same lease is refused.
func TestTryAndRelease(t *testing.T) {
	addr := node(t, nil)
	a, _ := client(t, addr, 1, nil)
	b, _ := client(t, addr, 2, nil)
	ctx := context.Background()
	la, err := a.Acquire(ctx, "L", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if la.HasToken || la.ValidUntil != 0 || la.Value == "" {
		t.Errorf("lease %+v: want no token, no end, a value", la)
	}
	if _, err := b.Acquire(ctx, "L", 10*time.Second); !errors.Is(err, impls.ErrNotAcquired) {
		t.Fatalf("second acquire of a held lock: %v, want ErrNotAcquired", err)
	}
	if _, err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "L", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire after the release: %v", err)
	}
	if lb.Value == la.Value {
		t.Errorf("two acquires share the value %s", la.Value)
	}
	if _, err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}

// When another client deletes the lock's keys, rueidislock learns it
// from the invalidation of its client-side cache, cancels the lock's
// context, and the holder is told; its release then says the lock was
// not held.
func TestLostLockIsTold(t *testing.T) {
	addr := node(t, nil)
	a, lost := client(t, addr, 1, nil)
	ctx := context.Background()
	l, err := a.Acquire(ctx, "L", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	if err := rc.Del(ctx, "rueidislock:0:L", "rueidislock:1:L", "rueidislock:2:L").Err(); err != nil {
		t.Fatal(err)
	}
	// A guard against a hang, not a measure of speed: the notice comes
	// from the invalidations, long before the minute's first extend.
	select {
	case n := <-lost:
		if n.lock != "L" || n.value != l.Value || !strings.Contains(n.reason, "cancelled the lock's context") {
			t.Errorf("notice %+v, want one about %s %s", n, "L", l.Value)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notice after the lock's keys were deleted")
	}
	if _, err := a.Release(ctx, l); !errors.Is(err, impls.ErrNotHeld) {
		t.Errorf("release of a lost lock: %v, want ErrNotHeld", err)
	}
}

// The flaw: rueidislock sends its keys' expiry as an absolute time on the
// client's clock (SET NX PXAT). With the server's clock an hour ahead,
// every key it sets is already expired: both clients are granted the
// lock. With FallbackSETPX (setpx=on) the acquire sends a relative PX,
// and the second client is refused.
func TestServerClockAheadGrantsTheLockTwice(t *testing.T) {
	clocks := shim(t)
	addr := node(t, clocks)
	if err := clocks.Set("n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		setpx string
		twice bool
	}{{"off", true}, {"on", false}} {
		lock := "L-setpx-" + tt.setpx
		params := map[string]string{ParamSetPX: tt.setpx}
		a, _ := client(t, addr, 1, params)
		b, _ := client(t, addr, 2, params)
		// A minute's validity: setpx's first extend (PEXPIREAT, which
		// this offset expires at once) comes 30 s after the acquire.
		if _, err := a.Acquire(ctx, lock, time.Minute); err != nil {
			t.Fatalf("setpx=%s: %v", tt.setpx, err)
		}
		_, err := b.Acquire(ctx, lock, time.Minute)
		switch {
		case tt.twice && err != nil:
			t.Errorf("setpx=%s, server clock 1h ahead: the second acquire failed (%v); rueidislock's PXAT keys should be expired at once", tt.setpx, err)
		case !tt.twice && !errors.Is(err, impls.ErrNotAcquired):
			t.Errorf("setpx=%s, server clock 1h ahead: the second acquire gave %v, want ErrNotAcquired", tt.setpx, err)
		}
	}
}

// shim builds the clock shim, or skips the test where no C compiler is.
func shim(t *testing.T) *clockshim.Clocks {
	t.Helper()
	dir, err := clockshim.CacheDir()
	if err != nil {
		t.Skip(err)
	}
	lib, err := clockshim.Build(context.Background(), dir)
	if err != nil {
		t.Skipf("the clock shim cannot be built here: %v", err)
	}
	c, err := clockshim.New(lib, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
