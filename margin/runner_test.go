package margin

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	_ "github.com/locktest/locktest/impls/all" // the impls a study's runs name
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
)

// studyOf prepares the study that the command line args give (each flag
// with its value), with the search's own settings at the command's
// defaults, without running it.
func studyOf(t *testing.T, args ...string) (*Study, error) {
	t.Helper()
	cfg := run.DefaultConfig()
	s := Settings{Trials: 5, Grid: 5, Resolution: 50 * time.Millisecond, At: time.Second, Budget: time.Hour}
	given := map[string]bool{}
	for i := 0; i+1 < len(args); i += 2 {
		name, v := strings.TrimPrefix(args[i], "--"), args[i+1]
		given[name] = true
		var err error
		switch name {
		case "vary":
			s.Vary = v
		case "at":
			s.At, err = time.ParseDuration(v)
		default:
			err = cfg.Set(name, v)
		}
		if err != nil {
			t.Fatalf("--%s %s: %v", name, v, err)
		}
	}
	return Prepare(cfg, s, func(name string) bool { return given[name] })
}

// claim6Restart is claim 6's restart without persistence, whose restart
// delay a margin search varies: a kill of n3 3 s into a partition.
var claim6Restart = []string{"--impl", "redlock", "--clients", "2", "--ttl", "6s", "--work", "4s", "--resource", "none", "--persistence", "off",
	"--faults", "partition+kill-node", "--partition", "n1,n2,n3,c0/n3,n4,n5,c1", "--target", "kill-node=n3", "--window", "3s", "--stagger", "3s", "--at", "1s"}

// A search over one part of a combined fault plans every part: the
// partition at --at with its shape, the kill --stagger later with the
// value, the partition kept until the kill has healed; the value 0 of a
// restart delay is a kill restarted at once, not a run without the fault.
func TestMarginPlansEveryPartOfACombinedFault(t *testing.T) {
	m, err := studyOf(t, append(slices.Clone(claim6Restart), "--vary", "down=0s..10s")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		down, partitionLasts time.Duration
	}{{2 * time.Second, 5 * time.Second}, {0, 3 * time.Second}, {10 * time.Second, 13 * time.Second}} {
		plan, cfg, err := m.plan(float64(c.down))
		if err != nil {
			t.Fatal(err)
		}
		want := []nemesis.PlannedFault{
			{At: time.Second, Fault: "partition", Settings: map[string]string{"partition": "n1,n2,n3,c0/n3,n4,n5,c1", "window": "3s"}, Lasts: c.partitionLasts, Outcome: "ok"},
			{At: 4 * time.Second, Fault: "kill-node", Settings: map[string]string{"down": c.down.String()}, Pins: []string{"n3"}, Lasts: c.down, Outcome: "ok"},
		}
		if len(plan.Faults) != len(want) {
			t.Fatalf("down %v: plan %+v, want %+v", c.down, plan.Faults, want)
		}
		for i, f := range plan.Faults {
			w := want[i]
			if f.At != w.At || f.Fault != w.Fault || !maps.Equal(f.Settings, w.Settings) || !slices.Equal(f.Pins, w.Pins) || f.Lasts != w.Lasts || f.Outcome != w.Outcome {
				t.Errorf("down %v: faults[%d] = %+v, want %+v", c.down, i, f, w)
			}
		}
		if end := 4*time.Second + c.down + cfg.Quiet; cfg.Duration <= end {
			t.Errorf("down %v: the run lasts %v, not past the kill's heal and the quiet time (%v)", c.down, cfg.Duration, end)
		}
		cfg.Plan = &plan
		if _, err := cfg.Prepared(); err != nil {
			t.Errorf("down %v: locktest run refuses the plan: %v", c.down, err)
		}
	}
	if !slices.Equal(m.readers, []string{"kill-node"}) {
		t.Errorf("the varied part is %v, want kill-node", m.readers)
	}
}

// A part that waits for its moment (kill-on-grant waits up to its window
// for a grant) may hit that much later than planned: the other parts stay
// through the wait too, and the run lasts past its latest heal.
func TestMarginKeepsTheOtherPartsThroughAWait(t *testing.T) {
	args := slices.Clone(claim6Restart)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "kill-node", "kill-on-grant")
	}
	m, err := studyOf(t, append(args, "--vary", "down=0s..10s")...)
	if err != nil {
		t.Fatal(err)
	}
	const down = 2 * time.Second
	plan, cfg, err := m.plan(float64(down))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Faults) != 2 {
		t.Fatalf("plan %+v, want a partition and a kill-on-grant", plan.Faults)
	}
	part, kill := plan.Faults[0], plan.Faults[1]
	// The kill waits from 4 s up to its 3 s window, then stays down 2 s.
	if want := 3*time.Second + 3*time.Second + down; part.Fault != "partition" || part.Lasts != want {
		t.Errorf("partition %+v, want it to last %v: the stagger, the kill's wait and its time down", part, want)
	}
	if want := (map[string]string{"down": "2s", "window": "3s"}); kill.Fault != "kill-on-grant" || kill.Lasts != down || !maps.Equal(kill.Settings, want) {
		t.Errorf("kill %+v, want kill-on-grant lasting %v with settings %v", kill, down, want)
	}
	if end := 4*time.Second + 3*time.Second + down + cfg.Quiet; cfg.Duration <= end {
		t.Errorf("the run lasts %v, not past the latest heal and the quiet time (%v)", cfg.Duration, end)
	}
	cfg.Plan = &plan
	if _, err := cfg.Prepared(); err != nil {
		t.Errorf("locktest run refuses the plan: %v", err)
	}
}

// A combined fault is one fault to margin, but the setting it varies must
// be one its parts read, and its parts' targets cannot be varied together.
func TestMarginRefusesWhatACombinedFaultCannotVary(t *testing.T) {
	for _, c := range []struct {
		vary, want string
	}{
		{"pause=1s..2s", "partition+kill-node does not read it (it reads partition, window, down)"},
		{"targets=1..3", "the parts of partition+kill-node hit different things"},
	} {
		_, err := studyOf(t, append(slices.Clone(claim6Restart), "--vary", c.vary)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--vary %s: %v, want an error with %q", c.vary, err, c.want)
		}
	}
	if _, err := studyOf(t, "--impl", "redlock", "--faults", "pause-node,kill-node", "--vary", "down=0s..1s"); err == nil || !strings.Contains(err.Error(), "give exactly one") {
		t.Errorf("two faults: %v, want a refusal", err)
	}
}

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
	m := &Study{dir: "/s", mf: Settings{Resolution: 50 * time.Millisecond}, param: Param{Name: "pause", Kind: Duration}}
	res := Result{Points: []Point{
		{Value: 900 * ms, Label: "900ms", Trials: []Trial{
			{Run: "/s/runs/a", Applied: 940 * ms, Measured: true},  // within 50 ms
			{Run: "/s/runs/b", Applied: 1012 * ms, Measured: true}, // 112 ms long
			{Run: "/s/runs/c"}, // not measured
		}},
		{Value: 1000 * ms, Label: "1s", Trials: []Trial{
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
// one node states none. Redlock is known by the fact its impl registers
// (impls.Impl.Majority), not by its name.
func TestStatedBoundOfTargetsIsRedlocksQuorum(t *testing.T) {
	for _, c := range []struct {
		impl  string
		label string
	}{{"redlock", "3"}, {"redis-set-nx-px", ""}} {
		m := majorityStudy(t, c.impl, Param{Name: "targets", Kind: Count})
		b := m.bound()
		switch {
		case c.label == "" && b != nil:
			t.Errorf("%s: stated bound %+v, want none", c.impl, *b)
		case c.label != "" && (b == nil || b.Label != c.label || b.Value != 3):
			t.Errorf("%s: stated bound %+v, want %s", c.impl, b, c.label)
		}
	}
}

// TestStatedBoundOfRedlocksPauseIsItsValidity: a Redlock's stated bound
// for a pause is its validity, with the drift allowance its impl states
// (TTL × 0.01 + 2ms), and for a clock bump that allowance; a plain lease
// keeps its whole TTL and states nothing for a clock bump.
func TestStatedBoundOfRedlocksPauseIsItsValidity(t *testing.T) {
	for _, c := range []struct {
		impl, param, rule string
	}{
		{"redlock-3", "pause", "Redlock's validity less the time from the acquire to the pause: TTL − elapsed − (TTL × 0.01 + 2ms) − gap = 1s − 0s − 12ms − 0s"},
		{"redlock", "clock-bump", "Redlock's drift allowance, TTL × 0.01 + 2ms = 12ms: its model assumes no clock moves more"},
		{"redis-set-nx-px", "pause", "the lease less the time from the acquire to the pause: TTL − gap = 1s − 0s"},
		{"redis-set-nx-px", "clock-bump", ""},
	} {
		m := majorityStudy(t, c.impl, Param{Name: c.param, Kind: Duration})
		m.cfg.TTL = time.Second
		got := ""
		if b := m.bound(); b != nil {
			got = b.Rule
		}
		if got != c.rule {
			t.Errorf("%s, %s: stated bound %q, want %q", c.impl, c.param, got, c.rule)
		}
	}
}

// TestStatedBoundOfAKubernetesLeaseIsItsDurationLessItsRenewal: a Lease
// that the contenders judge is safe from a pause while the pause is
// shorter than its duration less the time since the holder's last
// renewal, which came at most one renewal period before the pause:
// client-go's RetryPeriod (2/15 of the LeaseDuration, or its param), the
// hand-written lock's TTL/3; and from the gap when the pause comes sooner.
func TestStatedBoundOfAKubernetesLeaseIsItsDurationLessItsRenewal(t *testing.T) {
	for _, c := range []struct {
		impl   string
		ttl    time.Duration
		gap    time.Duration
		params map[string]string
		value  time.Duration
	}{
		{"k8s-leader-election", 15 * time.Second, 5 * time.Second, nil, 13 * time.Second},
		{"k8s-leader-election", 1500 * time.Millisecond, time.Second, nil, 2*time.Second - 266666666},
		{"k8s-leader-election", 3 * time.Second, 100 * time.Millisecond, nil, 2900 * time.Millisecond},
		{"k8s-leader-election", 3 * time.Second, time.Second, map[string]string{"retry-period": "500ms"}, 2500 * time.Millisecond},
		{"k8s-lease-cas", 3 * time.Second, 2 * time.Second, nil, 2 * time.Second},
	} {
		m := majorityStudy(t, c.impl, Param{Name: "pause", Kind: Duration})
		i, _ := impls.Lookup(c.impl)
		m.renewal, m.gaps = i.Renewal, []time.Duration{c.gap}
		m.cfg.TTL, m.cfg.ImplParams = c.ttl, c.params
		b := m.bound()
		if b == nil || time.Duration(b.Value) != c.value || !strings.HasPrefix(b.Rule, "the Lease's duration less") {
			t.Errorf("%s ttl %s gap %s %v: stated bound %+v, want %s", c.impl, c.ttl, c.gap, c.params, b, c.value)
		}
	}
}

// TestStatedBoundOfAClockRateIsClientGosRatio: for a Lease that
// contenders judge, the slowest clock rate a holder may have is
// RenewDeadline / LeaseDuration, the inverse of the ratio client-go's
// package doc tolerates; a lock that says nothing of how long its holder
// goes on states none.
func TestStatedBoundOfAClockRateIsClientGosRatio(t *testing.T) {
	for _, c := range []struct {
		impl   string
		ttl    time.Duration
		params map[string]string
		label  string
	}{
		{"k8s-leader-election", 15 * time.Second, nil, "0.667"},
		{"k8s-leader-election", 3 * time.Second, nil, "0.667"},
		{"k8s-leader-election", 3 * time.Second, map[string]string{"renew-deadline": "2500ms"}, "0.833"},
		{"k8s-lease-cas", 3 * time.Second, nil, ""},
	} {
		m := majorityStudy(t, c.impl, Param{Name: "clock-rate", Kind: Factor, BreaksLow: true})
		i, _ := impls.Lookup(c.impl)
		m.renewal, m.stopsAfter = i.Renewal, i.StopsAfter
		m.cfg.TTL, m.cfg.ImplParams = c.ttl, c.params
		b := m.bound()
		switch {
		case c.label == "" && b != nil:
			t.Errorf("%s: stated bound %+v, want none", c.impl, b)
		case c.label != "" && (b == nil || b.Label != c.label || !strings.Contains(b.Rule, "LeaseDuration / RenewDeadline")):
			t.Errorf("%s ttl %s %v: stated bound %+v, want %s", c.impl, c.ttl, c.params, b, c.label)
		}
	}
}

// TestFactorParam: a rate prints as the rate, rounds to the thousandth,
// and parses from its text.
func TestFactorParam(t *testing.T) {
	p := Param{Name: "clock-rate", Kind: Factor, From: 300, To: 950}
	if got := p.Format(666.6); got != "0.667" {
		t.Errorf("Format(666.6) = %q, want 0.667", got)
	}
	if got := p.round(512.4); got != 512 {
		t.Errorf("round(512.4) = %v, want 512", got)
	}
	if v, err := parseMagnitude(Factor, "0.85"); err != nil || v != 850 {
		t.Errorf("parseMagnitude(0.85) = %v, %v; want 850", v, err)
	}
	// The bisection of a rate stops at 0.01, whatever --resolution says
	// of durations.
	m := &Study{param: p, mf: Settings{Resolution: 50 * time.Millisecond}}
	if got := p.Format(m.Resolution()); got != "0.01" {
		t.Errorf("a rate's resolution prints %q, want 0.01", got)
	}
}

// majorityStudy is a study of the registered impl called name varying p,
// with the facts its Prepare would take from the impl.
func majorityStudy(t *testing.T, name string, p Param) *Study {
	t.Helper()
	i, err := impls.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	m := &Study{param: p, backend: i.Backend, majority: i.Majority}
	m.cfg.Impl = name
	return m
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
		m := &Study{param: Param{Name: "pause", Kind: Duration}, backend: c.backend}
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
		t    Trial
		want bool
	}{
		{"held, 196ms of 800ms", Trial{Applied: 196 * ms, Measured: true}, true},
		{"held, 51ms short", Trial{Applied: 749 * ms, Measured: true}, true},
		{"held, 50ms short", Trial{Applied: 750 * ms, Measured: true}, false},
		{"held, stretched", Trial{Applied: 900 * ms, Measured: true}, false},
		{"broke, 196ms of 800ms", Trial{Applied: 196 * ms, Measured: true, Failed: true}, false},
		{"not measured", Trial{}, false},
		{"already unusable", Trial{Applied: 196 * ms, Measured: true, Unusable: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := cutShort(c.t, 800*ms, res); got != c.want {
				t.Errorf("cutShort = %v, want %v", got, c.want)
			}
		})
	}
}
