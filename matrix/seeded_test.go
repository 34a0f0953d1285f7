package matrix

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// zooRun is a measured run of impl in the column of probe p and class c,
// with seed and safety s.
func zooRun(impl string, p Probe, c Class, seed int64, s Safety) Result {
	return Result{Job: Job{Impl: impl, Probe: p, Class: c, Seed: seed}, Safety: s}
}

var (
	clean = Safety{Conclusive: true}
	// stale is the recipe's own weakness under a client pause.
	stale = Safety{Conclusive: true, Violated: true, Kinds: map[string]int{checker.KindStaleWrite: 1}, FirstOf: map[string]float64{checker.KindStaleWrite: 2}}
)

// bugRun is a violated run with the anomalies of kinds, each first seen at
// the time given.
func bugRun(firsts map[string]float64) Safety {
	s := Safety{Conclusive: true, Violated: true, Kinds: map[string]int{}, FirstOf: firsts}
	for k := range firsts {
		s.Kinds[k] = 2
	}
	return s
}

// TestDetectTellsTheBugFromItsRecipe: a column catches a seeded bug only
// with an anomaly kind its recipe's runs of the same column never showed;
// the time is the median over the runs that caught it of their first such
// anomaly; a kind the recipe shows as well tells nothing, and a column
// whose seeded runs could show nothing is inconclusive.
func TestDetectTellsTheBugFromItsRecipe(t *testing.T) {
	const bug, base = "seeded-process-token", "redis-set-nx-px"
	none, pause, kill := ClassNone, ClassClientPause, ClassKillRestart
	results := []Result{
		zooRun(base, ProbeSafety, none, 1, clean), zooRun(base, ProbeSafety, none, 2, clean),
		zooRun(base, ProbeSafety, pause, 1, stale), zooRun(base, ProbeSafety, pause, 2, stale),
		zooRun(base, ProbeSafety, kill, 1, clean), zooRun(base, ProbeSafety, kill, 2, clean),
		zooRun(base, ProbeDeadlock, none, 1, clean),

		// Caught without faults in both seeds, first at 0.5 s and 1.5 s.
		zooRun(bug, ProbeSafety, none, 1, bugRun(map[string]float64{checker.KindDuplicateToken: 0.5})),
		zooRun(bug, ProbeSafety, none, 2, bugRun(map[string]float64{checker.KindDuplicateToken: 3, checker.KindTokenRegression: 1.5})),
		// Under the pause the stale write is the recipe's; the token
		// regression of seed 2 is the bug's.
		zooRun(bug, ProbeSafety, pause, 1, stale),
		zooRun(bug, ProbeSafety, pause, 2, bugRun(map[string]float64{checker.KindStaleWrite: 1, checker.KindTokenRegression: 4})),
		// A duplicate token where the recipe's counter restarted too is
		// the recipe's weakness.
		zooRun(base, ProbeSafety, ClassNodePause, 1, bugRun(map[string]float64{checker.KindTokenRegression: 1})),
		zooRun(bug, ProbeSafety, ClassNodePause, 1, bugRun(map[string]float64{checker.KindDuplicateToken: 1})),
		// Inconclusive: the seeded run could show nothing.
		zooRun(bug, ProbeSafety, kill, 1, Safety{Reason: "no fault applied"}),
		// The recipe's runs of a column count when they ran, conclusive or
		// not (a kill/restart run whose restarts met no holder).
		zooRun(base, ProbeSafety, ClassPartition, 1, Safety{Reason: "no restart met a holder"}),
		zooRun(bug, ProbeSafety, ClassPartition, 1, bugRun(map[string]float64{checker.KindDuplicateToken: 5})),
		{Job: Job{Impl: base, Probe: ProbeSafety, Class: ClassPartition, Seed: 2}, Err: "port in use"},
		// The deadlock run held; a stuck lock would have been the bug's.
		zooRun(bug, ProbeDeadlock, none, 1, clean),
	}
	results = append(results, Result{Job: Job{Impl: bug, Probe: ProbeDeadlock, Class: none, Seed: 2}, Safety: clean, Stuck: 1})
	got := Detect([]Class{none, pause, ClassNodePause, kill, ClassPartition}, results)
	if len(got) != 1 {
		t.Fatalf("Detect = %+v, want the one seeded impl", got)
	}
	d := got[0]
	i, _ := impls.Lookup(bug)
	if d.Impl != bug || d.Base != base || d.Bug != i.Seeded {
		t.Errorf("bug %q of %q, from %q; want the registration's", d.Bug, d.Impl, d.Base)
	}
	want := map[string]reports.SeededCell{
		SafetyColumn(none): {Status: reports.SeededCaught, Runs: 2, Caught: 2, Violated: 2, BaseRuns: 2,
			Kinds: map[string]int{checker.KindDuplicateToken: 4, checker.KindTokenRegression: 2}, Median: 1},
		SafetyColumn(pause): {Status: reports.SeededCaught, Runs: 2, Caught: 1, Violated: 2, BaseRuns: 2, BaseViolated: 2,
			Kinds: map[string]int{checker.KindTokenRegression: 2}, Median: 4},
		SafetyColumn(kill):           {Status: reports.SeededInconclusive, BaseRuns: 2},
		SafetyColumn(ClassNodePause): {Status: reports.SeededSame, Runs: 1, Violated: 1, BaseRuns: 1, BaseViolated: 1},
		SafetyColumn(ClassPartition): {Status: reports.SeededCaught, Runs: 1, Caught: 1, Violated: 1, BaseRuns: 1,
			Kinds: map[string]int{checker.KindDuplicateToken: 2}, Median: 5},
		ColDeadlock: {Status: reports.SeededCaught, Runs: 2, Caught: 1, Violated: 1, BaseRuns: 1,
			Kinds: map[string]int{checker.KindStuckLock: 1}},
	}
	for col, w := range want {
		g := d.Cells[col]
		if g.Status != w.Status || g.Runs != w.Runs || g.Caught != w.Caught || g.Violated != w.Violated ||
			g.BaseRuns != w.BaseRuns || g.BaseViolated != w.BaseViolated || g.Median != w.Median || !maps.Equal(g.Kinds, w.Kinds) {
			t.Errorf("%s: %+v, want %+v", col, g, w)
		}
	}
	if wantBy := []string{SafetyColumn(none), SafetyColumn(pause), SafetyColumn(ClassPartition), ColDeadlock}; !slices.Equal(d.CaughtBy, wantBy) {
		t.Errorf("caught by %v, want %v", d.CaughtBy, wantBy)
	}
}

// TestDetectSameAsRecipeAndMissed: anomalies only of kinds the recipe
// shows as well are "same as recipe", clean runs "missed", and a seeded
// impl without its recipe's runs is left out.
func TestDetectSameAsRecipeAndMissed(t *testing.T) {
	const base = "redis-set-nx-px"
	results := []Result{
		zooRun(base, ProbeSafety, ClassClientPause, 1, stale),
		zooRun(base, ProbeSafety, ClassNone, 1, clean),
		zooRun("seeded-release-wrong-key", ProbeSafety, ClassClientPause, 1, stale),
		zooRun("seeded-release-wrong-key", ProbeSafety, ClassNone, 1, clean),
		zooRun("seeded-etcd-txn-unchecked", ProbeSafety, ClassNone, 1, bugRun(map[string]float64{checker.KindOverlappingHolds: 1})),
	}
	got := Detect([]Class{ClassNone, ClassClientPause}, results)
	if len(got) != 1 || got[0].Impl != "seeded-release-wrong-key" {
		t.Fatalf("Detect = %+v, want only the bug whose recipe ran", got)
	}
	cells := got[0].Cells
	if c := cells[SafetyColumn(ClassClientPause)]; c.Status != reports.SeededSame || c.Text() != "same as recipe (1/1 vs 1/1)" {
		t.Errorf("client pause: %+v %q", c, c.Text())
	}
	if c := cells[SafetyColumn(ClassNone)]; c.Status != reports.SeededMissed || c.Text() != "missed (0/1)" {
		t.Errorf("no fault: %+v %q", c, c.Text())
	}
	if len(got[0].CaughtBy) != 0 {
		t.Errorf("caught by %v, want nothing", got[0].CaughtBy)
	}
}

// TestSeededImplsNameTheirRecipes: the zoo's matrix measures every seeded
// impl and, first, each correct recipe they vary, a registered impl that
// is not seeded.
func TestSeededImplsNameTheirRecipes(t *testing.T) {
	got := SeededImpls()
	seeded := impls.SeededNames()
	if len(seeded) < 12 {
		t.Fatalf("only %d seeded impls: %v", len(seeded), seeded)
	}
	for _, n := range seeded {
		i := mustLookup(t, n)
		at, base := slices.Index(got, n), slices.Index(got, i.SeededFrom)
		if at < 0 || base < 0 || base > at {
			t.Errorf("%s (from %s) at %d, its recipe at %d in %v", n, i.SeededFrom, at, base, got)
		}
		if b := mustLookup(t, i.SeededFrom); b.Seeded != "" || b.Backend != i.Backend {
			t.Errorf("%s varies %s, which is seeded or of another backend (%s)", n, b.Name, b.Backend)
		}
	}
}

// TestAddSeededKeepsTheImplsGiven: matrix --seeded measures the impls
// named first, in their order, then the zoo's that are not among them,
// each once.
func TestAddSeededKeepsTheImplsGiven(t *testing.T) {
	zoo := SeededImpls()
	other := impls.Names()[slices.IndexFunc(impls.Names(), func(n string) bool { return !slices.Contains(zoo, n) })]
	o := Options{Impls: []string{other, zoo[len(zoo)-1]}}
	o.AddSeeded()
	if len(o.Impls) != len(zoo)+1 || o.Impls[0] != other || o.Impls[1] != zoo[len(zoo)-1] {
		t.Fatalf("impls %v, want %s and %s first, then the rest of %v", o.Impls, other, zoo[len(zoo)-1], zoo)
	}
	for _, n := range zoo {
		if c := len(slices.DeleteFunc(slices.Clone(o.Impls), func(x string) bool { return x != n })); c != 1 {
			t.Errorf("%s is in %v %d times", n, o.Impls, c)
		}
	}
}

// TestFirstOfCountsFromTheWorkload: the first anomaly of each kind is
// timed from the history's first op, not from the run's clock origin: at
// the op whose reading let the streaming checkers confirm it, and, for a
// kind they do not confirm (the stuck lock), at the earliest op its
// anomalies name.
func TestFirstOfCountsFromTheWorkload(t *testing.T) {
	acq := func(i, p int, typ history.Type, at int64, tk uint64) history.Op {
		op := history.Op{Index: i, Type: typ, Process: p, F: history.Acquire, Time: at, Value: history.Value{Lock: "x"}}
		if typ == history.OK {
			op.Value.Token, op.Value.LockValue, op.Value.ValidUntil = &tk, fmt.Sprintf("p%d", p), at+1e9
		}
		return op
	}
	h := history.History{
		acq(0, 1, history.Invoke, 10e9, 0), acq(1, 1, history.OK, 11e9, 4),
		{Index: 2, Type: history.Invoke, Process: 1, F: history.Release, Time: 11.5e9, Value: history.Value{Lock: "x"}},
		{Index: 3, Type: history.OK, Process: 1, F: history.Release, Time: 11.6e9, Value: history.Value{Lock: "x", Removed: "p1"}},
		acq(4, 2, history.Invoke, 12e9, 0), acq(5, 2, history.OK, 12.5e9, 4),
		{Index: 6, Type: history.Invoke, Process: 2, F: history.Release, Time: 13e9, Value: history.Value{Lock: "x"}},
		{Index: 7, Type: history.OK, Process: 2, F: history.Release, Time: 14e9, Value: history.Value{Lock: "x", Removed: "p2"}},
	}
	r := runstore.Results{Checkers: []checker.Result{
		{Checker: "fencing-tokens", Anomalies: []checker.Anomaly{{Kind: checker.KindDuplicateToken, Ops: []int{1, 5}}}},
		{Checker: "liveness", Anomalies: []checker.Anomaly{{Kind: checker.KindStuckLock, Ops: []int{5, 1}}}},
	}}
	got := Safety{}.SurvivalTimes(r, h).FirstOf
	// The duplicate is confirmed with the op after p2's grant, at 13 s.
	want := map[string]float64{checker.KindDuplicateToken: 3, checker.KindStuckLock: 1}
	if !maps.Equal(got, want) {
		t.Errorf("FirstOf = %v, want %v", got, want)
	}
}
