package matrix

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// hist builds a history op by op; times are in milliseconds.
type hist struct{ h history.History }

func (b *hist) add(typ history.Type, p int, f string, ms float64, v history.Value) *hist {
	b.h = append(b.h, history.Op{Index: len(b.h), Type: typ, Process: p, F: f, Time: int64(ms * 1e6), Value: v})
	return b
}

// acquire records an acquire of lock-0 by p from invoke to a completion.
func (b *hist) acquire(p int, from, to float64, typ history.Type) *hist {
	b.add(history.Invoke, p, history.Acquire, from, history.Value{Lock: "lock-0"})
	return b.add(typ, p, history.Acquire, to, history.Value{Lock: "lock-0"})
}

func (b *hist) release(p int, from, to float64) *hist {
	b.add(history.Invoke, p, history.Release, from, history.Value{Lock: "lock-0"})
	return b.add(history.OK, p, history.Release, to, history.Value{Lock: "lock-0"})
}

func (b *hist) nemesis(f string, from, to float64, targets ...string) *hist {
	b.add(history.Invoke, history.NemesisProcess, f, from, history.Value{Targets: targets})
	return b.add(history.OK, history.NemesisProcess, f, to, history.Value{Targets: targets})
}

func results(problems []string, cs ...checker.Result) runstore.Results {
	return runstore.Results{Problems: problems, Checkers: cs, Stats: map[string]float64{"faults_injected": 2}}
}

// ineffective makes r a run of faults of which n met a holder.
func ineffective(r runstore.Results, n float64) runstore.Results {
	r.Run.Faults = []string{"pause-node"}
	r.Stats["faults_effective"] = n
	return r
}

func valid(name string, anomalies ...checker.Anomaly) checker.Result {
	v := checker.Valid
	if len(anomalies) > 0 {
		v = checker.Invalid
	}
	return checker.Result{Checker: name, Valid: v, Anomalies: anomalies}
}

func allValid() []checker.Result {
	return []checker.Result{valid("mutual-exclusion"), valid("resource"), valid("fencing-tokens"), valid("liveness")}
}

func TestClassifySafety(t *testing.T) {
	unknownLin := checker.Result{Checker: "linearizable-mutex", Valid: checker.Unknown, Error: "timed out"}
	tests := []struct {
		name                     string
		r                        runstore.Results
		conclusive, violated, na bool
		sameHolder               int
		reason                   string
		kinds                    string
	}{
		{name: "all checkers valid: held", r: results(nil, allValid()...), conclusive: true},
		{name: "overlapping holds are a violation",
			r:          results(nil, valid("mutual-exclusion", checker.Anomaly{Kind: "overlapping-holds"}), valid("resource"), valid("fencing-tokens")),
			conclusive: true, violated: true, kinds: "overlapping-holds ×1"},
		{name: "stale writes and lost updates count, each kind",
			r: results(nil, valid("mutual-exclusion"), valid("resource", checker.Anomaly{Kind: "stale-write"}, checker.Anomaly{Kind: "stale-write"},
				checker.Anomaly{Kind: "lost-update"}), valid("fencing-tokens")),
			conclusive: true, violated: true, kinds: "lost-update ×1, stale-write ×2"},
		{name: "token regressions count",
			r:          results(nil, valid("mutual-exclusion"), valid("resource"), valid("fencing-tokens", checker.Anomaly{Kind: "token-regression"}, checker.Anomaly{Kind: "duplicate-token"})),
			conclusive: true, violated: true, kinds: "duplicate-token ×1, token-regression ×1"},
		{name: "a re-grant that continued one hold is no violation, and is counted",
			r:          results(nil, valid("mutual-exclusion"), valid("resource"), withStats(valid("fencing-tokens"), "continued_holds", 2)),
			conclusive: true, sameHolder: 2},
		{name: "a duplicate token the checker reports counts, also within one process",
			r:          results(nil, valid("mutual-exclusion"), valid("resource"), valid("fencing-tokens", checker.Anomaly{Kind: "duplicate-token", Ops: []int{1, 3}})),
			conclusive: true, violated: true, kinds: "duplicate-token ×1"},
		{name: "a violation counts even in a run with problems",
			r:          results([]string{"fault isolate: unavailable"}, valid("mutual-exclusion", checker.Anomaly{Kind: "overlapping-holds"})),
			conclusive: true, violated: true, kinds: "overlapping-holds ×1"},
		{name: "a stuck lock is not a violation of mutual exclusion",
			r:          results(nil, valid("mutual-exclusion"), valid("resource"), valid("fencing-tokens"), valid("liveness", checker.Anomaly{Kind: "stuck-lock"})),
			conclusive: true},
		{name: "a write the resource refused (a note) is not a violation",
			r: results(nil, valid("mutual-exclusion"), checker.Result{Checker: "resource", Valid: checker.Valid,
				Notes: []checker.Anomaly{{Kind: "write-rejected"}}}, valid("fencing-tokens")),
			conclusive: true},
		{name: "an invalid safety checker without a violation kind is inconclusive, never held",
			r:      results(nil, valid("mutual-exclusion"), valid("resource", checker.Anomaly{Kind: "new-kind"}), valid("fencing-tokens")),
			reason: "the resource checker gave invalid"},
		{name: "a timed-out linearizability check leaves the run conclusive",
			r:          results(nil, append(allValid(), unknownLin)...),
			conclusive: true},
		{name: "a fault that does not apply is n/a with only its reason",
			r: results([]string{"fault clock-bump: fault unavailable: etcd nodes are Go programs (not applicable)",
				"no fault was applied: run longer or lower --interval"}, allValid()...),
			na: true, reason: "fault clock-bump: fault unavailable: etcd nodes are Go programs (not applicable)"},
		{name: "a fault the machine cannot make is inconclusive, never held",
			r:      results([]string{"fault isolate: fault unavailable: not root", "no fault was applied: run longer or lower --interval"}, allValid()...),
			reason: "fault isolate: fault unavailable: not root; no fault was applied: run longer or lower --interval"},
		{name: "an unknown safety checker is inconclusive",
			r:      results(nil, valid("mutual-exclusion"), checker.Result{Checker: "resource", Valid: checker.Unknown, Error: "panicked"}, valid("fencing-tokens")),
			reason: "the resource checker gave unknown: panicked"},
		{name: "faults none of which met a holder are inconclusive, never held",
			r:      ineffective(results(nil, allValid()...), 0),
			reason: "none of the 2 faults applied was in force while a client held the lock: they had no chance to matter"},
		{name: "one fault that met a holder is enough",
			r: ineffective(results(nil, allValid()...), 1), conclusive: true},
		{name: "a violation counts though no fault met a holder",
			r:          ineffective(results(nil, valid("mutual-exclusion", checker.Anomaly{Kind: "overlapping-holds"})), 0),
			conclusive: true, violated: true, kinds: "overlapping-holds ×1"},
		{name: "a missing safety checker is inconclusive",
			r:      results(nil, valid("mutual-exclusion"), valid("resource")),
			reason: "the results have no fencing-tokens checker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ClassifySafety(tt.r)
			if s.SameHolderTokens != tt.sameHolder {
				t.Errorf("same-holder tokens %d, want %d", s.SameHolderTokens, tt.sameHolder)
			}
			if s.Conclusive != tt.conclusive || s.Violated != tt.violated || s.NA != tt.na {
				t.Errorf("conclusive %v violated %v na %v, want %v %v %v", s.Conclusive, s.Violated, s.NA, tt.conclusive, tt.violated, tt.na)
			}
			if s.Reason != tt.reason {
				t.Errorf("reason %q, want %q", s.Reason, tt.reason)
			}
			if got := reports.KindsText(s.Kinds); got != tt.kinds {
				t.Errorf("kinds %q, want %q", got, tt.kinds)
			}
		})
	}
}

func TestLatency(t *testing.T) {
	tests := []struct {
		name     string
		h        *hist
		p50, p99 float64
		n        int
	}{
		{"no acquire", &hist{}, math.NaN(), math.NaN(), 0},
		{"failed acquires do not count", (&hist{}).acquire(0, 0, 5, history.Fail), math.NaN(), math.NaN(), 0},
		{"one acquire", (&hist{}).acquire(0, 10, 12, history.OK), 2, 2, 1},
		{"four interleaved acquires, nearest rank",
			(&hist{}).add(history.Invoke, 0, history.Acquire, 0, history.Value{}).add(history.Invoke, 1, history.Acquire, 1, history.Value{}).
				add(history.OK, 1, history.Acquire, 4, history.Value{}).add(history.OK, 0, history.Acquire, 1, history.Value{}).
				acquire(2, 10, 20, history.OK).acquire(3, 30, 32, history.OK).acquire(3, 40, 41, history.Info),
			2, 10, 4},
		{"nemesis ops are not acquires", (&hist{}).nemesis("acquire", 0, 100).acquire(0, 0, 1, history.OK), 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p50, p99, n := Latency(tt.h.h)
			same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
			if !same(p50, tt.p50) || !same(p99, tt.p99) || n != tt.n {
				t.Errorf("got p50 %v p99 %v n %d, want %v %v %d", p50, p99, n, tt.p50, tt.p99, tt.n)
			}
		})
	}
}

func TestThroughput(t *testing.T) {
	tests := []struct {
		name string
		h    *hist
		want float64
	}{
		{"empty", &hist{}, 0},
		{"four critical sections in two seconds",
			(&hist{}).acquire(0, 0, 1, history.OK).release(0, 2, 3).acquire(1, 500, 501, history.OK).
				acquire(0, 1000, 1001, history.OK).acquire(1, 1999, 2000, history.OK).acquire(2, 1500, 1600, history.Fail), 2},
		{"the nemesis does not stretch the span",
			(&hist{}).nemesis("pause-client", 0, 1).acquire(0, 1000, 1000, history.OK).acquire(1, 1500, 2000, history.OK).nemesis("resume-client", 5000, 5001), 2},
	}
	for _, tt := range tests {
		if got := Throughput(tt.h.h); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: %v cs/s, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRecoveries(t *testing.T) {
	tests := []struct {
		name string
		h    *hist
		want []Recovery
	}{
		{"the next holder got the lock 600ms after the death",
			(&hist{}).acquire(1, 0, 10, history.OK).nemesis("kill-client", 5, 100, "p1").
				acquire(2, 150, 160, history.Fail).acquire(2, 650, 700, history.OK).add(history.Invoke, 3, history.Acquire, 900, history.Value{Lock: "lock-0"}),
			[]Recovery{{Kill: 3, Process: 1, Lock: "lock-0", Died: 100e6, After: 600 * time.Millisecond, Observed: 800 * time.Millisecond}}},
		{"never again: stuck until the history ended",
			(&hist{}).acquire(0, 0, 10, history.OK).nemesis("kill-client", 20, 30, "p0").acquire(1, 100, 2000, history.Fail),
			[]Recovery{{Kill: 3, Process: 0, Lock: "lock-0", Died: 30e6, After: -1, Observed: 1970 * time.Millisecond}}},
		{"a killed process that had released held nothing",
			(&hist{}).acquire(0, 0, 10, history.OK).release(0, 20, 30).nemesis("kill-client", 40, 50, "p0").acquire(1, 60, 70, history.OK),
			nil},
		{"a kill that failed is no death",
			(&hist{}).acquire(0, 0, 10, history.OK).add(history.Invoke, -1, "kill-client", 20, history.Value{Targets: []string{"p0"}}).
				add(history.Fail, -1, "kill-client", 30, history.Value{Targets: []string{"p0"}}),
			nil},
		{"an acquire ok before the death does not count",
			(&hist{}).acquire(0, 0, 10, history.OK).add(history.Invoke, 1, history.Acquire, 5, history.Value{Lock: "lock-0"}).
				nemesis("kill-client", 15, 20, "p0").add(history.OK, 1, history.Acquire, 520, history.Value{Lock: "lock-0"}),
			[]Recovery{{Kill: 4, Process: 0, Lock: "lock-0", Died: 20e6, After: 500 * time.Millisecond, Observed: 500 * time.Millisecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Recoveries(tt.h.h)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("recovery %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestMeasureAvailability(t *testing.T) {
	// Client ops from 0 to 4000ms; node n2 down from 1000 to 2000ms.
	h := (&hist{}).acquire(0, 0, 1, history.OK).acquire(1, 500, 501, history.OK).
		nemesis("kill-node", 990, 1000, "n2").
		acquire(0, 1100, 1200, history.OK).acquire(1, 1300, 1900, history.Info).acquire(2, 1500, 1600, history.Fail).
		nemesis("restart-node", 2000, 2300, "n2").
		acquire(0, 2400, 2401, history.OK).acquire(1, 3000, 4000, history.OK)
	a := MeasureAvailability(h.h, "kill-node", "restart-node")
	want := Availability{Windows: 1, DuringAttempts: 3, DuringOK: 1, DuringSeconds: 1, OutsideAttempts: 4, OutsideOK: 4, OutsideSeconds: 3}
	if a != want {
		t.Fatalf("got %+v, want %+v", a, want)
	}
	if r := a.RateDuring(); r != 1 {
		t.Errorf("rate during %v, want 1/s", r)
	}
	if s := a.SuccessDuring(); math.Abs(s-1.0/3) > 1e-9 {
		t.Errorf("success during %v, want 1/3", s)
	}
	if s := a.SuccessOutside(); s != 1 {
		t.Errorf("success outside %v, want 1", s)
	}
	// A node still down when the history ends: the window runs to the last
	// client op.
	h2 := (&hist{}).acquire(0, 0, 1, history.OK).nemesis("kill-node", 1000, 1000, "n1").acquire(0, 1500, 3000, history.Fail)
	a2 := MeasureAvailability(h2.h, "kill-node", "restart-node")
	if a2.Windows != 1 || a2.DuringSeconds != 2 || a2.DuringAttempts != 1 || a2.DuringOK != 0 {
		t.Errorf("open window: %+v", a2)
	}
	if got := MeasureAvailability((&hist{}).acquire(0, 0, 1, history.OK).h, "kill-node", "restart-node"); got.Windows != 0 || !math.IsNaN(got.SuccessDuring()) {
		t.Errorf("no fault: %+v", got)
	}
}

// TestMeasureRestarts checks which restarts of a killed node came while a
// holder still worked: the holder granted before the kill and still
// holding when the restart completed counts, one that invoked its release
// before, one whose lease ran out before, and one granted after the kill
// do not; a kill with no restart is not a restart.
func TestMeasureRestarts(t *testing.T) {
	for _, tc := range []struct {
		name         string
		build        func(b *hist)
		restarts, in int
		holds        int
	}{
		{"holder working across the restart", func(b *hist) {
			b.acquire(0, 0, 10, history.OK)
			b.nemesis("kill-node", 100, 110, "n1")
			b.nemesis("restart-node", 1110, 1250, "n1")
			b.release(0, 2000, 2001)
		}, 1, 1, 1},
		{"holder done before the node was back", func(b *hist) {
			b.acquire(0, 0, 10, history.OK)
			b.nemesis("kill-node", 100, 110, "n1")
			b.release(0, 500, 501)
			b.nemesis("restart-node", 1110, 1250, "n1")
		}, 1, 0, 1},
		{"lease ran out while the node was down", func(b *hist) {
			b.add(history.Invoke, 0, history.Acquire, 0, history.Value{Lock: "lock-0"})
			b.add(history.OK, 0, history.Acquire, 10, history.Value{Lock: "lock-0", ValidUntil: 600e6})
			b.nemesis("kill-node", 100, 110, "n1")
			b.nemesis("restart-node", 1110, 1250, "n1")
			b.release(0, 2000, 2001)
		}, 1, 0, 1},
		{"granted after the kill", func(b *hist) {
			b.nemesis("kill-node", 100, 110, "n1")
			b.acquire(0, 105, 120, history.OK)
			b.nemesis("restart-node", 1110, 1250, "n1")
			b.release(0, 2000, 2001)
		}, 1, 0, 1},
		{"a kill with no restart", func(b *hist) {
			b.acquire(0, 0, 10, history.OK)
			b.nemesis("kill-node", 100, 110, "n1")
		}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b hist
			tc.build(&b)
			x := MeasureRestarts(b.h)
			if x.Restarts != tc.restarts || x.Across != tc.in || len(x.Holds) != tc.holds {
				t.Errorf("restarts %d, across %d, holds %v; want %d, %d and %d holds", x.Restarts, x.Across, x.Holds, tc.restarts, tc.in, tc.holds)
			}
		})
	}
	if got := HoldsText([]time.Duration{2 * time.Second, 2500 * time.Millisecond, 3100 * time.Millisecond}); got != "holds of 2.0–3.1 s (median 2.5 s)" {
		t.Errorf("HoldsText = %q", got)
	}
}

// TestKillRestartNeedsAHolderAcrossTheRestart checks that a kill/restart
// run of a one-node backend without a violation is held only when a holder
// lived through a restart: otherwise it could not show a violation, and
// its cell says so instead of "held". A violation stays one, and a backend
// of several nodes keeps the rule of the other classes.
func TestKillRestartNeedsAHolderAcrossTheRestart(t *testing.T) {
	clean := Safety{Conclusive: true, Kinds: map[string]int{}, Faults: 3, Effective: 3}
	violated := Safety{Conclusive: true, Violated: true, Kinds: map[string]int{"overlapping-holds": 1}, Faults: 3, Effective: 3}
	for _, tc := range []struct {
		name       string
		s          Safety
		nodes      int
		x          RestartExposure
		conclusive bool
	}{
		{"no holder across a restart", clean, 1, RestartExposure{Restarts: 3}, false},
		{"a holder across a restart", clean, 1, RestartExposure{Restarts: 3, Across: 1}, true},
		{"a violation", violated, 1, RestartExposure{Restarts: 3}, true},
		{"several nodes", clean, 3, RestartExposure{Restarts: 3}, true},
	} {
		got := tc.s.needsHolderAcrossRestart(tc.nodes, tc.x)
		if got.Conclusive != tc.conclusive || !tc.conclusive && got.Reason != NoHolderAcrossRestart {
			t.Errorf("%s: conclusive %v (%q), want %v", tc.name, got.Conclusive, got.Reason, tc.conclusive)
		}
	}
	// A cell of such runs is inconclusive, with the reason and the holds
	// they tested, not held.
	job := Job{Probe: ProbeSafety, Class: ClassKillRestart}
	var rs []Result
	for range 2 {
		x := RestartExposure{Restarts: 2, Holds: []time.Duration{5 * time.Millisecond, 7 * time.Millisecond}}
		rs = append(rs, Result{Job: job, Safety: clean.needsHolderAcrossRestart(1, x), Restart: &x})
	}
	cell := safetyCell(rs)
	if cell.Status != reports.StatusInconclusive || !strings.Contains(cell.Reason, NoHolderAcrossRestart) ||
		!strings.Contains(cell.Reason, "0 of the 4 restarts came while a holder was still working; holds of 0.0–0.0 s") {
		t.Errorf("cell %s: %s", cell.Status, cell.Reason)
	}
	x := RestartExposure{Restarts: 2, Across: 1, Holds: []time.Duration{2 * time.Second}}
	rs[1] = Result{Job: job, Safety: clean.needsHolderAcrossRestart(1, x), Restart: &x}
	if cell := safetyCell(rs); cell.Status != reports.StatusHeld || !strings.Contains(cell.Reason, "1 more run(s) inconclusive") ||
		!strings.Contains(cell.Reason, "1 of the 4 restarts came while a holder was still working") {
		t.Errorf("cell %s: %s", cell.Status, cell.Reason)
	}
}

// TestAViolationBesideAMachineStallIsInconclusive checks the stall rule
// on hand-built runs of a 500 ms lease: a violation whose first op came
// within a lease of a stall of half a lease or more is inconclusive, with
// the stall in its reason, and its cell does not count it; a shorter
// stall, a stall far from the violation, a clean run and a run whose
// violation time is unknown are left as they are.
func TestAViolationBesideAMachineStallIsInconclusive(t *testing.T) {
	run := func(stalls ...runstore.Stall) runstore.RunInfo {
		return runstore.RunInfo{TTL: "500ms", Stalls: &runstore.Stalls{Tick: "10ms", Over: "250ms", Count: len(stalls), Top: stalls}}
	}
	violated := Safety{Conclusive: true, Violated: true, Kinds: map[string]int{"stale-write": 1}, FirstViolation: 7.229}
	clean := Safety{Conclusive: true, Kinds: map[string]int{}, FirstViolation: -1}
	unknown := violated
	unknown.FirstViolation = -1
	for _, tc := range []struct {
		name   string
		s      Safety
		run    runstore.RunInfo
		counts bool
	}{
		// The Redis Cluster run of the fault-free column: a 419 ms stall
		// from 270 ms before the grant.
		{"a stall over the grant", violated, run(runstore.Stall{At: "6.96s", Length: "419ms"}), false},
		{"a stall a lease after the first op", violated, run(runstore.Stall{At: "7.7s", Length: "300ms"}), false},
		{"a stall ending a lease before the first op", violated, run(runstore.Stall{At: "6.45s", Length: "300ms"}), false},
		{"a stall ending earlier", violated, run(runstore.Stall{At: "6.2s", Length: "300ms"}), true},
		{"a stall beginning later", violated, run(runstore.Stall{At: "7.8s", Length: "300ms"}), true},
		{"a stall under half the lease", violated, run(runstore.Stall{At: "7.1s", Length: "249ms"}), true},
		{"no stall", violated, run(), true},
		{"not measured", violated, runstore.RunInfo{TTL: "500ms"}, true},
		{"the time unknown", unknown, run(runstore.Stall{At: "6.96s", Length: "419ms"}), true},
		{"a clean run", clean, run(runstore.Stall{At: "6.96s", Length: "419ms"}), true},
	} {
		got := tc.s.unlessTheMachineStalled(tc.run)
		if tc.counts {
			if got.Conclusive != tc.s.Conclusive || got.Violated != tc.s.Violated || got.Reason != tc.s.Reason {
				t.Errorf("%s: changed to conclusive %v violated %v (%q)", tc.name, got.Conclusive, got.Violated, got.Reason)
			}
			continue
		}
		if got.Conclusive || got.Violated || !strings.Contains(got.Reason, "the machine stalled") || got.Kinds["stale-write"] != 1 {
			t.Errorf("%s: conclusive %v violated %v (%q), kinds %v", tc.name, got.Conclusive, got.Violated, got.Reason, got.Kinds)
		}
	}
	// A cell of one such run and four clean ones is held 0 of 4, the
	// stalled run named among the inconclusive ones.
	job := Job{Probe: ProbeSafety, Class: ClassNone}
	rs := []Result{{Job: job, Safety: violated.unlessTheMachineStalled(run(runstore.Stall{At: "6.96s", Length: "419ms"}))}}
	for range 4 {
		rs = append(rs, Result{Job: job, Safety: Safety{Conclusive: true, Kinds: map[string]int{}, Faults: 0, Effective: -1}})
	}
	if cell := safetyCell(rs); cell.Status != reports.StatusHeld || cell.Conclusive != 4 || !strings.Contains(cell.Reason, "the machine stalled 419ms at 6.96s") {
		t.Errorf("cell %s %d/%d: %s", cell.Status, cell.Violations, cell.Conclusive, cell.Reason)
	}
}

// withStats returns r with its stat name set to v.
func withStats(r checker.Result, name string, v float64) checker.Result {
	if r.Stats == nil {
		r.Stats = map[string]float64{}
	}
	r.Stats[name] = v
	return r
}
