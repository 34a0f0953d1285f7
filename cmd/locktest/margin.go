package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/margin"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// marginFlags are the settings of `locktest margin` beyond a run's own.
type marginFlags struct {
	vary           string
	trials, grid   int
	resolution, at time.Duration
	budget         time.Duration
}

// varied are the parameters --vary takes: the fault magnitudes (each a
// setting the fault reads), the lease, and how many nodes a fault hits.
var varied = map[string]margin.Kind{
	"pause": margin.Duration, "down": margin.Duration, "window": margin.Duration,
	"clock-bump": margin.Duration, "delay": margin.Duration, "ttl": margin.Duration,
	"targets": margin.Count,
}

// breaksLow are the parameters whose small values break a lock: a short
// lease, and a node restarted soon after it was killed.
var breaksLow = []string{"ttl", "down"}

func newMarginCmd() *cobra.Command {
	rf := &runFlags{cfg: run.DefaultConfig()}
	mf := &marginFlags{}
	c := &cobra.Command{
		Use:   "margin",
		Short: "Find how large a fault (or how short a lease) breaks a lock: the boundary as an interval, beside the lock's stated bound",
		Long: `margin searches for the boundary of one fault magnitude or lock setting,
--vary NAME=FROM..TO: a pause, a node's time down, a partition's window, a
clock jump, a delay, the TTL, or how many nodes a fault hits (targets). Every
run injects one pinned fault --at its offset (no random choice), so that the
value varied is the only thing that changes. It runs --trials trials at
--grid evenly spaced values of the range, then bisects between the last value
at which no trial failed and the first at which one did, until the bracket is
--resolution wide. A trial fails when its run finds a safety violation (any
checker but liveness); a run whose fault did not go in, or that tested
nothing, is run again and not counted.

It prints the boundary as an interval ("breaks at pause ≥ 944ms (between
938ms, 0 of 5 failed, and 950ms, 2 of 5 failed)") and, beside it, the bound
the lock itself states: the TTL less the time from the acquire to the pause
for a lease, Redlock's validity (TTL − elapsed − (TTL × 0.01 + 2ms)), the
ZooKeeper session timeout, the etcd lease TTL, the TTL for a restart without
persistence. Every trial's run is kept in STORE/<name>.margin/<time>/,
with margin.json and margin.html (the violation rate against the value, with
95% Wilson intervals, the bracket and the stated bound, on one chart).

Exit codes: 0 when the search ended (a boundary found, or none in the
range, which it says with the farthest value that held); 3 when --budget
ran out or it was interrupted; 2 for bad input and a run that could not
start.`,
		Example: `  locktest margin --impl redis-set-nx-px --faults pause-client --vary pause=0s..3s --ttl 1s
  locktest margin --impl redlock --faults clock-bump --vary clock-bump=0s..5s --target clock-bump=n1
  locktest margin --impl redlock --faults kill-node --persistence off --vary down=0s..3s
  locktest margin --impl redis-set-nx-px --faults pause-client --pause 1s --vary ttl=200ms..3s`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := prepareMargin(cmd.Flags(), rf, *mf)
			if err != nil {
				return err
			}
			if err := m.makeDir(); err != nil {
				return err
			}
			return m.run(cmd.Context(), cmd.OutOrStdout(), rf.quiet)
		},
	}
	defineMarginFlags(c, rf, mf)
	return c
}

// defineMarginFlags declares the flags of `locktest margin`: a run's own
// and the search's.
func defineMarginFlags(c *cobra.Command, rf *runFlags, mf *marginFlags) {
	rf.define(c)
	f := c.Flags()
	f.StringVar(&mf.vary, "vary", "", "the one parameter to vary, NAME=FROM..TO: "+strings.Join(slices.Sorted(maps.Keys(varied)), ", "))
	f.IntVar(&mf.trials, "trials", 5, "counted trials at each value")
	f.IntVar(&mf.grid, "grid", 5, "evenly spaced values of the range the coarse pass runs (both ends included)")
	f.DurationVar(&mf.resolution, "resolution", 50*time.Millisecond, "the bisection stops at a bracket this narrow (for targets: neighbouring counts)")
	f.DurationVar(&mf.at, "at", time.Second, "when the fault goes in, from the start of the workload")
	f.DurationVar(&mf.budget, "budget", time.Hour, "wall time after which no more runs start (0: none)")
	for _, n := range []string{"vary", "trials", "grid", "resolution", "at", "budget"} {
		_ = f.SetAnnotation(n, groupAnnotation, []string{"Margin"})
	}
	// The spelling --fault NAME is --faults NAME.
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "fault" {
			return "faults"
		}
		return pflag.NormalizedName(name)
	})
}

// marginSearch is one search's settings and state.
type marginSearch struct {
	cfg      run.Config
	mf       marginFlags
	fault    string
	parts    []string // the fault's parts, in order: one, or a combined fault's (a+b)
	readers  []string // the parts that read the varied setting (none for ttl)
	param    margin.Param
	settings map[string]string   // the settings its parts read, by flag name
	pins     map[string][]string // each part's pins, from --target
	name     string              // the search's name in the store
	// lock names what the search tests: the impl, or the external
	// client's label (--client); backend is the lock service it runs
	// against (impls.Impl.Backend).
	lock, backend string
	header        func() // prints the search's header, until the first run started
	dir           string // the search's folder
	started       time.Time
	// gaps are the measured times from a paused holder's acquire to its
	// pause, and elapsed the acquires' durations, for the stated bound.
	gaps, elapsed []time.Duration
}

// prepareMargin checks the flags of a margin search and returns it, with
// no folder made yet: the run's own settings as `locktest run` checks them
// (run.Config.Prepared), then the search's.
func prepareMargin(f changer, rf *runFlags, mf marginFlags) (*marginSearch, error) {
	if mf.vary == "" {
		return nil, usageError{errors.New("--vary NAME=FROM..TO is required: the one parameter to vary")}
	}
	name, rng, ok := strings.Cut(mf.vary, "=")
	kind, known := varied[name]
	if !ok || !known {
		return nil, usageError{fmt.Errorf("--vary %q: want NAME=FROM..TO with NAME one of %s", mf.vary, strings.Join(slices.Sorted(maps.Keys(varied)), ", "))}
	}
	fromS, toS, ok := strings.Cut(rng, "..")
	if !ok {
		return nil, usageError{fmt.Errorf("--vary %s: the range %q is not FROM..TO", name, rng)}
	}
	from, err1 := parseMagnitude(kind, fromS)
	to, err2 := parseMagnitude(kind, toS)
	if err := errors.Join(err1, err2); err != nil {
		return nil, usageError{fmt.Errorf("--vary %s: %v", name, err)}
	}
	if !(from < to) || from < 0 {
		return nil, usageError{fmt.Errorf("--vary %s: the range %s..%s must go up from 0 or more", name, fromS, toS)}
	}
	switch {
	case mf.trials < 1:
		return nil, usageError{fmt.Errorf("--trials must be at least 1, got %d", mf.trials)}
	case mf.grid < 2:
		return nil, usageError{fmt.Errorf("--grid must be at least 2, got %d", mf.grid)}
	case mf.resolution <= 0:
		return nil, usageError{fmt.Errorf("--resolution must be positive, got %v", mf.resolution)}
	case mf.at < 0:
		return nil, usageError{fmt.Errorf("--at must not be negative, got %v", mf.at)}
	case mf.budget < 0:
		return nil, usageError{fmt.Errorf("--budget must not be negative, got %v", mf.budget)}
	}
	cfg, err := rf.config(f)
	if err != nil {
		return nil, err
	}
	given := ""
	if f.Changed("name") {
		given = cfg.Name
	}
	if cfg, err = cfg.Prepared(); err != nil {
		return nil, usageError{err}
	}
	if cfg.Plan != nil {
		return nil, usageError{errors.New("--schedule: margin makes its own schedule of one pinned fault; give --faults")}
	}
	if len(cfg.Faults) != 1 {
		return nil, usageError{fmt.Errorf("--faults %s: margin varies one fault (a combined fault a+b counts as one): give exactly one", orNone(cfg.Faults))}
	}
	fault := cfg.Faults[0]
	parts := strings.Split(fault, "+")
	var reads, readers []string
	for _, p := range parts {
		spec, _ := nemesis.Lookup(p)
		for _, st := range spec.Settings {
			if !slices.Contains(reads, st) {
				reads = append(reads, st)
			}
		}
		if slices.Contains(spec.Settings, name) {
			readers = append(readers, p)
		}
	}
	switch {
	case name == "targets" && len(parts) > 1:
		return nil, usageError{fmt.Errorf("--vary targets: the parts of %s hit different things; vary the targets of one fault", fault)}
	case name != "ttl" && name != "targets" && len(readers) == 0:
		return nil, usageError{fmt.Errorf("--vary %s: %s does not read it (it reads %s)", name, fault, strings.Join(reads, ", "))}
	}
	if name != "targets" && f.Changed(name) {
		return nil, usageError{fmt.Errorf("--%s and --vary %s=… both set it: give one", name, name)}
	}
	info, err := cfg.ImplInfo()
	if err != nil {
		return nil, usageError{err}
	}
	m := &marginSearch{cfg: cfg, mf: mf, fault: fault, parts: parts, readers: readers, settings: map[string]string{}, pins: map[string][]string{},
		lock: info.Name, backend: info.Backend,
		name:  cmp.Or(given, info.Name+"-"+fault+"-"+name),
		param: margin.Param{Name: name, Kind: kind, From: from, To: to, BreaksLow: slices.Contains(breaksLow, name)}}
	for _, s := range reads {
		st, ok := run.SettingNamed(s)
		if !ok {
			return nil, fmt.Errorf("margin: %s reads %s, which is no setting", fault, s)
		}
		m.settings[s] = st.Field(&m.cfg).String()
	}
	for _, p := range parts {
		m.pins[p] = cfg.Targets[p]
	}
	if name == "targets" {
		if n := nodesOf(cfg); to > float64(n) {
			return nil, usageError{fmt.Errorf("--vary targets=%s: %s has %d nodes", rng, cfg.Impl, n)}
		}
		if len(m.pins[fault]) > 0 {
			return nil, usageError{fmt.Errorf("--target %s=… and --vary targets=… both say what it hits: give one", fault)}
		}
	}
	// Every value's schedule must make a run `locktest run` accepts.
	for _, v := range []float64{from, to} {
		plan, c, err := m.plan(v)
		if err == nil {
			c.Plan = &plan
			_, err = c.Prepared()
		}
		if err != nil {
			return nil, usageError{fmt.Errorf("--vary %s=%s: %v", name, m.param.Format(v), err)}
		}
	}
	return m, nil
}

// removeDir removes the search's folder, and its name's folder when that
// is left empty: what a search whose first run could not start made.
func (m *marginSearch) removeDir() {
	os.RemoveAll(m.dir)
	os.Remove(filepath.Dir(m.dir))
}

// makeDir makes the search's folder in the store.
func (m *marginSearch) makeDir() error {
	m.started = time.Now()
	dir, err := runstore.MakeRunDir(m.cfg.StoreDir, m.name+".margin", m.started)
	if err != nil {
		return usageError{fmt.Errorf("--store: %v", err)}
	}
	m.dir = dir
	return nil
}

// nodesOf is how many nodes cfg's impl runs.
func nodesOf(cfg run.Config) int {
	info, _ := cfg.ImplInfo()
	return info.Nodes
}

// parseMagnitude parses one end of a --vary range.
func parseMagnitude(k margin.Kind, s string) (float64, error) {
	if k == margin.Count {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number", s)
		}
		return float64(n), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 1.5s)", s)
	}
	return float64(d), nil
}

// plan is the pinned schedule of value v: the one fault at --at, with v
// put in. A combined fault's parts go in --stagger apart from --at, as a
// run injects them; each stays its own length, and each but the last
// stays at least until the last has healed (a run keeps them at least
// until the last went in; a replay with that bound would race the last
// part's injection), so that the last part, whose setting a search of a
// combined fault usually varies (claim 6's restart delay after a kill
// during a partition), happens inside the others.
func (m *marginSearch) plan(v float64) (nemesis.Plan, run.Config, error) {
	cfg := m.cfg
	label := m.param.Format(v)
	settings := maps.Clone(m.settings)
	switch m.param.Name {
	case "ttl":
		if err := cfg.Set("ttl", label); err != nil {
			return nemesis.Plan{}, cfg, err
		}
	case "targets":
	default:
		settings[m.param.Name] = label
	}
	// A fault stays its own length: a pause its pause, a kill its time
	// down, the rest their window. A fault that waits for its moment
	// before it hits (nemesis.Spec.WaitsWindow: power-loss, kill-on-grant)
	// may begin up to its window late: waits[i].
	lasts := make([]time.Duration, len(m.parts))
	waits := make([]time.Duration, len(m.parts))
	partSettings := make([]map[string]string, len(m.parts))
	for i, p := range m.parts {
		spec, _ := nemesis.Lookup(p)
		partSettings[i] = map[string]string{}
		for _, st := range spec.Settings {
			partSettings[i][st] = settings[st]
		}
		durs := map[string]time.Duration{}
		for _, st := range heldFor {
			if v, ok := partSettings[i][st]; ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					return nemesis.Plan{}, cfg, fmt.Errorf("margin: %s %q: %v", st, v, err)
				}
				durs[st] = d
			}
		}
		lasts[i] = nemesis.Window.Of(cfg.FaultSettings)
		for _, st := range heldFor {
			if d, ok := durs[st]; ok {
				lasts[i] = d
				break
			}
		}
		if spec.WaitsWindow {
			waits[i] = durs["window"]
		}
	}
	last := len(m.parts) - 1
	var ends time.Duration
	for i := range m.parts {
		if i < last {
			lasts[i] = max(lasts[i], time.Duration(last-i)*cfg.Stagger+waits[last]+lasts[last])
		}
		ends = max(ends, m.mf.at+time.Duration(i)*cfg.Stagger+waits[i]+lasts[i])
	}
	// The run lasts until the fault has healed, and its quiet time after.
	need := ends + cfg.Quiet + time.Second
	if cfg.Duration < need {
		cfg.Duration = need.Round(time.Second)
	}
	plan := nemesis.Plan{SchemaVersion: nemesis.PlanSchemaVersion, Seed: cfg.Seed, Workload: cfg.WorkloadValues()}
	switch {
	case v == 0 && !m.param.BreaksLow:
		// A fault of no size is no fault: the value 0 is the run without
		// it. (A lease of 0, or a node restarted at once, is the worst
		// case of its kind, not none.)
	case m.param.Name == "targets":
		// One fault per node hit, n1 up, all at --at: a fault hits one
		// node at a time.
		for i := range int(v) {
			plan.Faults = append(plan.Faults, nemesis.PlannedFault{At: m.mf.at, Fault: m.fault, Settings: maps.Clone(partSettings[0]),
				Pins: []string{fmt.Sprintf("n%d", i+1)}, Lasts: lasts[0], Outcome: string(history.OK)})
		}
	default:
		for i, p := range m.parts {
			plan.Faults = append(plan.Faults, nemesis.PlannedFault{At: m.mf.at + time.Duration(i)*cfg.Stagger, Fault: p, Settings: partSettings[i],
				Pins: slices.Clone(m.pins[p]), Lasts: lasts[i], Outcome: string(history.OK)})
		}
	}
	cfg.Faults = nil
	cfg.Targets = nil
	return plan, cfg, nil
}

// trial runs value v once.
func (m *marginSearch) trial(ctx context.Context, v float64, i int) (margin.Trial, error) {
	plan, cfg, err := m.plan(v)
	if err != nil {
		return margin.Trial{}, err
	}
	label := m.param.Format(v)
	runs := filepath.Join(m.dir, "runs")
	path := filepath.Join(m.dir, "schedules", m.param.Name+"-"+label+".json")
	if _, err := os.Stat(path); err != nil {
		if err := writePlan(path, plan); err != nil {
			return margin.Trial{}, err
		}
	}
	cfg.Schedule, cfg.Plan = path, &plan
	cfg.StoreDir, cfg.Name, cfg.Expect = runs, m.param.Name+"-"+label, "invalid"
	cfg.StopOnViolation = true
	cfg.Command = "locktest run --schedule " + path + " --stop-on-violation"
	cfg.Logger = nil
	o, err := run.Run(ctx, cfg)
	if o == nil {
		return margin.Trial{}, err
	}
	if m.header != nil {
		m.header()
		m.header = nil
	}
	if ctx.Err() != nil {
		return margin.Trial{}, ctx.Err()
	}
	t := margin.Trial{Run: o.Dir, Verdict: verdictWord(o.Results.Valid)}
	for _, c := range o.Results.Checkers {
		if c.Valid == checker.Invalid && c.Checker != "liveness" {
			t.Failed = true
		}
	}
	h, herr := o.History()
	if herr != nil {
		return t, fmt.Errorf("margin: %s: %w", o.Dir, herr)
	}
	injects := map[string]bool{}
	for _, p := range m.parts {
		if k, ok := history.FaultNamed(p); ok {
			injects[k.InjectOp()] = true
		}
	}
	applied := 0
	for _, op := range h {
		if op.IsNemesis() && injects[op.F] && op.Type == history.OK {
			applied++
		}
	}
	switch {
	case t.Failed:
	case applied < len(plan.Faults):
		t.Unusable, t.Why = true, fmt.Sprintf("%d of %d faults went in", applied, len(plan.Faults))
	case len(o.Results.Problems) > 0:
		t.Unusable, t.Why = true, o.Results.Problems[0]
	}
	if applied > 0 {
		m.measure(h)
	}
	if slices.Contains(heldFor, m.param.Name) && len(m.readers) > 0 {
		// The last part that reads it: a combined fault's varied part.
		if k, ok := history.FaultNamed(m.readers[len(m.readers)-1]); ok {
			if d, ok := appliedSpan(h, k); ok {
				t.Applied, t.Measured = float64(d), true
			}
		}
	}
	if cutShort(t, v, m.mf.resolution) {
		// A fault that went in late (a pause waiting for its point while
		// the clients were slow to start) is cut short by the end of the
		// fault phase: the run that held tested a smaller fault than the
		// value, and is run again (under stress-ng at 08f6f6f a pause of
		// 800ms was applied as 196ms). A run that broke with less than
		// planned still broke, and counts.
		t.Unusable, t.Why = true, fmt.Sprintf("its %s was applied as %s of the %s planned (it went in late, and the fault phase's end cut it short)",
			m.param.Name, m.param.Format(t.Applied), label)
	}
	return t, nil
}

// cutShort says whether t held with its fault applied more than
// resolution shorter than v, the value planned: such a run tested a
// smaller fault than v. A failed run, an unusable one, and one whose
// fault's length was not measured are never cut short.
func cutShort(t margin.Trial, v float64, resolution time.Duration) bool {
	return t.Measured && !t.Failed && !t.Unusable && v-t.Applied > float64(resolution)
}

// heldFor are the parameters that are how long a fault holds, which a
// trial's history measures as applied.
var heldFor = []string{"pause", "down", "window"}

// appliedSpan is how long the first fault of kind k in h held: from its
// injection's ok to the next ok of its heal (for a node's time down, that
// includes its restart until it answers); false when h has no such pair
// (the fault did not go in, or was never healed).
func appliedSpan(h history.History, k history.FaultKind) (time.Duration, bool) {
	var from int64
	in := false
	for _, op := range h {
		if !op.IsNemesis() || op.Type != history.OK {
			continue
		}
		switch {
		case !in && op.F == k.InjectOp():
			from, in = op.Time, true
		case in && op.F == k.Heal:
			return time.Duration(op.Time - from), true
		}
	}
	return 0, false
}

// relRun is a trial's run folder relative to the search's, as margin.json
// names it; run itself when it lies elsewhere.
func (m *marginSearch) relRun(run string) string {
	rel, err := filepath.Rel(m.dir, run)
	if err != nil {
		return run
	}
	return rel
}

// offPlan lists the trials of res whose applied magnitude differs from
// the value planned by more than the search's resolution, each as
// "planned 900ms, applied 1.012s (runs/…)", farthest first.
func (m *marginSearch) offPlan(res margin.Result) []string {
	type off struct {
		by   float64
		line string
	}
	var offs []off
	for _, p := range res.Points {
		for _, t := range p.Trials {
			by := math.Abs(t.Applied - p.Value)
			if !t.Measured || by <= float64(m.mf.resolution) {
				continue
			}
			offs = append(offs, off{by, fmt.Sprintf("planned %s, applied %s (%s)", p.Label, m.param.Format(t.Applied), m.relRun(t.Run))})
		}
	}
	slices.SortStableFunc(offs, func(a, b off) int { return cmp.Compare(b.by, a.by) })
	lines := make([]string, len(offs))
	for i, o := range offs {
		lines[i] = o.line
	}
	return lines
}

// measure notes, for each pause of a holder in h, the time from its
// acquire to the pause, and each acquire's duration.
func (m *marginSearch) measure(h history.History) {
	lastAcq := map[int]history.Op{}
	invoked := map[int]int64{}
	for _, op := range h {
		switch {
		case op.F == history.Acquire && op.Type == history.Invoke:
			invoked[op.Process] = op.Time
		case op.F == history.Acquire && op.Type == history.OK:
			lastAcq[op.Process] = op
			if t0, ok := invoked[op.Process]; ok {
				m.elapsed = append(m.elapsed, time.Duration(op.Time-t0))
			}
		case op.IsNemesis() && op.F == "pause-client" && op.Type == history.OK:
			for _, tg := range op.Value.Targets {
				p, err := strconv.Atoi(strings.TrimPrefix(tg, "p"))
				if a, ok := lastAcq[p]; err == nil && ok {
					m.gaps = append(m.gaps, time.Duration(op.Time-a.Time))
				}
			}
		}
	}
}

// median of ds, 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

// bound is the lock's stated bound for the parameter varied, nil when it
// states none.
func (m *marginSearch) bound() *reports.MarginBound {
	ttl := m.cfg.TTL
	gap := median(m.gaps).Round(time.Millisecond)
	el := median(m.elapsed).Round(time.Millisecond)
	// A lock's bound comes from the service it locks on: a lease on Redis
	// and etcd, a session on ZooKeeper, none stated for a database's
	// locks. Redlock is known by its impl's name (its backend is redis);
	// an external client is never taken for it.
	redlock := m.cfg.Client == "" && strings.HasPrefix(m.cfg.Impl, "redlock")
	drift := ttl/100 + 2*time.Millisecond
	lease := m.backend == "etcd" || strings.HasPrefix(m.backend, "redis")
	zk := m.backend == "zookeeper"
	mk := func(d time.Duration, rule string) *reports.MarginBound {
		return &reports.MarginBound{Value: float64(d), Label: d.String(), Rule: rule}
	}
	switch m.param.Name {
	case "pause":
		switch {
		case redlock:
			return mk(ttl-gap-el-drift, fmt.Sprintf("Redlock's validity less the time from the acquire to the pause: TTL − elapsed − (TTL × 0.01 + 2ms) − gap = %s − %s − %s − %s", ttl, el, drift, gap))
		case lease:
			return mk(ttl-gap, fmt.Sprintf("the lease less the time from the acquire to the pause: TTL − gap = %s − %s", ttl, gap))
		case zk:
			return mk(ttl, fmt.Sprintf("the session timeout, %s", ttl))
		}
	case "ttl":
		pause, err := time.ParseDuration(m.settings["pause"])
		if err != nil {
			return nil
		}
		switch {
		case redlock:
			return mk(pause+gap+el+drift, fmt.Sprintf("the lease must outlast the pause, the time from the acquire to it, the acquire and Redlock's drift allowance: %s + %s + %s + %s", pause, gap, el, drift))
		case lease:
			return mk(pause+gap, fmt.Sprintf("the lease must outlast the pause and the time from the acquire to it: %s + %s", pause, gap))
		case zk:
			return mk(pause, fmt.Sprintf("the session timeout must outlast the pause, %s", pause))
		}
	case "down":
		if redlock {
			return mk(ttl, fmt.Sprintf("antirez's delayed restart: a node without persistence restarted after at least the TTL, %s, cannot have lost a live key", ttl))
		}
	case "targets":
		if redlock {
			n := nodesOf(m.cfg)
			q := n/2 + 1
			return &reports.MarginBound{Value: float64(q), Label: strconv.Itoa(q),
				Rule: fmt.Sprintf("Redlock's quorum: a fault on a minority of its %d nodes cannot let two clients each hold a majority; %d nodes can", n, q)}
		}
	case "clock-bump":
		if redlock {
			return mk(drift, fmt.Sprintf("Redlock's drift allowance, TTL × 0.01 + 2ms = %s: its model assumes no clock moves more", drift))
		}
	}
	return nil
}

// run runs the search and writes its results.
func (m *marginSearch) run(ctx context.Context, out io.Writer, quiet bool) error {
	// The header comes with the first run that started: a search whose
	// first run cannot start prints nothing but its error.
	resolution := m.param.Format(float64(m.mf.resolution))
	if m.param.Kind == margin.Count {
		resolution = "neighbouring counts"
	}
	m.header = func() {
		fmt.Fprintf(out, "margin of %s under %s, varying %s from %s to %s: %d trials at %d values, then bisection to %s\n", m.lock, m.fault,
			m.param.Name, m.param.Format(m.param.From), m.param.Format(m.param.To), m.mf.trials, m.mf.grid, resolution)
		fmt.Fprintf(out, "  runs in %s\n", m.dir)
	}
	opt := margin.Options{Grid: m.mf.grid, Trials: m.mf.trials, Resolution: float64(m.mf.resolution)}
	if m.param.Kind == margin.Count {
		opt.Resolution = 1
	}
	if m.mf.budget > 0 {
		opt.Deadline = m.started.Add(m.mf.budget)
	}
	opt.Progress = func(p margin.Point) {
		if !quiet {
			how := "grid"
			if p.Bisect {
				how = "bisect"
			}
			fmt.Fprintf(out, "  %-6s %s %-8s %d of %d failed  (95%% CI %s–%s)  [%s]\n", how, m.param.Name, p.Label, p.Failures, p.Counted(),
				reports.Percent(p.Low), reports.Percent(p.High), time.Since(m.started).Round(time.Second))
		}
	}
	res, serr := margin.Search(ctx, m.param, m.trial, opt)
	if serr != nil && res.Runs == 0 && ctx.Err() == nil && !errors.Is(serr, margin.ErrBudget) {
		m.removeDir()
		return usageError{serr}
	}
	doc := m.document(res)
	doc.BudgetSpent = errors.Is(serr, margin.ErrBudget)
	doc.Interrupted = ctx.Err() != nil
	if err := reports.WriteMargin(m.dir, doc); err != nil {
		return fmt.Errorf("margin: %w", err)
	}
	switch {
	case doc.Interrupted:
		return inconclusiveError{fmt.Errorf("margin interrupted after %d runs; %s holds what it decided", res.Runs, m.dir)}
	case serr != nil && !doc.BudgetSpent && res.Runs == 0:
		// The first run could not start (a missing server, a bad
		// inventory): the search made nothing worth keeping.
		m.removeDir()
		return usageError{serr}
	case serr != nil && !doc.BudgetSpent:
		return fmt.Errorf("margin: a run could not start: %w (what it decided is in %s)", serr, m.dir)
	}
	if n := len(doc.OffPlan); n > 0 {
		fmt.Fprintf(out, "warning: %d of %d runs applied a %s more than %s off the value planned, which the search counts at the value planned (a loaded machine stretches faults; search again on a quiet one): %s\n",
			n, res.Runs, m.param.Name, doc.Resolution, strings.Join(doc.OffPlan[:min(n, 3)], "; "))
	}
	fmt.Fprintf(out, "%s\n", doc.Summary)
	if doc.Bound != nil {
		fmt.Fprintf(out, "stated bound: %s (%s)\n", doc.Bound.Label, doc.Bound.Rule)
	}
	fmt.Fprintf(out, "report: %s\n", filepath.Join(m.dir, reports.MarginHTMLFile))
	if doc.BudgetSpent {
		return inconclusiveError{fmt.Errorf("the budget ran out after %d runs, before the bracket was %s wide", res.Runs, doc.Resolution)}
	}
	return nil
}

// document is margin.json of res.
func (m *marginSearch) document(res margin.Result) reports.Margin {
	unit := "duration"
	if m.param.Kind == margin.Count {
		unit = "count"
	}
	fixed := map[string]string{}
	plan, _, err := m.plan(m.param.From)
	if err == nil {
		maps.Copy(fixed, plan.Workload)
	}
	for k, v := range m.settings {
		if k != m.param.Name {
			fixed[k] = v
		}
	}
	delete(fixed, m.param.Name)
	doc := reports.Margin{SchemaVersion: reports.MarginSchemaVersion, Command: "locktest " + strings.Join(os.Args[1:], " "),
		Started: m.started.Format(time.RFC3339), Elapsed: time.Since(m.started).Round(time.Second).String(), Impl: m.lock, Fault: m.fault,
		Param: m.param.Name, Unit: unit, From: m.param.Format(m.param.From), To: m.param.Format(m.param.To), BreaksLow: m.param.BreaksLow,
		Settings: fixed, Trials: m.mf.trials, Grid: m.mf.grid, Resolution: m.param.Format(float64(m.mf.resolution)),
		Found: res.Found, Summary: res.Summary(), Runs: res.Runs, Points: []reports.MarginPoint{}}
	if m.param.Kind == margin.Count {
		doc.Resolution = "1"
	}
	for _, p := range res.Points {
		mp := reports.MarginPoint{Value: p.Value, Label: p.Label, Failures: p.Failures, Trials: p.Counted(), Unusable: p.Unusable,
			Rate: p.Rate, Low: p.Low, High: p.High, Bisect: p.Bisect, Runs: []reports.MarginRun{}}
		for _, t := range p.Trials {
			mr := reports.MarginRun{Run: m.relRun(t.Run), Verdict: t.Verdict, Failed: t.Failed, Unusable: t.Unusable, Why: t.Why}
			if t.Measured {
				mr.Applied = m.param.Format(t.Applied)
			}
			mp.Runs = append(mp.Runs, mr)
		}
		doc.Points = append(doc.Points, mp)
	}
	if res.Found {
		doc.Breaks = m.param.Format(res.Breaks)
		if res.HasHolds {
			doc.Holds, doc.Boundary = m.param.Format(res.Holds), m.param.Format(res.Boundary())
		}
	} else {
		doc.Reached = m.param.Format(res.Reached)
	}
	for _, v := range res.NotMonotone {
		doc.NotMonotone = append(doc.NotMonotone, m.param.Format(v))
	}
	doc.OffPlan = m.offPlan(res)
	doc.Bound = m.bound()
	return doc
}
