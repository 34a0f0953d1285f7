package matrix

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/locktest/locktest/impls/all"
	"github.com/locktest/locktest/runstore"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
)

func mustLookup(t *testing.T, name string) impls.Impl {
	t.Helper()
	i, err := impls.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// safetyResult is a measured safety run of seed s.
func safetyResult(c Class, seed int64, s Safety) Result {
	return Result{Job: Job{Impl: "redis-set-nx-px", Probe: ProbeSafety, Class: c, Seed: seed}, Dir: "/store/run", Safety: s}
}

func TestSafetyCell(t *testing.T) {
	held := Safety{Conclusive: true, Faults: 2, Effective: 1}
	violated := Safety{Conclusive: true, Violated: true, Faults: 3, Kinds: map[string]int{"stale-write": 2}}
	na := Safety{NA: true, Reason: "etcd nodes are Go programs (not applicable)"}
	noRoot := Safety{Reason: "fault isolate: fault unavailable: not root"}
	tests := []struct {
		name         string
		rs           []Result
		status       string
		value        string
		reasonPrefix string
	}{
		{"no run", nil, reports.StatusNotRun, "", "the class was not in this matrix"},
		{"violated in one of two seeds", []Result{safetyResult(ClassClientPause, 1, violated), safetyResult(ClassClientPause, 2, held)},
			reports.StatusViolated, "1/2 runs", "violation rate 1/2 runs (95% interval 9%–91%), 5 faults applied: stale-write ×2"},
		{"held in both seeds, with an upper bound and never 'safe'", []Result{safetyResult(ClassNone, 1, held), safetyResult(ClassNone, 2, held)},
			reports.StatusHeld, "0/2 runs", "no violation in 2 run(s) with 4 faults applied, 2 of them in force while a client held the lock; the violation rate is at most 66% at 95% confidence, not zero"},
		{"a fault that does not apply is n/a with its reason", []Result{safetyResult(ClassClock, 1, na), safetyResult(ClassClock, 2, na)},
			reports.StatusNA, "", "etcd nodes are Go programs (not applicable)"},
		{"a fault the machine cannot make is inconclusive with its reason", []Result{safetyResult(ClassPartition, 1, noRoot)},
			reports.StatusInconclusive, "", "fault isolate: fault unavailable: not root"},
		{"a run that did not start is inconclusive with its error", []Result{{Job: Job{Class: ClassNodePause}, Err: "start redis cluster: port in use"}},
			reports.StatusInconclusive, "", "start redis cluster: port in use"},
		{"a token repeated to one holder is held, and says so", []Result{safetyResult(ClassNodePause, 1, Safety{Conclusive: true, Faults: 2, Effective: -1, SameHolderTokens: 1})},
			reports.StatusHeld, "0/1 runs", "no violation in 1 run(s) with 2 faults applied; the violation rate is at most 79% at 95% confidence, not zero; not counted: 1 duplicate token(s) granted to one process only"},
		{"an inconclusive seed is counted apart from a held one", []Result{safetyResult(ClassPartition, 1, held), safetyResult(ClassPartition, 2, noRoot)},
			reports.StatusHeld, "0/1 runs", "no violation in 1 run(s) with 2 faults applied, 1 of them in force while a client held the lock; the violation rate is at most 79% at 95% confidence, not zero; 1 more run(s) inconclusive: fault isolate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := safetyCell(tt.rs)
			checkCell(t, c, tt.status, tt.value, tt.reasonPrefix)
			if c.Status != reports.StatusHeld && strings.Contains(c.Text(), "held") {
				t.Errorf("a %s cell reads %q", c.Status, c.Text())
			}
			for _, r := range tt.rs {
				if r.Dir != "" && len(c.Links) == 0 {
					t.Errorf("no link to the stored runs")
				}
			}
		})
	}
}

// checkCell fails t unless c has the status and value wanted and a reason
// that begins with reasonPrefix.
func checkCell(t *testing.T, c reports.MatrixCell, status, value, reasonPrefix string) {
	t.Helper()
	if c.Status != status || c.Value != value || !strings.HasPrefix(c.Reason, reasonPrefix) {
		t.Errorf("got %s %q %q, want %s %q %q…", c.Status, c.Value, c.Reason, status, value, reasonPrefix)
	}
}

func deadlockResult(ttl time.Duration, recs []Recovery, stuck int, problems ...string) Result {
	r := Result{Job: Job{Probe: ProbeDeadlock, Seed: 1, Config: run.Config{TTL: ttl}}, Dir: "/store/dl", Recoveries: recs, Stuck: stuck,
		Results: runstore.Results{Problems: problems}}
	if stuck > 0 {
		r.Results.Checkers = []checker.Result{{Checker: "liveness", Anomalies: []checker.Anomaly{{Kind: "stuck-lock", Explanation: "lock \"lock-0\" stayed stuck"}}}}
	}
	return r
}

func TestDeadlockCell(t *testing.T) {
	ttl := 500 * time.Millisecond
	rec := func(after, observed time.Duration) Recovery {
		return Recovery{Process: 2, Lock: "lock-0", After: after, Observed: observed}
	}
	tests := []struct {
		name          string
		rs            []Result
		status, value string
		reason        string
	}{
		{"recovers after the lease", []Result{deadlockResult(ttl, []Recovery{rec(300*time.Millisecond, 5*time.Second), rec(500*time.Millisecond, 3*time.Second), rec(400*time.Millisecond, 2*time.Second)}, 0)},
			reports.StatusRecovers, "max 500 ms", "after 3 kill(s) of a holder, another process acquired the lock after 400 ms (median), 500 ms (max)"},
		{"the liveness checker's stuck lock", []Result{deadlockResult(ttl, []Recovery{rec(-1, 6*time.Second)}, 1)},
			reports.StatusStuck, "1 of 1 kills", "lock \"lock-0\" stayed stuck; p2 died holding"},
		{"a stuck lock the kills did not show", []Result{deadlockResult(ttl, []Recovery{rec(time.Millisecond, 6*time.Second)}, 1)},
			reports.StatusStuck, "1 stuck lock(s)", "lock \"lock-0\" stayed stuck"},
		{"not acquired again for long after the death", []Result{deadlockResult(ttl, []Recovery{rec(time.Millisecond, 4*time.Second), rec(-1, 3*time.Second)}, 0)},
			reports.StatusStuck, "1 of 2 kills", "p2 died holding \"lock-0\" and no other process acquired it in the 3s until the run ended"},
		{"a death too close to the end is inconclusive", []Result{deadlockResult(ttl, []Recovery{rec(-1, time.Second)}, 0)},
			reports.StatusInconclusive, "", "the run ended less than 2s after each holder's death, too soon to tell"},
		{"no holder was killed", []Result{deadlockResult(ttl, nil, 0, "no fault was applied: run longer or lower --interval")},
			reports.StatusInconclusive, "", "no fault was applied: run longer or lower --interval"},
		{"a session lock is free again within a millisecond", []Result{deadlockResult(0, []Recovery{rec(300*time.Microsecond, 5*time.Second)}, 0)},
			reports.StatusRecovers, "max 0.30 ms", "after 1 kill(s) of a holder, another process acquired the lock after 0.30 ms (median), 0.30 ms (max)"},
		{"did not run", []Result{{Job: Job{Probe: ProbeDeadlock}, Err: "zookeeper jar not found"}},
			reports.StatusInconclusive, "", "zookeeper jar not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := deadlockCell(tt.rs)
			checkCell(t, c, tt.status, tt.value, tt.reason)
		})
	}
}

func TestNodeLossCell(t *testing.T) {
	kill := func(a Availability) []Result {
		return []Result{{Job: Job{Probe: ProbeSafety, Class: ClassKillRestart, Seed: 1}, Dir: "/s/k", Avail: a}}
	}
	tests := []struct {
		name          string
		impl          string
		planned       bool
		rs            []Result
		status, value string
		reason        string
	}{
		{"one node: n/a", "redis-set-nx-px", true, kill(Availability{}), reports.StatusNA, "", "a one-node backend"},
		{"tolerant", "etcd-mutex", true, kill(Availability{Windows: 2, DuringAttempts: 125, DuringOK: 120, DuringSeconds: 2, OutsideAttempts: 400, OutsideOK: 400, OutsideSeconds: 4}),
			reports.StatusYes, "yes: 60 vs 100 cs/s", "with one node down (2 window(s), 2.0 s in all) 60 critical sections/s and 96% of 125 acquires ok; without, 100/s and 100% of 400"},
		{"degraded below half", "etcd-mutex", true, kill(Availability{Windows: 2, DuringAttempts: 100, DuringOK: 90, DuringSeconds: 2, OutsideAttempts: 400, OutsideOK: 400, OutsideSeconds: 4}),
			reports.StatusNo, "no: 45 vs 100 cs/s", "with one node down"},
		{"unavailable", "redis-replicated", true, kill(Availability{Windows: 1, DuringAttempts: 50, DuringOK: 0, DuringSeconds: 1, OutsideAttempts: 400, OutsideOK: 400, OutsideSeconds: 4}),
			reports.StatusNo, "no: 0 vs 100 cs/s", "with one node down"},
		{"no node went down", "zk-recipe", true, kill(Availability{}), reports.StatusInconclusive, "", "no node was down during the workload"},
		{"class not planned", "zk-recipe", false, nil, reports.StatusNotRun, "", "needs the kill-restart class"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := nodeLossCell(mustLookup(t, tt.impl), tt.planned, tt.rs)
			checkCell(t, c, tt.status, tt.value, tt.reason)
		})
	}
}

func TestPerfCells(t *testing.T) {
	rs := []Result{
		{Job: Job{Seed: 1}, Dir: "/s/1", P50: 0.1, P99: 0.5, Acquired: 1000, Throughput: 400},
		{Job: Job{Seed: 2}, Dir: "/s/2", P50: 0.3, P99: 1.5, Acquired: 2000, Throughput: 600},
	}
	lat, rate := perfCells(rs)
	if lat.Status != reports.StatusMeasured || lat.Value != "0.20 / 1.0 ms" || len(lat.Links) != 2 {
		t.Errorf("latency cell %+v", lat)
	}
	if rate.Value != "500/s" || !strings.HasPrefix(rate.Reason, "3000 critical sections") {
		t.Errorf("rate cell %+v", rate)
	}
	lat, rate = perfCells([]Result{{Job: Job{Seed: 1}, P50: math.NaN(), P99: math.NaN()}})
	if lat.Status != reports.StatusInconclusive || rate.Status != reports.StatusInconclusive || lat.Reason != "no acquire succeeded" {
		t.Errorf("no acquire: %+v %+v", lat, rate)
	}
}

func TestFencingAndStaticCells(t *testing.T) {
	none := []Result{{Job: Job{Probe: ProbeSafety, Class: ClassNone, Seed: 1}, Tokens: 120}}
	all := append(slices.Clone(none), Result{Job: Job{Probe: ProbeSafety, Class: ClassKillRestart, Seed: 1},
		Safety: Safety{Conclusive: true, Violated: true, Kinds: map[string]int{"token-regression": 1}}})
	c := fencingCell(mustLookup(t, "redis-set-nx-px"), none, all)
	if c.Status != reports.StatusYes || c.Value != "yes: Redis INCR counter, in the acquire's Lua script" ||
		c.Reason != "120 acquires of the fault-free run carried a token; tokens went back or were granted twice under kill-restart" {
		t.Errorf("fenced: %+v", c)
	}
	same := []Result{{Job: Job{Probe: ProbeSafety, Class: ClassNodePause, Seed: 1}, Safety: Safety{Conclusive: true, SameHolderTokens: 1}}}
	if c := fencingCell(mustLookup(t, "etcd-mutex"), nil, same); !strings.HasSuffix(c.Reason, "one process was granted the same token again (it acquired anew the lock it still had, after a release that did not complete) under node-pause") {
		t.Errorf("etcd-mutex: %+v", c)
	}
	if c := fencingCell(mustLookup(t, "redlock"), nil, nil); c.Status != reports.StatusNo {
		t.Errorf("redlock: %+v", c)
	}
	if c := blockingCell(mustLookup(t, "zk-recipe")); c.Status != reports.StatusYes || !strings.Contains(c.Reason, "predecessor") {
		t.Errorf("zk-recipe blocking: %+v", c)
	}
	if c := blockingCell(mustLookup(t, "redis-set-nx-px")); c.Status != reports.StatusNo || c.Reason != "fails at once" {
		t.Errorf("redis blocking: %+v", c)
	}
}

func TestReentrantCell(t *testing.T) {
	probe := func(r Reentrancy) []Result { return []Result{{Job: Job{Probe: ProbeReentrant}, Reentrancy: &r}} }
	tests := []struct {
		name, impl    string
		probes        []Result
		status, value string
		reason        string
	}{
		{"measured, as registered", "pg-advisory", probe(Reentrancy{Status: reports.StatusYes, Value: "yes", Reason: "measured: nesting is counted"}),
			reports.StatusYes, "yes", "measured: nesting is counted"},
		{"measured against the registration", "redis-set-nx-px", probe(Reentrancy{Status: reports.StatusYes, Value: "yes", Reason: "measured: granted"}),
			reports.StatusYes, "yes", "measured: granted; the impl's registration says no"},
		{"probe inconclusive: documented, with why", "mysql-get-lock", probe(Reentrancy{Status: reports.StatusInconclusive, Reason: "the reentrancy probe could not run: no mariadbd"}),
			reports.StatusYes, "yes (documented)", "as documented by the impl, not measured;"},
		{"no probe: documented", "zk-recipe", nil, reports.StatusNo, "no (documented)", "as documented by the impl, not measured;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := reentrantCell(mustLookup(t, tt.impl), tt.probes)
			checkCell(t, c, tt.status, tt.value, tt.reason)
		})
	}
}

func TestAggregateRowsAndColumns(t *testing.T) {
	rs := []Result{
		{Job: Job{Impl: "redis-set-nx-px", Probe: ProbePerf1, Class: ClassNone, Seed: 1}, Dir: "/s/p1", P50: 0.05, P99: 0.2, Acquired: 10, Throughput: 3000},
		{Job: Job{Impl: "redis-set-nx-px", Probe: ProbeSafety, Class: ClassNone, Seed: 1}, Dir: "/s/n", Safety: Safety{Conclusive: true}, P50: 0.07, P99: 0.5, Acquired: 10, Throughput: 2500},
		{Job: Job{Impl: "redis-set-nx-px", Probe: ProbeSafety, Class: ClassClientPause, Seed: 1}, Dir: "/s/cp",
			Safety: Safety{Conclusive: true, Violated: true, Faults: 2, Kinds: map[string]int{"stale-write": 1}}},
		{Job: Job{Impl: "etcd-mutex", Probe: ProbeSafety, Class: ClassNone, Seed: 1}, Err: "etcd: no such binary"},
	}
	m := Aggregate(reports.MatrixHeader{Seeds: 1}, []Class{ClassNone, ClassClientPause}, rs)
	var keys []string
	for _, c := range m.Columns {
		keys = append(keys, c.Key)
	}
	wantKeys := []string{"mutex-none", "mutex-client-pause", ColDeadlock, ColDualHolder, ColNodeLoss, ColFencing, ColReentrant, ColBlocking, ColLatency1, ColRate1, ColLatency8, ColRate8}
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("columns %v, want %v", keys, wantKeys)
	}
	if len(m.Rows) != 2 || m.Rows[0].Impl != "redis-set-nx-px" || m.Rows[1].Impl != "etcd-mutex" {
		t.Fatalf("rows %+v", m.Rows)
	}
	r := m.Rows[0]
	checks := map[string]string{
		"mutex-none": "held: 0/1 runs", "mutex-client-pause": "violated: 1/1 runs", ColLatency1: "0.05 / 0.20 ms", ColRate1: "3000/s",
		ColLatency8: "0.07 / 0.50 ms", ColRate8: "2500/s", ColNodeLoss: "n/a", ColDeadlock: "not run",
	}
	for k, want := range checks {
		if got := r.Cells[k].Text(); got != want {
			t.Errorf("redis %s: %q, want %q", k, got, want)
		}
	}
	if c := m.Rows[1].Cells["mutex-none"]; c.Status != reports.StatusInconclusive || c.Reason != "etcd: no such binary" {
		t.Errorf("etcd none: %+v", c)
	}
	for _, row := range m.Rows {
		for _, col := range m.Columns {
			if _, ok := row.Cells[col.Key]; !ok {
				t.Errorf("%s has no %s cell", row.Impl, col.Key)
			}
		}
	}
}

// TestSafetySurvival: a run's time to failure is the earliest op of a
// safety anomaly (other anomalies do not count), its workload's length the
// last op's time; the cell's curve takes the conclusive runs only, and its
// reason ends with what the curve says.
func TestSafetySurvival(t *testing.T) {
	h := make(history.History, 10)
	for i := range h {
		h[i] = history.Op{Index: i, Time: int64(i) * 1e9}
	}
	res := runstore.Results{Checkers: []checker.Result{
		{Checker: "liveness", Anomalies: []checker.Anomaly{{Kind: "stuck-lock", Ops: []int{1}}}},
		{Checker: "resource", Anomalies: []checker.Anomaly{{Kind: "stale-write", Ops: []int{6, 4}}}},
	}}
	s := ClassifySafety(res).SurvivalTimes(res, h)
	if s.FirstViolation != 4 || s.Workload != 9 || !s.Violated {
		t.Fatalf("%+v: want the first violation at 4 s and the workload 9 s", s)
	}
	if c := (Safety{}).SurvivalTimes(runstore.Results{}, nil); c.FirstViolation != -1 || c.Workload != 0 {
		t.Errorf("no history: %+v", c)
	}
	held := Safety{Conclusive: true, Faults: 2, Effective: 1, FirstViolation: -1, Workload: 8}
	noRoot := Safety{Reason: "fault isolate: fault unavailable: not root", FirstViolation: -1, Workload: 8}
	rs := []Result{safetyResult(ClassClientPause, 1, s), safetyResult(ClassClientPause, 2, held), safetyResult(ClassClientPause, 3, noRoot),
		{Job: Job{Class: ClassClientPause, Seed: 4}, Err: "port in use"}}
	c := safetyCell(rs)
	if c.Survival == nil || c.Survival.Runs != 2 || c.Survival.Violations != 1 || c.Survival.ExposureS != 12 {
		t.Fatalf("survival %+v: want 2 runs, 1 violation, 12 s observed", c.Survival)
	}
	if !strings.HasSuffix(c.Reason, "; "+c.Survival.Text()) {
		t.Errorf("the reason %q does not end with the time to failure", c.Reason)
	}
}

// TestDualHolderCell aggregates the dual-holder windows of an impl's mutex
// runs: n/a for an impl that sends no notices, "no takeover" when no hold
// was taken over, and otherwise the longest window, the median and how
// many holders were told before their hold ended.
func TestDualHolderCell(t *testing.T) {
	told := impls.Impl{Name: "x", Notices: "its session ends"}
	safety := func(class Class, seed int64, ts ...Takeover) Result {
		return Result{Job: Job{Impl: "x", Probe: ProbeSafety, Class: class, Seed: seed}, Dir: fmt.Sprintf("/s/%s-%d", class, seed), Takeovers: ts}
	}
	for _, tc := range []struct {
		name   string
		impl   impls.Impl
		rs     []Result
		status string
		text   string
		reason string
		links  int
	}{
		{"no notices", impls.Impl{Name: "x"}, []Result{safety(ClassClientPause, 1, Takeover{Window: time.Second})},
			reports.StatusNA, "n/a", "sends no lost-lock notices", 0},
		{"an external client that tells", impls.Impl{Name: "x"}, []Result{{Job: Job{Impl: "x", Probe: ProbeSafety, Class: ClassNone, Seed: 1},
			Results: runstore.Results{Run: runstore.RunInfo{Notices: "SUSPENDED"}}}},
			reports.StatusMeasured, "no takeover", "no hold was taken over in the 1 mutex run(s)", 0},
		{"not run", told, []Result{{Job: Job{Impl: "x", Probe: ProbeSafety, Class: ClassNone}, Err: "no server"}},
			reports.StatusNotRun, "not run", "no mutex run", 0},
		{"no takeover", told, []Result{safety(ClassNone, 1), safety(ClassClientPause, 1)},
			reports.StatusMeasured, "no takeover", "no hold was taken over in the 2 mutex run(s)", 0},
		{"windows", told, []Result{
			safety(ClassNone, 1),
			safety(ClassClientPause, 1, Takeover{Window: 400 * time.Millisecond, Told: true}, Takeover{Window: 2 * time.Second}),
			safety(ClassClientPause, 2, Takeover{Window: 100 * time.Millisecond, Told: true}),
		}, reports.StatusMeasured, "max 2000 ms", "3 hold(s) taken over in the mutex runs: two clients acted as holders for 400 ms (median), 2000 ms (max) after the grant; 2 of the holders were told before their hold ended", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dualHolderCell(tc.impl, tc.rs)
			if c.Status != tc.status || c.Text() != tc.text || !strings.Contains(c.Reason, tc.reason) || len(c.Links) != tc.links {
				t.Errorf("cell %+v: want status %s, text %q, a reason with %q, %d links", c, tc.status, tc.text, tc.reason, tc.links)
			}
		})
	}
}

// TestTakeovers reads the checker's golden histories of notices: a holder
// told while the other held the lock (the notice ends its window), and one
// told only after its own release (the release ends it).
func TestTakeovers(t *testing.T) {
	for file, want := range map[string][]Takeover{
		"notice-during-takeover.jsonl": {{Process: 0, Window: 399 * time.Millisecond, Told: true}},
		"notice-after-takeover.jsonl":  {{Process: 0, Window: 1929 * time.Millisecond, Told: false}},
		"notice-stop-writing.jsonl":    nil,
	} {
		h, err := history.ReadFile("../checker/testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if got := Takeovers(h); !slices.Equal(got, want) {
			t.Errorf("%s: takeovers %+v, want %+v", file, got, want)
		}
	}
}
