package workloads

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
)

// scriptClient is an impls.Client that answers each acquire and each
// release from its script, in order, and keeps the leases it was asked to
// release. When its acquires run out it stops the worker (stop) and
// refuses.
type scriptClient struct {
	acquires []error // nil: granted the next of leases
	leases   []impls.Lease
	releases []error
	released []impls.Lease
	stop     func()
}

func (c *scriptClient) Acquire(_ context.Context, lock string, _ time.Duration) (impls.Lease, error) {
	if len(c.acquires) == 0 {
		c.stop()
		return impls.Lease{}, impls.ErrNotAcquired
	}
	err := c.acquires[0]
	c.acquires = c.acquires[1:]
	if err != nil {
		return impls.Lease{}, err
	}
	l := c.leases[0]
	c.leases = c.leases[1:]
	return l, nil
}

func (c *scriptClient) Release(_ context.Context, l impls.Lease) (impls.Released, error) {
	c.released = append(c.released, l)
	if len(c.releases) == 0 {
		return impls.Released{}, errors.New("the script has no more releases")
	}
	err := c.releases[0]
	c.releases = c.releases[1:]
	if err != nil {
		return impls.Released{}, err
	}
	return impls.Released{Removed: l.Value}, nil
}

func (c *scriptClient) Close() error { return nil }

// scriptedWorker returns a worker of cfg's settings over client, its ops
// written to out, with a resource store of mode none to work on.
func scriptedWorker(t *testing.T, cfg WorkerConfig, client *scriptClient, out *bytes.Buffer) *worker {
	t.Helper()
	s, err := StartStore(ModeNone, history.StartClock(), filepath.Join(t.TempDir(), "resource.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	cfg.Locks, cfg.Timeout, cfg.StoreAddr, cfg.Mode = []string{"lock-0"}, Duration(5*time.Second), s.Addr(), ModeNone
	cfg.Backoff = Backoff{Policy: BackoffUniform}
	w := &worker{cfg: cfg, client: client, clock: history.StartClock(), out: json.NewEncoder(out), raw: out,
		rng: rand.New(rand.NewPCG(1, 2)), cont: make(chan struct{}, 1), toldC: make(chan struct{}, 1)}
	client.stop = func() { w.stopping.Store(true) }
	if err := w.dialStore(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.closeStore)
	return w
}

// recorded returns the ops a worker wrote to out, one per event line.
func recorded(t *testing.T, out *bytes.Buffer) history.History {
	t.Helper()
	var h history.History
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		if e.Op != nil {
			h = append(h, *e.Op)
		}
	}
	return h
}

// steps renders the lock ops of h, one word each: "acq+14" an acquire ok
// with token 14, "rel10~" a release of token 10 of unknown outcome, "rel10+"
// one ok, "rel10-" one that failed, "read" a read invoked.
func steps(h history.History) string {
	var out []string
	pair := h.Pair()
	mark := map[history.Type]string{history.OK: "+", history.Info: "~", history.Fail: "-"}
	for i, o := range h {
		switch {
		case o.Type == history.Invoke && o.F == history.Read:
			out = append(out, "read")
		case o.Type == history.OK && o.F == history.Acquire:
			out = append(out, fmt.Sprintf("acq+%d", *o.Value.Token))
		case o.Type == history.Invoke && o.F == history.Release && pair[i] >= 0:
			out = append(out, fmt.Sprintf("rel%d%s", *o.Value.Token, mark[h[pair[i]].Type]))
		}
	}
	return strings.Join(out, " ")
}

// TestRetryRelease: with --retry-release, a release that came back of
// unknown outcome is tried again with the very lease it released, after
// the worker's next acquire and before its critical section (its read),
// each try a release op of its own; until a try completes ok or fail, and
// only once its interval has passed since the last try. Without it, the
// lease is never released again.
func TestRetryRelease(t *testing.T) {
	lease := func(tok uint64) impls.Lease {
		return impls.Lease{Lock: "lock-0", Token: tok, HasToken: true, Value: "/locktest/mutex/lock-0/694d"}
	}
	lost := context.DeadlineExceeded // a release whose reply was lost
	for _, tc := range []struct {
		name     string
		interval time.Duration
		leases   []uint64
		releases []error
		want     string
	}{
		{"off", 0, []uint64{10, 14}, []error{lost, nil},
			"acq+10 read rel10~ acq+14 read rel14+"},
		{"retried after the next acquire", time.Nanosecond, []uint64{10, 14}, []error{lost, nil, nil},
			"acq+10 read rel10~ acq+14 rel10+ read rel14+"},
		{"a retry that fails ends the retries", time.Nanosecond, []uint64{10, 14, 18}, []error{lost, impls.ErrNotHeld, nil, nil},
			"acq+10 read rel10~ acq+14 rel10- read rel14+ acq+18 read rel18+"},
		{"a retry of unknown outcome is tried again", time.Nanosecond, []uint64{10, 14, 18}, []error{lost, lost, nil, nil, nil},
			"acq+10 read rel10~ acq+14 rel10~ read rel14+ acq+18 rel10+ read rel18+"},
		{"not before its interval", time.Hour, []uint64{10, 14}, []error{lost, nil},
			"acq+10 read rel10~ acq+14 read rel14+"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &scriptClient{releases: tc.releases}
			for _, tok := range tc.leases {
				c.acquires = append(c.acquires, nil)
				c.leases = append(c.leases, lease(tok))
			}
			var out bytes.Buffer
			w := scriptedWorker(t, WorkerConfig{RetryRelease: Duration(tc.interval)}, c, &out)
			w.loop(context.Background())
			w.flush()
			h := recorded(t, &out)
			if got := steps(h); got != tc.want {
				t.Errorf("recorded %q, want %q", got, tc.want)
			}
			// Every try released the lease as it was granted: the
			// client got the same lease each time, and the history
			// names its token and value.
			var toks []uint64
			for _, l := range c.released {
				if l != lease(l.Token) {
					t.Errorf("released %+v, not a lease the client granted", l)
				}
				toks = append(toks, l.Token)
			}
			var want []uint64
			for _, f := range strings.Fields(tc.want) {
				var tok uint64
				if _, err := fmt.Sscanf(f, "rel%d", &tok); err == nil {
					want = append(want, tok)
				}
			}
			if !slices.Equal(toks, want) {
				t.Errorf("the client released tokens %v, want %v", toks, want)
			}
			for _, o := range h {
				if o.F == history.Release && o.Type == history.Invoke && o.Value.LockValue != lease(0).Value {
					t.Errorf("release op %s names lock value %q, want the lease's", o, o.Value.LockValue)
				}
			}
		})
	}
}

// TestRetryAcquire: with --retry-acquire N, an acquire that came back of
// unknown outcome is tried again at once, up to N times, each try an
// acquire op of its own, until one is ok or fails; without it, once.
func TestRetryAcquire(t *testing.T) {
	unknown := errors.New("read tcp: i/o timeout")
	for _, tc := range []struct {
		retries  int
		acquires []error
		want     []history.Type
	}{
		{0, []error{unknown, nil}, []history.Type{history.Info}},
		{1, []error{unknown, unknown, nil}, []history.Type{history.Info, history.Info}},
		{2, []error{unknown, unknown, nil}, []history.Type{history.Info, history.Info, history.OK}},
		{2, []error{unknown, impls.ErrNotAcquired, nil}, []history.Type{history.Info, history.Fail}},
		{3, []error{nil}, []history.Type{history.OK}},
	} {
		c := &scriptClient{acquires: tc.acquires, leases: []impls.Lease{{Lock: "lock-0", Token: 3, HasToken: true, Value: "v"}}}
		var out bytes.Buffer
		w := scriptedWorker(t, WorkerConfig{RetryAcquire: tc.retries}, c, &out)
		_, typ := w.acquireRetrying(context.Background(), "lock-0")
		w.flush()
		var got []history.Type
		for _, o := range recorded(t, &out) {
			if o.F == history.Acquire && o.Type != history.Invoke {
				got = append(got, o.Type)
			}
		}
		if !slices.Equal(got, tc.want) || typ != tc.want[len(tc.want)-1] {
			t.Errorf("--retry-acquire %d over %v: acquires %v returning %s, want %v", tc.retries, tc.acquires, got, typ, tc.want)
		}
	}
}
