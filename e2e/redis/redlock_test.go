package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/workloads"
)

// pausedStaleWrites splits the stale writes and lost updates that res
// found in h into those of a writer the nemesis paused during the hold it
// wrote under (between its acquire ok and the write), and the others.
func pausedStaleWrites(h history.History, res checker.Result) (paused, other []checker.Anomaly) {
	for _, a := range res.Anomalies {
		if a.Kind != "stale-write" && a.Kind != "lost-update" {
			continue
		}
		var w *history.Op
		for _, i := range a.Ops {
			if i >= 0 && i < len(h) && h[i].F == history.Write && h[i].Process >= 0 {
				w = &h[i]
				break
			}
		}
		if w == nil {
			other = append(other, a)
			continue
		}
		// The writer's latest acquire ok before its write.
		var since int64 = -1
		for _, op := range h {
			if op.Process == w.Process && op.F == history.Acquire && op.Type == history.OK && op.Time <= w.Time {
				since = max(since, op.Time)
			}
		}
		hit := false
		for _, op := range h {
			if op.Process == history.NemesisProcess && op.F == "pause-client" && op.Type == history.OK && op.Time >= since && op.Time <= w.Time {
				for _, tg := range op.Value.Targets {
					hit = hit || tg == fmt.Sprintf("p%d", w.Process) || strings.HasPrefix(tg, fmt.Sprintf("p%d-", w.Process))
				}
			}
		}
		if hit {
			paused = append(paused, a)
		} else {
			other = append(other, a)
		}
	}
	return paused, other
}

// The multi-node Redis locks hold up without faults.
func TestMultiNodeRedisNoFaultRunsAreValid(t *testing.T) {
	gate.Need(t, "redis-server", "redis-sentinel", "redis-cli")
	for _, impl := range []string{"redlock", "redis-replicated", "redis-cluster"} {
		t.Run(impl, func(t *testing.T) {
			cfg := testkit.Config(t, impl)
			// Ends once enough critical sections were done: as fast as a
			// fixed short run when healthy, and a slow machine only waits
			// longer instead of failing the count.
			cfg.Duration, cfg.MaxCriticalSections = 30*time.Second, 40
			cfg.Locks = 2
			out, h := testkit.MustRun(t, cfg)
			r := out.Results
			if r.Valid != checker.Valid {
				t.Errorf("verdict %s, want valid; anomalies %v", r.Valid, testkit.Kinds(r))
			}
			if cs := r.Stats["critical_sections"]; cs < 20 {
				t.Errorf("%v critical sections, want at least 20", cs)
			}
			// Every lease names the node(s) that granted it.
			for _, o := range h {
				if o.F == history.Acquire && o.Type == history.OK && o.Value.Node == "" {
					t.Fatalf("acquire ok %d names no node", o.Index)
				}
			}
		})
	}
}

// A redlock worker stopped (and SIGSTOPped by the nemesis) at
// after-majority for twice the ttl: redsync refuses the lock. It never hands
// back an Until() in the past: its validity check runs after the last reply
// on Go's monotonic clock, which the stop does not stop.
func TestRedlockPauseAfterMajorityIsRefused(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := testkit.PauseConfig(t, "redlock", workloads.ModeNone)
	nemesis.PausePoint.Set(&cfg.FaultSettings, "after-majority")
	// Leases of 2 s, not PauseConfig's 300 ms: under stress-ng the driver,
	// which holds the resource store, was descheduled for a second, and a
	// holder's write sent within its 300 ms lease was stored after it, a
	// stale write no pause caused. The pause still outlasts the lease.
	cfg.TTL, cfg.Duration = 2*time.Second, 10*time.Second
	nemesis.Pause.Set(&cfg.FaultSettings, 4*time.Second)
	out, h := testkit.MustRun(t, cfg)
	pauses := 0
	pair := h.Pair()
	for i, o := range h {
		if !o.IsNemesis() || o.F != "pause-client" || o.Type != history.OK {
			continue
		}
		// The run's end heals a pause early; only a pause longer than the
		// ttl must make the lock expire.
		resumed := int64(-1)
		for _, r := range h[i:] {
			if r.IsNemesis() && r.F == "resume-client" && r.Type == history.Invoke {
				resumed = r.Time
				break
			}
		}
		if resumed < 0 || time.Duration(resumed-o.Time) <= cfg.TTL {
			continue
		}
		pauses++
		var p int
		if _, err := fmt.Sscanf(o.Value.Targets[0], "p%d", &p); err != nil {
			t.Fatalf("target %q", o.Value.Targets)
		}
		// The paused process's open acquire completes as a refusal.
		inv := -1
		for j := i; j >= 0; j-- {
			if h[j].Process == p && h[j].F == history.Acquire && h[j].Type == history.Invoke {
				inv = j
				break
			}
		}
		if inv < 0 || pair[inv] < i {
			t.Fatalf("pause %d: p%d has no acquire open at the pause", i, p)
		}
		done := h[pair[inv]]
		if done.Type != history.Fail || !strings.Contains(done.Error, "validity ran out") {
			t.Errorf("acquire of p%d paused at after-majority completed %s %q, want fail: validity ran out", p, done.Type, done.Error)
		}
	}
	// Each pause is checked on its own; one longer than the TTL shows it.
	if pauses < 1 {
		t.Fatalf("%d pauses at after-majority applied, want at least 1", pauses)
	}
	if out.Results.Valid != checker.Valid {
		t.Errorf("verdict %s, anomalies %v: a refused lock cannot break anything", out.Results.Valid, testkit.Kinds(out.Results))
	}
}

// A redlock holder paused after Lock returned, after its read and right
// before its write: the unprotected resource takes the stale write; the
// check-and-set store, which the holder claimed with its unique value
// before the pause, rejects it. Paused right after Lock returned, before
// the claim, the woken holder's claim comes late and check-and-set lets
// its stale write through: Redlock's value says who holds the lock, not
// in which order holders came.
func TestRedlockPauseBeforeWrite(t *testing.T) {
	gate.Need(t, "redis-server")
	tests := []struct {
		mode  workloads.Mode
		point string
		valid bool
	}{
		{workloads.ModeNone, workloads.PointBeforeWrite, false},
		{workloads.ModeCheckAndSet, workloads.PointBeforeWrite, true},
		{workloads.ModeCheckAndSet, workloads.PointAfterAcquire, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode)+"/"+tt.point, func(t *testing.T) {
			cfg := testkit.PauseConfig(t, "redlock", tt.mode)
			nemesis.PausePoint.Set(&cfg.FaultSettings, tt.point)
			// 8 s, so that the two pauses asserted below (1.2 s each, and
			// the wait for a client to reach the point) fit in the fault
			// phase on a loaded machine too: with 6 s one fitted in CI run
			// 20.
			cfg.Duration = 8 * time.Second
			// Paused four leases long, so that on a loaded machine another
			// client still gets the lock (a Redlock acquire asks 5 nodes)
			// before the paused one wakes.
			nemesis.Pause.Set(&cfg.FaultSettings, 4*cfg.TTL)
			var out *run.Outcome
			var h history.History
			var res checker.Result
			var k map[string]int
			// Whether a woken holder's write lands before the next holder
			// re-claims the resource is up to the scheduler: a run meant to
			// reproduce the violation gets up to five seeds to show it (three
			// were not always enough on a loaded machine).
			// So does the fenced case, for a pause whose holder's stale
			// write the claim rejects; and under stress-ng a run once
			// applied one pause only: a seed whose run applied none is
			// tried again too.
			pauses := 0
			for attempt := 0; attempt < 5; attempt++ {
				cfg.Seed = int64(7 + attempt)
				out, h = testkit.MustRun(t, cfg)
				n := testkit.NemesisOps(h, "pause-client", history.OK)
				pauses += n
				if n == 0 {
					t.Logf("seed %d: no client pause applied; trying another seed", cfg.Seed)
					continue
				}
				res, k = testkit.Result(t, out.Results, "resource"), testkit.Kinds(out.Results)
				if tt.valid {
					if paused, _ := pausedStaleWrites(h, res); len(paused) > 0 || res.Stats["saved_by_fencing"] >= 1 {
						break
					}
					t.Logf("seed %d: no stale write rejected by the claim (%v); trying another seed", cfg.Seed, res.Stats)
					continue
				}
				if res.Valid == checker.Invalid {
					break
				}
				t.Logf("seed %d: no violation shown (%v); trying another seed", cfg.Seed, k)
			}
			if pauses == 0 {
				t.Fatal("no seed's run applied a client pause")
			}
			if tt.valid {
				// A stale write of a holder that the scheduler, not the
				// pause, kept off the CPU past its 300ms lease before it
				// claimed (under stress-ng, a 2.4s stall of every process)
				// is the after-acquire case below, which check-and-set
				// does not cover: it is logged, not failed.
				paused, other := pausedStaleWrites(h, res)
				for _, a := range other {
					t.Logf("a stale write of a holder paused by no fault: %s", a.Explanation)
				}
				if len(paused) > 0 || res.Valid != checker.Valid && len(other) == 0 {
					t.Errorf("resource verdict %s, anomalies %v: check-and-set let the stale write of a paused holder through: %v", res.Valid, k, paused)
				}
				if res.Stats["saved_by_fencing"] < 1 {
					t.Errorf("no stale write rejected by the claim; stats %v", res.Stats)
				}
				return
			}
			if res.Valid != checker.Invalid || k["lost-update"]+k["stale-write"] == 0 {
				t.Errorf("resource verdict %s, anomalies %v: want a stale write or lost update", res.Valid, k)
			}
			// The paused holder's own stale write is among them, as
			// pausedStaleWrites, which the valid case leans on, tells.
			if paused, _ := pausedStaleWrites(h, res); tt.mode == workloads.ModeCheckAndSet && len(paused) == 0 {
				t.Errorf("no stale write of a paused holder among %v", res.Anomalies)
			}
		})
	}
}

// The keep-alive of redlock-extend stops with the rest of a paused worker:
// its lease expires, another process takes the lock, and the woken holder,
// which believes it holds the lock until it releases it, overlaps it.
func TestRedlockExtendPausedLosesLock(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := testkit.PauseConfig(t, "redlock-extend", workloads.ModeNone)
	cfg.Duration = 6 * time.Second
	out, h := testkit.Reproduce(t, cfg, func(o *run.Outcome, _ history.History) bool {
		return testkit.Kinds(o.Results)["overlapping-holds"] > 0
	})
	// One pause is what the overlap needs; a loaded machine (CI run 30)
	// may fit only one into the run's fault phase.
	if n := testkit.NemesisOps(h, "pause-client", history.OK); n < 1 {
		t.Fatalf("%d client pauses applied, want at least 1", n)
	}
	for _, o := range h {
		if o.F == history.Acquire && o.Type == history.OK && o.Value.ValidUntil != 0 {
			t.Fatalf("acquire ok %d has valid_until %d; a kept-alive lease has none", o.Index, o.Value.ValidUntil)
		}
	}
	if k := testkit.Kinds(out.Results); k["overlapping-holds"] == 0 {
		t.Errorf("anomalies %v: want overlapping holds", k)
	}
}

// Two holders from asynchronous replication, forced: the replicas are
// stopped and their link's buffers filled, so the master's reply to an
// acquire goes out while the lock's SET is still in the master's output
// buffer to the replicas; then the master is killed, the replicas resumed,
// Sentinel promotes one, and a second client acquires the same lock from
// it. The checkers see overlapping holds naming both acquires.
func TestReplicatedFailoverGivesTwoHolders(t *testing.T) {
	gate.Need(t, "redis-server", "redis-sentinel")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A failed test keeps the nodes' and the sentinels' folders, with their
	// logs: under stress-ng (at f5c4cb1) the sentinels named the killed
	// master for the whole minute of SentinelFailover, and why is in them.
	dir := t.TempDir()
	testkit.KeepFailedStore(t, dir)
	s, err := local.NewProcesses("redis-sentinel", local.Options{Dir: dir, Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clock := history.StartClock()
	rec := history.NewRecorder(nil)
	client := func(p int) impls.Client {
		impl, _ := impls.Lookup("redis-replicated")
		cfg := impls.Config{Nodes: run.ClientNodes(s.Nodes()), Process: p, Now: clock.Now, Wall: time.Now}
		c, err := impl.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	record := func(op history.Op) {
		if op.Time == 0 {
			op.Time = int64(clock.Now())
		}
		if _, err := rec.Record(op); err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(c impls.Client, p int) impls.Lease {
		record(history.Op{Type: history.Invoke, Process: p, F: history.Acquire, Value: history.Value{Lock: "L"}})
		l, err := c.Acquire(ctx, "L", time.Minute)
		if err != nil {
			t.Fatalf("p%d acquire: %v", p, err)
		}
		record(history.Op{Type: history.OK, Process: p, F: history.Acquire, Value: history.Value{
			Lock: "L", Token: history.Tok(l.Token), LockValue: l.Value, ValidUntil: int64(l.ValidUntil), Node: l.Node}})
		return l
	}
	a, b := client(0), client(1)
	// Warm p0 up: its connection to the master exists before the replicas
	// stop.
	if _, err := a.Acquire(ctx, "warm-up", time.Second); err != nil {
		t.Fatal(err)
	}

	var master clusters.Node
	var replicas []clusters.Node
	for _, n := range s.Targets() {
		if n.Role == local.RoleMaster {
			master = n
		} else {
			replicas = append(replicas, n)
		}
	}
	for _, r := range replicas {
		if err := s.Pause(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	m := goredis.NewClient(&goredis.Options{Addr: master.Addr, MaxRetries: -1, DisableIdentity: true, Protocol: 2})
	defer m.Close()
	// Fill the stopped replicas' sockets until the master cannot write to
	// them any more: from then on, everything the master writes to the
	// replicas stays in the master's memory.
	filler := strings.Repeat("x", 1<<20)
	for i := 0; ; i++ {
		if i == 256 {
			t.Fatal("replica links never backed up after 256 MB")
		}
		if err := m.Set(ctx, fmt.Sprintf("filler-%d", i), filler, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if backedUp(t, ctx, m, len(replicas)) {
			t.Logf("replica links backed up after %d MB", i+1)
			break
		}
	}
	la := acquire(a, 0)
	if la.Node != master.Name {
		t.Fatalf("p0 got the lock from %s, not the master %s", la.Node, master.Name)
	}
	record(history.Op{Type: history.Invoke, Process: history.NemesisProcess, F: "kill-node", Value: history.Value{Targets: []string{master.Name}}})
	if err := s.Kill(ctx, master); err != nil {
		t.Fatal(err)
	}
	record(history.Op{Type: history.OK, Process: history.NemesisProcess, F: "kill-node", Value: history.Value{Targets: []string{master.Name}}})
	for _, r := range replicas {
		if err := s.Resume(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	nm, err := testcluster.SentinelFailover(ctx, s.Nodes(), master)
	if err != nil {
		t.Fatal(err)
	}
	lb := acquire(b, 1)
	if lb.Node != nm.Name {
		t.Errorf("p1 got the lock from %s, not the new master %s", lb.Node, nm.Name)
	}
	t.Logf("p0 holds L (token %d) from %s until %v; p1 holds it (token %d) from %s", la.Token, la.Node, la.ValidUntil, lb.Token, lb.Node)

	h := rec.History()
	res := checker.Run(ctx, history.NewTable(h), checker.All()...)
	var found *checker.Anomaly
	verdict := checker.Valid
	for _, c := range res {
		verdict = checker.Merge(verdict, c.Valid)
		for i, an := range c.Anomalies {
			if an.Kind == "overlapping-holds" {
				found = &c.Anomalies[i]
			}
		}
	}
	if found == nil {
		t.Fatalf("no overlapping-holds reported; results %+v", res)
	}
	okA, okB := 1, len(h)-1 // the two acquire oks
	if !slices.Contains(found.Ops, okA) || !slices.Contains(found.Ops, okB) {
		t.Errorf("overlapping-holds names ops %v, want %d and %d: %s", found.Ops, okA, okB, found.Explanation)
	}
	if verdict != checker.Invalid {
		t.Errorf("verdict %s, want invalid", verdict)
	}
	t.Log(found.Explanation)
	// The token counter went back with the lost write: the new master hands
	// out the token it never knew was granted.
	if lb.Token > la.Token {
		t.Errorf("token %d after %d: the counter should have lost the first grant", lb.Token, la.Token)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("test ran out of time")
	}
}

// backedUp reports whether the master's links to n replicas are backed up:
// on every line of CLIENT LIST TYPE replica the master waits for the socket
// to take more (events=rw), so what it writes now stays in its own memory.
func backedUp(t *testing.T, ctx context.Context, m *goredis.Client, n int) bool {
	t.Helper()
	list, err := m.Do(ctx, "CLIENT", "LIST", "TYPE", "replica").Text()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != n {
		t.Fatalf("master lists %d replicas, want %d: %s", len(lines), n, list)
	}
	for _, l := range lines {
		if !slices.Contains(strings.Fields(l), "events=rw") {
			return false
		}
	}
	return true
}

// A redlock-extend holder paused past its lease is told when its
// keep-alive's next ExtendContext fails, right after it wakes, and writes
// after being told or not as --on-lost says.
func TestRedlockExtendPausedHolderIsTold(t *testing.T) {
	gate.Need(t, "redis-server")
	testkit.AssertPausedHolderIsTold(t, testkit.Config(t, "redlock-extend"), "ExtendContext failed")
}
