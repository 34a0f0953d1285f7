package sql_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/testexe"
	"github.com/locktest/locktest/workloads"
)

// sqlImpls are the database locks: MariaDB's and PostgreSQL's.
var sqlImpls = []string{
	"mysql-unique-insert", "mysql-for-update", "mysql-get-lock", "mysql-optimistic",
	"pg-advisory", "pg-advisory-xact",
}

// Each database lock, without faults, at 5 clients contending for one lock:
// the run is valid, has enough critical sections, and every acquire that
// gave up did so certainly (fail), never with an unknown outcome (info).
func TestSQLNoFaultRunsAreValid(t *testing.T) {
	for _, impl := range sqlImpls {
		t.Run(impl, func(t *testing.T) {
			testkit.NeedImplBackend(t, impl)
			cfg := testkit.Config(t, impl)
			// Ends once enough critical sections were done: as fast as a
			// fixed short run when healthy, and a slow machine only waits
			// longer instead of failing the count.
			cfg.Clients, cfg.Duration, cfg.MaxCriticalSections = 5, 30*time.Second, 60
			// An op timeout far beyond any no-fault wait, so a slow reply on
			// a loaded machine is not mistaken for an unknown outcome (CI
			// run 29, load 13: a pg-advisory acquire waited past 5 s).
			cfg.Timeout = 20 * time.Second
			out, h := testkit.MustRun(t, cfg)
			r := out.Results
			if r.Valid != checker.Valid {
				t.Errorf("verdict %s, want valid; anomalies %v", r.Valid, testkit.Kinds(r))
			}
			cs := r.Stats["critical_sections"]
			if cs < 30 {
				t.Errorf("%v critical sections, want at least 30", cs)
			}
			t.Logf("%v critical sections in %v", cs, cfg.Duration)
			var info, tokens int
			for _, o := range h {
				if o.F == history.Acquire && o.Type == history.Info {
					info++
					t.Logf("acquire info: %s", o.Error)
				}
				if o.F == history.Acquire && o.Type == history.OK && o.Value.Token != nil {
					tokens++
				}
			}
			if info > 0 {
				t.Errorf("%d acquires with an unknown outcome in a run without faults", info)
			}
			if i, _ := impls.Lookup(impl); i.Fenced && tokens == 0 {
				t.Errorf("a fenced impl granted no token")
			}
		})
	}
}

// killedHolder is what TestSQLHolderKilled observed.
type killedHolder struct {
	h history.History
	// killedAt is when the holder was killed, on the history clock.
	killedAt int64
	// recovered is the first acquire ok of the lock by another process
	// after the kill, -1 if there was none.
	recovered int
	// attempts counts the acquires other processes invoked after the kill.
	attempts int
}

// killHolder starts impl's server, the resource store and clients workers
// contending for one lock, stops worker p0 right after it acquired the
// lock, kills it with SIGKILL (recording a kill-client nemesis op, the
// evidence of its death), lets the others try — for the whole window when
// stuck, else until one of them got the lock or the window ended — and
// returns what happened.
func killHolder(t *testing.T, impl impls.Impl, params map[string]string, ttl, window time.Duration, stuck bool) killedHolder {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := local.New(impl.Backend, local.Options{Nodes: impl.Nodes, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop(context.Background())
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clock := history.StartClock()
	rec := history.NewRecorder(nil)
	store, err := workloads.StartStore(workloads.ModeNone, clock, filepath.Join(dir, "resource.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(context.Background())
	var addrs []string
	for _, n := range cl.Nodes() {
		addrs = append(addrs, n.Addr)
	}
	pool, err := workloads.StartPool(ctx, workloads.PoolConfig{
		Command: []string{os.Args[0]}, Env: []string{testexe.WorkerEnv + "=1"}, LogDir: dir, Recorder: rec, Clock: clock,
		Base: workloads.WorkerConfig{
			Impl: impl.Name, Addrs: addrs, Nodes: run.ClientNodes(cl.Nodes()), Params: params, Locks: []string{"lock-0"},
			TTL: workloads.Duration(ttl), Backoff: workloads.Backoff{Policy: workloads.BackoffUniform, Retry: workloads.Duration(5 * time.Millisecond)}, Timeout: workloads.Duration(time.Second),
			StoreAddr: store.Addr(), Mode: workloads.ModeNone, ClockOrigin: clock.Origin(), Seed: 7,
		},
	}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Stop(context.Background())
	if err := pool.Arm(0, workloads.PointAfterAcquire); err != nil {
		t.Fatal(err)
	}
	if pt, err := pool.WaitPoint(ctx, 0); err != nil || pt != workloads.PointAfterAcquire {
		t.Fatalf("p0 did not stop after an acquire: %q %v", pt, err)
	}
	// As the kill-client fault records it: the targets on the ok.
	if _, err := rec.Record(history.Op{Type: history.Invoke, Process: history.NemesisProcess, F: "kill-client",
		Time: int64(clock.Now())}); err != nil {
		t.Fatal(err)
	}
	killedAt := int64(clock.Now())
	if err := pool.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Record(history.Op{Type: history.OK, Process: history.NemesisProcess, F: "kill-client",
		Time: int64(clock.Now()), Value: history.Value{Targets: []string{"p0"}}}); err != nil {
		t.Fatal(err)
	}
	// The observation window: the others keep trying.
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !stuck && slices.ContainsFunc(rec.History(), func(o history.Op) bool {
			return o.Process > 0 && o.F == history.Acquire && o.Type == history.OK && o.Time >= killedAt
		}) {
			break
		}
	}
	if err := pool.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	k := killedHolder{h: rec.History(), killedAt: killedAt, recovered: -1}
	for i, o := range k.h {
		if o.Process <= 0 || o.F != history.Acquire || o.Time < killedAt {
			continue
		}
		switch o.Type {
		case history.Invoke:
			k.attempts++
		case history.OK:
			if k.recovered < 0 {
				k.recovered = i
			}
		}
	}
	return k
}

// Killing the worker that holds the lock: session locks are free again as
// soon as the server sees the connection close, leases once they expire,
// and mysql-unique-insert without its cleanup loop never, which the
// liveness checker reports as a stuck lock naming the ops that show it.
func TestSQLHolderKilled(t *testing.T) {
	const ttl = time.Second
	tests := []struct {
		impl   string
		params map[string]string
		window time.Duration
		stuck  bool
		// dupToken: the dead holder's token is granted again (its
		// transaction, and with it the version increment, was rolled back).
		dupToken bool
	}{
		// A lock that comes back is waited for until it does, at most
		// window: a bound far beyond the TTL, not a measure of speed.
		{impl: "mysql-get-lock", window: 10 * time.Second},
		{impl: "mysql-for-update", window: 10 * time.Second, dupToken: true},
		{impl: "pg-advisory", window: 10 * time.Second},
		{impl: "pg-advisory-xact", window: 10 * time.Second},
		{impl: "mysql-optimistic", window: 10 * time.Second},
		{impl: "mysql-unique-insert", window: 10 * time.Second},
		// Longer than the lease plus the liveness checker's default
		// window (5s) of failures that make a lock stuck.
		{impl: "mysql-unique-insert", params: map[string]string{"cleanup": "off"}, window: 8 * time.Second, stuck: true},
	}
	for _, tt := range tests {
		name := tt.impl
		if tt.params != nil {
			name += ",cleanup=off"
		}
		t.Run(name, func(t *testing.T) {
			impl := testkit.NeedImplBackend(t, tt.impl)
			k := killHolder(t, impl, tt.params, ttl, tt.window, tt.stuck)
			var stuck []checker.Anomaly
			found, dup := false, false
			// The checkers a run of this impl uses: with session locks
			// (no valid_until) the porcupine mutex model runs too.
			for _, c := range checker.For(string(workloads.ModeNone), checker.Leases(history.NewTable(k.h))) {
				r := c.Check(context.Background(), history.NewTable(k.h))
				if len(r.Anomalies) > 0 {
					t.Logf("%s: %d anomalies, the first: %s: %s", c.Name(), len(r.Anomalies), r.Anomalies[0].Kind, r.Anomalies[0].Explanation)
				}
				// The dead holder's lock was taken over only after the
				// server freed it: no overlap, and linearizable.
				if (c.Name() == "mutual-exclusion" || strings.HasPrefix(c.Name(), "linearizable")) && r.Valid != checker.Valid {
					t.Errorf("%s: %s after a holder was killed (%d anomalies)", c.Name(), r.Valid, len(r.Anomalies))
				}
				for _, a := range r.Anomalies {
					dup = dup || a.Kind == "duplicate-token"
				}
				if c.Name() != "liveness" {
					continue
				}
				found = true
				for _, a := range r.Anomalies {
					if a.Kind == "stuck-lock" {
						stuck = append(stuck, a)
					}
				}
			}
			if dup != tt.dupToken {
				t.Errorf("duplicate-token reported: %v, want %v", dup, tt.dupToken)
			}
			if !tt.stuck {
				if k.recovered < 0 {
					t.Fatalf("no other process got the lock within %v of the kill (%d attempts)", tt.window, k.attempts)
				}
				t.Logf("lock unavailable for %v after the holder was killed", time.Duration(k.h[k.recovered].Time-k.killedAt).Round(time.Millisecond))
				if len(stuck) > 0 {
					t.Errorf("liveness reports a stuck lock that recovered: %+v", stuck)
				}
				return
			}
			if k.recovered >= 0 {
				t.Fatalf("p%d got the lock at op %d, after its holder was killed with the cleanup off", k.h[k.recovered].Process, k.recovered)
			}
			if k.attempts < 10 {
				t.Fatalf("only %d acquire attempts after the kill, want many", k.attempts)
			}
			t.Logf("%d acquire attempts in %v after the kill, none succeeded", k.attempts, tt.window)
			if !found {
				t.Fatal("no liveness checker among the run's checkers")
			}
			if len(stuck) != 1 {
				t.Fatalf("liveness found %d stuck locks, want 1: %+v", len(stuck), stuck)
			}
			a := stuck[0]
			if len(a.Ops) < 2 || a.Explanation == "" {
				t.Errorf("stuck-lock does not name its ops: %+v", a)
			}
			held := false
			for _, i := range a.Ops {
				if i < 0 || i >= len(k.h) {
					t.Fatalf("stuck-lock names op %d, not in the history", i)
				}
				if o := k.h[i]; o.Process == 0 && o.F == history.Acquire && o.Type == history.OK {
					held = true
				}
			}
			if !held {
				t.Errorf("stuck-lock does not name the dead holder's acquire: %+v", a)
			}
		})
	}
}
