package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/testcluster"
)

// epoch is the start of the harness clock the tests give the clients.
var epoch = time.Now()

func now() time.Duration { return time.Since(epoch) }

func TestRegistry(t *testing.T) {
	for _, tt := range []struct {
		name  string
		nodes int
	}{{"redlock", 5}, {"redlock-3", 3}, {"redlock-extend", 5}} {
		i, err := impls.Lookup(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if i.Backend != "redis" || i.Nodes != tt.nodes || i.Fenced || i.Doc == "" || i.New == nil {
			t.Errorf("%s: %+v", tt.name, i)
		}
		if !slices.Equal(i.Points, Points(tt.nodes)) || len(i.Points) != tt.nodes+1 || !slices.Contains(i.Points, "after-majority") || !slices.Contains(i.Points, fmt.Sprintf("after-node-%d", tt.nodes)) {
			t.Errorf("%s: points %v", tt.name, i.Points)
		}
	}
}

func TestParseParams(t *testing.T) {
	tests := []struct {
		p       map[string]string
		extend  bool
		want    params
		wantErr string
	}{
		{nil, false, params{tries: 1, drift: 0.01, timeoutFactor: 0.05}, ""},
		{nil, true, params{extend: true, tries: 1, drift: 0.01, timeoutFactor: 0.05}, ""},
		{map[string]string{"extend": "on", "tries": "3", "drift": "0.05", "timeout-factor": "0.5"}, false,
			params{extend: true, tries: 3, drift: 0.05, timeoutFactor: 0.5}, ""},
		{map[string]string{"extend": "off"}, true, params{tries: 1, drift: 0.01, timeoutFactor: 0.05}, ""},
		{map[string]string{"timeout-factor": "0"}, false, params{}, "timeout-factor"},
		{map[string]string{"extend": "maybe"}, false, params{}, "extend"},
		{map[string]string{"tries": "0"}, false, params{}, "tries"},
		{map[string]string{"drift": "1.5"}, false, params{}, "drift"},
		{map[string]string{"color": "red"}, false, params{}, `unknown param "color"`},
		{map[string]string{"setnx-on-extend": "on", "extend-every": "50ms"}, true,
			params{extend: true, every: 50 * time.Millisecond, setNX: true, tries: 1, drift: 0.01, timeoutFactor: 0.05}, ""},
		{map[string]string{"setnx-on-extend": "on"}, false, params{}, "without the keep-alive"},
		{map[string]string{"extend-every": "1s", "extend": "off"}, true, params{}, "without the keep-alive"},
		{map[string]string{"setnx-on-extend": "yes"}, true, params{}, "setnx-on-extend"},
		{map[string]string{"extend-every": "0s"}, true, params{}, "extend-every"},
	}
	for _, tt := range tests {
		got, err := parseParams(tt.p, tt.extend)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseParams(%v) err %v, want %q", tt.p, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseParams(%v) = %+v, %v; want %+v", tt.p, got, err, tt.want)
		}
	}
}

func TestClassifyLockErr(t *testing.T) {
	taken := errors.Join(&redsync.ErrNodeTaken{Node: 0}, &redsync.ErrNodeTaken{Node: 1})
	nodeDown := errors.Join(&redsync.ErrNodeTaken{Node: 0}, &redsync.RedisError{Node: 2, Err: errors.New("connection refused")})
	tests := []struct {
		name        string
		err         error
		grants      int
		notAcquired bool
		expired     bool
	}{
		{"majority taken", &redsync.ErrTaken{Nodes: []int{0, 1, 2}}, 0, true, false},
		{"split without errors", taken, 2, true, false},
		{"validity ran out", redsync.ErrFailed, 5, true, true},
		{"validity ran out, a node refused", taken, 4, true, true},
		{"a node failed", nodeDown, 2, false, false},
		{"validity ran out, a node failed", nodeDown, 3, true, true},
		{"deadline", context.DeadlineExceeded, 1, false, false},
	}
	for _, tt := range tests {
		got := classifyLockErr(tt.err, tt.grants, 3, 5)
		if errors.Is(got, impls.ErrNotAcquired) != tt.notAcquired || errors.Is(got, ErrValidityExpired) != tt.expired {
			t.Errorf("%s: %v: ErrNotAcquired %v (want %v), expired %v (want %v)", tt.name, got,
				errors.Is(got, impls.ErrNotAcquired), tt.notAcquired, errors.Is(got, ErrValidityExpired), tt.expired)
		}
	}
}

func TestOnHarnessClock(t *testing.T) {
	wall := time.Now()
	for _, d := range []time.Duration{-time.Second, 0, 1500 * time.Millisecond} {
		if got := onHarnessClock(wall.Add(d), 10*time.Second, wall); got != 10*time.Second+d {
			t.Errorf("until = now%+v: got %v, want %v", d, got, 10*time.Second+d)
		}
	}
}

// The attempt calls after-node-K for every reply in arrival order and
// after-majority exactly once, at the quorum-th grant.
func TestAttemptPoints(t *testing.T) {
	tests := []struct {
		replies []bool
		want    []string
	}{
		{[]bool{true, true, true, true, true},
			[]string{"after-node-1", "after-node-2", "after-node-3", "after-majority", "after-node-4", "after-node-5"}},
		{[]bool{false, true, false, true, true},
			[]string{"after-node-1", "after-node-2", "after-node-3", "after-node-4", "after-node-5", "after-majority"}},
		{[]bool{false, false, false, true, true},
			[]string{"after-node-1", "after-node-2", "after-node-3", "after-node-4", "after-node-5"}},
	}
	for _, tt := range tests {
		var got []string
		a := &attempt{quorum: 3, hook: func(p string) { got = append(got, p) }, granted: make([]bool, 5)}
		for i, ok := range tt.replies {
			a.reply(i, ok)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("replies %v: points %v, want %v", tt.replies, got, tt.want)
		}
		var wantNames []string
		for i, ok := range tt.replies {
			if ok {
				wantNames = append(wantNames, fmt.Sprintf("n%d", i+1))
			}
		}
		if names := a.grantedNames([]string{"n1", "n2", "n3", "n4", "n5"}); !slices.Equal(names, wantNames) {
			t.Errorf("granted %v, want %v", names, wantNames)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	i, _ := impls.Lookup("redlock")
	for _, cfg := range []impls.Config{
		{Now: now},
		{Addrs: []string{"127.0.0.1:1"}},
		{Addrs: []string{"127.0.0.1:1"}, Now: now, Params: map[string]string{"tries": "x"}},
	} {
		if c, err := i.New(context.Background(), cfg); err == nil {
			c.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// slow gives a node ttl/2 to answer, not redsync's ttl/20 (a few ms for the
// short ttls of the tests), so that a loaded test machine does not fail the
// acquires.
func slow(c *impls.Config) { c.Params = map[string]string{"timeout-factor": "0.5"} }

// startNodes starts n independent redis-servers, stopped when the test ends.
func startNodes(t *testing.T, n int) *local.Processes {
	r, err := local.NewProcesses("redis", local.Options{Nodes: n, Dir: t.TempDir()})
	return testcluster.Started(t, r, err)
}

func newClient(t *testing.T, name string, r *local.Processes, p int, edit func(*impls.Config)) impls.Client {
	return testcluster.Client(t, name, r.Nodes(), p, now, edit)
}

// holders returns how many nodes hold value under key.
func holders(t *testing.T, r *local.Processes, key, value string) int {
	t.Helper()
	n := 0
	for _, nd := range r.Nodes() {
		c := goredis.NewClient(&goredis.Options{Addr: nd.Addr, MaxRetries: -1, DisableIdentity: true})
		v, err := c.Get(context.Background(), key).Result()
		c.Close()
		if err == nil && v == value {
			n++
		}
	}
	return n
}

func TestMutualExclusion(t *testing.T) {
	for _, tt := range []struct{ impl string }{{"redlock"}, {"redlock-3"}} {
		t.Run(tt.impl, func(t *testing.T) {
			impl, _ := impls.Lookup(tt.impl)
			r := startNodes(t, impl.Nodes)
			a := newClient(t, tt.impl, r, 1, nil)
			b := newClient(t, tt.impl, r, 2, nil)
			ctx := context.Background()
			const ttl = 10 * time.Second

			before := now()
			la, err := a.Acquire(ctx, "L", ttl)
			after := now()
			if err != nil {
				t.Fatal(err)
			}
			if la.HasToken || la.Lock != "L" || !strings.HasPrefix(la.Value, "p1-") {
				t.Errorf("lease %+v", la)
			}
			if got := len(strings.Split(la.Node, ",")); got < impl.Nodes/2+1 {
				t.Errorf("lease granted by %q, fewer than a majority", la.Node)
			}
			// Until() = start + ttl - ttl·drift, start read inside Lock.
			lo, hi := before+ttl-ttl/100-time.Millisecond, after+ttl
			if la.ValidUntil < lo || la.ValidUntil > hi {
				t.Errorf("ValidUntil %v not within [%v, %v]", la.ValidUntil, lo, hi)
			}
			if n := holders(t, r, "L", la.Value); n != impl.Nodes {
				t.Errorf("%d nodes hold the value, want %d", n, impl.Nodes)
			}
			if l, err := b.Acquire(ctx, "L", ttl); !errors.Is(err, impls.ErrNotAcquired) {
				t.Fatalf("second acquire = %+v, %v; want ErrNotAcquired", l, err)
			}
			if n := holders(t, r, "L", la.Value); n != impl.Nodes {
				t.Errorf("after a refused acquire %d nodes hold the value, want %d", n, impl.Nodes)
			}
			rel, err := a.Release(ctx, la)
			if err != nil || rel.Removed != la.Value {
				t.Fatalf("Release = %+v, %v", rel, err)
			}
			if n := holders(t, r, "L", la.Value); n != 0 {
				t.Errorf("%d nodes still hold the released value", n)
			}
			lb, err := b.Acquire(ctx, "L", ttl)
			if err != nil {
				t.Fatal(err)
			}
			if lb.Value == la.Value || !strings.HasPrefix(lb.Value, "p2-") {
				t.Errorf("values %q then %q", la.Value, lb.Value)
			}
		})
	}
}

func TestReleaseAfterExpiry(t *testing.T) {
	r := startNodes(t, 3)
	a := newClient(t, "redlock-3", r, 1, slow)
	b := newClient(t, "redlock-3", r, 2, slow)
	ctx := context.Background()
	la, err := a.Acquire(ctx, "L", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the nodes have expired the key (a real signal, not a guess).
	for holders(t, r, "L", la.Value) != 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Acquire(ctx, "L", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Release(ctx, la); !errors.Is(err, impls.ErrNotHeld) {
		t.Errorf("release of an expired lease: %v, want ErrNotHeld", err)
	}
}

// The pause points are reached in order inside a real acquisition.
func TestPausePointsInsideLock(t *testing.T) {
	r := startNodes(t, 5)
	var mu sync.Mutex
	var got []string
	a := newClient(t, "redlock", r, 1, func(c *impls.Config) {
		slow(c)
		c.Hook = func(p string) { mu.Lock(); got = append(got, p); mu.Unlock() }
	})
	if _, err := a.Acquire(context.Background(), "L", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range Points(5) {
		if !slices.Contains(got, p) {
			t.Errorf("point %s not reached; got %v", p, got)
		}
	}
	if i := slices.Index(got, PointAfterMajority); i < slices.Index(got, "after-node-3") {
		t.Errorf("after-majority before the third reply: %v", got)
	}
}

// A stop at after-majority longer than the ttl makes redsync refuse the
// lock and release it on every node: it never hands back an Until() in the
// past.
func TestPauseAfterMajorityRejects(t *testing.T) {
	r := startNodes(t, 5)
	const ttl = 200 * time.Millisecond
	a := newClient(t, "redlock", r, 1, func(c *impls.Config) {
		slow(c)
		c.Hook = func(p string) {
			if p == PointAfterMajority {
				time.Sleep(ttl + 100*time.Millisecond)
			}
		}
	})
	_, err := a.Acquire(context.Background(), "L", ttl)
	if !errors.Is(err, ErrValidityExpired) || !errors.Is(err, impls.ErrNotAcquired) {
		t.Fatalf("acquire paused past its ttl: %v, want ErrValidityExpired", err)
	}
	// Redsync released what it had set; the lock is free at once.
	b := newClient(t, "redlock", r, 2, nil)
	if _, err := b.Acquire(context.Background(), "L", 10*time.Second); err != nil {
		t.Errorf("lock not free after the refused acquire: %v", err)
	}
}

// With a minority of nodes down the lock is still granted; with a majority
// down the outcome is an error that is not ErrNotAcquired (unknown).
func TestNodesDown(t *testing.T) {
	r := startNodes(t, 5)
	ctx := context.Background()
	nodes := r.Nodes()
	a := newClient(t, "redlock", r, 1, nil)
	for _, n := range nodes[:2] {
		if err := r.Kill(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	l, err := a.Acquire(ctx, "L", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire with 3 of 5 nodes up: %v", err)
	}
	if l.Node != "n3,n4,n5" {
		t.Errorf("granted by %q, want n3,n4,n5", l.Node)
	}
	if err := r.Kill(ctx, nodes[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, "M", 10*time.Second); err == nil || errors.Is(err, impls.ErrNotAcquired) {
		t.Errorf("acquire with 2 of 5 nodes up: %v, want an unknown-outcome error", err)
	}
	if _, err := a.Release(ctx, l); err == nil || errors.Is(err, impls.ErrNotHeld) {
		t.Errorf("release with 2 of 5 nodes up: %v, want an unknown-outcome error", err)
	}
}

// The keep-alive holds a lease for many ttls; the holder's belief is "until
// I release" (ValidUntil 0); release stops it.
func TestAutoExtend(t *testing.T) {
	r := startNodes(t, 5)
	a := newClient(t, "redlock-extend", r, 1, slow)
	b := newClient(t, "redlock", r, 2, slow)
	ctx := context.Background()
	// Long enough that a late keep-alive tick on a loaded machine (every
	// ttl/3) still extends the lease in time.
	const ttl = 2 * time.Second
	la, err := a.Acquire(ctx, "L", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if la.ValidUntil != 0 {
		t.Errorf("ValidUntil %v with the keep-alive on, want 0", la.ValidUntil)
	}
	// Outlive the ttl several times over: the lock must still be taken.
	deadline := time.Now().Add(3 * ttl)
	for time.Now().Before(deadline) {
		if _, err := b.Acquire(ctx, "L", ttl); !errors.Is(err, impls.ErrNotAcquired) {
			t.Fatalf("acquire while kept alive: %v, want ErrNotAcquired", err)
		}
		time.Sleep(ttl / 2)
	}
	if _, err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "L", ttl); err != nil {
		t.Errorf("acquire after release: %v", err)
	}
}

// TestSetNXOnExtendIsTheLibrarysOption: the param's option leaves a Mutex
// as redsync's own WithSetNXOnExtend does (of the redsync go.mod
// requires): every boolean field alike, and one of them differs from a
// Mutex without the option.
func TestSetNXOnExtendIsTheLibrarysOption(t *testing.T) {
	opt, err := setNXOnExtend()
	if err != nil {
		t.Fatal(err)
	}
	rs := redsync.New()
	ours, lib, none := rs.NewMutex("L", opt), rs.NewMutex("L", redsync.WithSetNXOnExtend()), rs.NewMutex("L")
	vo, vl, vn := reflect.ValueOf(ours).Elem(), reflect.ValueOf(lib).Elem(), reflect.ValueOf(none).Elem()
	differs := 0
	for i := range vo.NumField() {
		if vo.Field(i).Kind() != reflect.Bool {
			continue
		}
		name := vo.Type().Field(i).Name
		if vo.Field(i).Bool() != vl.Field(i).Bool() {
			t.Errorf("field %s: %v with the param's option, %v with WithSetNXOnExtend", name, vo.Field(i).Bool(), vl.Field(i).Bool())
		}
		if vl.Field(i).Bool() != vn.Field(i).Bool() {
			differs++
		}
	}
	if differs != 1 {
		t.Errorf("WithSetNXOnExtend changed %d boolean fields of the Mutex, want 1", differs)
	}
}

// TestExtendOrLock: a holder's keep-alive against nodes that lose its key
// (as a node restarted without persistence does). Without
// setnx-on-extend, it extends on the nodes that still hold the key only,
// and once a majority lost it, its extend fails and it is told the lease
// is lost; with it, the keep-alive sets the key again on a node that lost
// it, so losing the key on one node after another never loses the lease.
func TestExtendOrLock(t *testing.T) {
	for _, setNX := range []bool{false, true} {
		t.Run(fmt.Sprintf("setnx-on-extend=%v", setNX), func(t *testing.T) {
			r := startNodes(t, 3)
			lost := make(chan string, 4)
			a := newClient(t, "redlock-3", r, 1, func(c *impls.Config) {
				c.Params = map[string]string{"timeout-factor": "0.5", "extend": "on", "extend-every": "100ms"}
				if setNX {
					c.Params["setnx-on-extend"] = "on"
				}
				c.Lost = func(_, _, reason string) { lost <- reason }
			})
			ctx := context.Background()
			la, err := a.Acquire(ctx, "L", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			nodes := r.Nodes()
			// The node the key is taken from, and whether a node holds it.
			del := func(i int) {
				c := goredis.NewClient(&goredis.Options{Addr: nodes[i].Addr, MaxRetries: -1, DisableIdentity: true})
				defer c.Close()
				if err := c.Del(ctx, "L").Err(); err != nil {
					t.Fatal(err)
				}
			}
			holds := func(i int) bool {
				c := goredis.NewClient(&goredis.Options{Addr: nodes[i].Addr, MaxRetries: -1, DisableIdentity: true})
				defer c.Close()
				v, _ := c.Get(ctx, "L").Result()
				return v == la.Value
			}
			// extended waits until the keep-alive has extended the lease
			// on node i since now: its key's time to live went up again,
			// above the lowest it read since now. (Above the first reading
			// alone never came when that reading was taken within the
			// millisecond of an extend: the full TTL, which no later
			// extend exceeds. The suite hung on it once.)
			extended := func(i int) {
				c := goredis.NewClient(&goredis.Options{Addr: nodes[i].Addr, MaxRetries: -1, DisableIdentity: true})
				defer c.Close()
				low := c.PTTL(ctx, "L").Val()
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
					v := c.PTTL(ctx, "L").Val()
					if v > low {
						return
					}
					low = v
					if time.Now().After(deadline) {
						t.Fatalf("node %d: the key's time to live did not go up within a minute (last %v)", i, v)
					}
				}
			}
			del(0)
			extended(1)
			extended(1) // an extend that started after the delete
			if holds(0) != setNX {
				t.Fatalf("after the keep-alive ran, n1 holds the key: %v, want %v", holds(0), setNX)
			}
			if !setNX {
				del(1)
				select {
				case reason := <-lost:
					if !strings.Contains(reason, "ExtendContext failed") {
						t.Errorf("lost notice %q", reason)
					}
				case <-time.After(time.Minute):
					t.Fatal("no lost notice after a majority of nodes lost the key")
				}
				return
			}
			for !holds(0) {
				time.Sleep(10 * time.Millisecond)
			}
			del(1)
			for !holds(1) {
				time.Sleep(10 * time.Millisecond)
			}
			del(2)
			for !holds(2) {
				time.Sleep(10 * time.Millisecond)
			}
			select {
			case reason := <-lost:
				t.Errorf("the lease was lost with every node holding it again: %s", reason)
			default:
			}
			if _, err := a.Release(ctx, la); err != nil {
				t.Errorf("release: %v", err)
			}
		})
	}
}
