package main

import (
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/margin"
)

// nem is a nemesis op of type ty and f at t milliseconds.
func nem(ty history.Type, f string, ms int64) history.Op {
	return history.Op{Type: ty, Process: history.NemesisProcess, F: f, Time: ms * int64(time.Millisecond)}
}

// TestAppliedSpan measures a fault from its injection's ok to its heal's
// ok, on hand-built histories: a pause stretched by a late resume, a
// node's time down with its restart, a fault that never went in, one
// never healed, and a failed injection followed by one that went in.
func TestAppliedSpan(t *testing.T) {
	pause, _ := history.FaultNamed("pause-client")
	kill, _ := history.FaultNamed("kill-node")
	acq := history.Op{Type: history.OK, Process: 0, F: history.Acquire, Time: 400 * int64(time.Millisecond)}
	for _, c := range []struct {
		name string
		kind history.FaultKind
		h    history.History
		want time.Duration
		ok   bool
	}{
		{"a pause and its late resume", pause, history.History{acq, nem(history.Invoke, "pause-client", 500), nem(history.OK, "pause-client", 502),
			nem(history.Invoke, "resume-client", 1402), nem(history.OK, "resume-client", 1491)}, 989 * time.Millisecond, true},
		{"a node's time down with its restart", kill, history.History{nem(history.Invoke, "kill-node", 1000), nem(history.OK, "kill-node", 1010),
			nem(history.Invoke, "restart-node", 3010), nem(history.OK, "restart-node", 3060)}, 2050 * time.Millisecond, true},
		{"no injection went in", pause, history.History{acq, nem(history.Invoke, "pause-client", 500), nem(history.Fail, "pause-client", 501)}, 0, false},
		{"never healed", pause, history.History{nem(history.OK, "pause-client", 500)}, 0, false},
		{"a failed injection, then one that went in", pause, history.History{nem(history.Fail, "pause-client", 100), nem(history.OK, "resume-client", 150),
			nem(history.OK, "pause-client", 500), nem(history.OK, "resume-client", 1500)}, time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := appliedSpan(c.h, c.kind)
			if got != c.want || ok != c.ok {
				t.Errorf("appliedSpan = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestOffPlanListsStretchedRuns: the runs whose applied pause is more
// than the resolution from the value planned are listed, farthest first;
// those within it and those not measured are not.
func TestOffPlanListsStretchedRuns(t *testing.T) {
	ms := float64(time.Millisecond)
	m := &marginSearch{dir: "/s", mf: marginFlags{resolution: 50 * time.Millisecond}, param: margin.Param{Name: "pause", Kind: margin.Duration}}
	res := margin.Result{Points: []margin.Point{
		{Value: 900 * ms, Label: "900ms", Trials: []margin.Trial{
			{Run: "/s/runs/a", Applied: 940 * ms, Measured: true},  // within 50 ms
			{Run: "/s/runs/b", Applied: 1012 * ms, Measured: true}, // 112 ms long
			{Run: "/s/runs/c"}, // not measured
		}},
		{Value: 1000 * ms, Label: "1s", Trials: []margin.Trial{
			{Run: "/s/runs/d", Applied: 1060 * ms, Measured: true}, // 60 ms long
			{Run: "/s/runs/e", Applied: 930 * ms, Measured: true},  // 70 ms short
		}},
	}}
	got := m.offPlan(res)
	want := []string{"planned 900ms, applied 1.012s (runs/b)", "planned 1s, applied 930ms (runs/e)", "planned 1s, applied 1.06s (runs/d)"}
	if !slices.Equal(got, want) {
		t.Errorf("offPlan = %q\nwant %q", got, want)
	}
}

// TestStatedBoundOfTargetsIsRedlocksQuorum: varying how many of Redlock's
// nodes a fault hits, the stated bound is the quorum (3 of 5); a lock of
// one node states none.
func TestStatedBoundOfTargetsIsRedlocksQuorum(t *testing.T) {
	for _, c := range []struct {
		impl  string
		label string
	}{{"redlock", "3"}, {"redis-set-nx-px", ""}} {
		m := &marginSearch{param: margin.Param{Name: "targets", Kind: margin.Count}, backend: "redis"}
		m.cfg.Impl = c.impl
		b := m.bound()
		switch {
		case c.label == "" && b != nil:
			t.Errorf("%s: stated bound %+v, want none", c.impl, *b)
		case c.label != "" && (b == nil || b.Label != c.label || b.Value != 3):
			t.Errorf("%s: stated bound %+v, want %s", c.impl, b, c.label)
		}
	}
}

// TestStatedBoundOfAClientIsItsService: an external client's stated bound
// for a pause comes from the service it locks on (a ZooKeeper session, a
// Redis or etcd lease, none for a database's session lock), not from the
// --impl flag's default, which a --client run does not use.
func TestStatedBoundOfAClientIsItsService(t *testing.T) {
	for _, c := range []struct {
		backend, rule string
	}{
		{"zookeeper", "the session timeout, 2s"},
		{"redis", "the lease less the time from the acquire to the pause: TTL − gap = 2s − 0s"},
		{"etcd", "the lease less the time from the acquire to the pause: TTL − gap = 2s − 0s"},
		{"postgres", ""},
	} {
		m := &marginSearch{param: margin.Param{Name: "pause", Kind: margin.Duration}, backend: c.backend}
		m.cfg.Impl, m.cfg.Client, m.cfg.TTL = "redis-set-nx-px", "a-client", 2*time.Second
		b := m.bound()
		switch {
		case c.rule == "" && b != nil:
			t.Errorf("%s: stated bound %+v, want none", c.backend, *b)
		case c.rule != "" && (b == nil || b.Rule != c.rule):
			t.Errorf("%s: stated bound %+v, want the rule %q", c.backend, b, c.rule)
		}
	}
}

// TestCutShortRunsAreRunAgain: a run that held while its fault was
// applied more than the resolution shorter than planned (a late pause
// that the fault phase's end cut short) tested a smaller fault, and only
// such a run is cut short: not one that broke, not one within the
// resolution or longer than planned, not one unmeasured or already
// unusable.
func TestCutShortRunsAreRunAgain(t *testing.T) {
	ms := float64(time.Millisecond)
	res := 50 * time.Millisecond
	for _, c := range []struct {
		name string
		t    margin.Trial
		want bool
	}{
		{"held, 196ms of 800ms", margin.Trial{Applied: 196 * ms, Measured: true}, true},
		{"held, 51ms short", margin.Trial{Applied: 749 * ms, Measured: true}, true},
		{"held, 50ms short", margin.Trial{Applied: 750 * ms, Measured: true}, false},
		{"held, stretched", margin.Trial{Applied: 900 * ms, Measured: true}, false},
		{"broke, 196ms of 800ms", margin.Trial{Applied: 196 * ms, Measured: true, Failed: true}, false},
		{"not measured", margin.Trial{}, false},
		{"already unusable", margin.Trial{Applied: 196 * ms, Measured: true, Unusable: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := cutShort(c.t, 800*ms, res); got != c.want {
				t.Errorf("cutShort = %v, want %v", got, c.want)
			}
		})
	}
}
