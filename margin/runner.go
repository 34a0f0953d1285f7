package margin

// This file is the search's real half: a Study runs each trial as a run
// of locktest (run.Run) with the value's pinned schedule, and states the
// lock's own bound beside the boundary found. The search itself
// (margin.go) stays pure: it only calls a Runner.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// Settings are the settings of a study beyond its runs' own: the flags of
// `locktest margin`.
type Settings struct {
	// Vary is the one parameter to vary, NAME=FROM..TO.
	Vary string
	// Trials is how many counted trials each value gets, Grid how many
	// evenly spaced values the coarse pass runs.
	Trials, Grid int
	// Resolution is how narrow a bracket the bisection stops at; At is
	// when the fault goes in, from the start of the workload.
	Resolution, At time.Duration
	// Budget is the wall time after which no more runs start (0: none).
	Budget time.Duration
	// Gate is the value, in the varied parameter's unit, that the lock
	// must hold at: the search fails its gate when the lock breaks on the
	// safe side of it by more than the resolution. Empty means the lock's
	// stated bound, where it states one.
	Gate string
}

// Varied are the parameters Settings.Vary takes: the fault magnitudes
// (each a setting the fault reads), the lease, and how many nodes a fault
// hits.
var Varied = map[string]Kind{
	"pause": Duration, "down": Duration, "window": Duration,
	"clock-bump": Duration, "delay": Duration, "ttl": Duration,
	"targets": Count, "clock-rate": Factor,
}

// breaksLow are the parameters whose small values break a lock: a short
// lease, and a node restarted soon after it was killed.
var breaksLow = []string{"ttl", "down", "clock-rate"}

// factorResolution is where the bisection of a rate stops (Factor, in
// thousandths): 0.01.
const factorResolution = 10

// Resolution is how narrow a bracket the study's bisection stops at, in
// its parameter's unit: --resolution, or 0.01 for a rate.
func (m *Study) Resolution() float64 {
	if m.param.Kind == Factor {
		return factorResolution
	}
	return float64(m.mf.Resolution)
}

// Study is one margin search over real runs: its settings, its folder in
// the store, and what its runs measured for the stated bound.
type Study struct {
	cfg      run.Config
	mf       Settings
	fault    string
	parts    []string // the fault's parts, in order: one, or a combined fault's (a+b)
	readers  []string // the parts that read the varied setting (none for ttl)
	param    Param
	settings map[string]string   // the settings its parts read, by flag name
	pins     map[string][]string // each part's pins, from --target
	name     string              // the search's name in the store
	// lock names what the search tests: the impl, or the external
	// client's label (--client); backend is the lock service it runs
	// against (impls.Impl.Backend).
	lock, backend string
	// majority is the lock's Majority (impls.Impl), nil for a lock not
	// granted by a majority of independent nodes.
	majority *impls.Majority
	// renewal is the lock's Renewal (impls.Impl), nil but for a lease no
	// server ends, and stopsAfter its StopsAfter.
	renewal    func(ttl time.Duration, params map[string]string) (lease, every time.Duration)
	stopsAfter func(ttl time.Duration, params map[string]string) time.Duration
	started    func() // called once, when the first run has started
	dir        string // the search's folder
	begun      time.Time
	// gaps are the measured times from a paused holder's acquire to its
	// pause, and elapsed the acquires' durations, for the stated bound.
	gaps, elapsed []time.Duration
}

// Param checks the study's own settings, and returns the parameter
// Vary names, with its range.
func (mf Settings) Param() (Param, error) {
	if mf.Vary == "" {
		return Param{}, errors.New("--vary NAME=FROM..TO is required: the one parameter to vary")
	}
	name, rng, ok := strings.Cut(mf.Vary, "=")
	kind, known := Varied[name]
	if !ok || !known {
		return Param{}, fmt.Errorf("--vary %q: want NAME=FROM..TO with NAME one of %s", mf.Vary, strings.Join(slices.Sorted(maps.Keys(Varied)), ", "))
	}
	fromS, toS, ok := strings.Cut(rng, "..")
	if !ok {
		return Param{}, fmt.Errorf("--vary %s: the range %q is not FROM..TO", name, rng)
	}
	from, err1 := parseMagnitude(kind, fromS)
	to, err2 := parseMagnitude(kind, toS)
	if err := errors.Join(err1, err2); err != nil {
		return Param{}, fmt.Errorf("--vary %s: %v", name, err)
	}
	if !(from < to) || from < 0 {
		return Param{}, fmt.Errorf("--vary %s: the range %s..%s must go up from 0 or more", name, fromS, toS)
	}
	if kind == Factor && from < 1000 && to > 1000 {
		return Param{}, fmt.Errorf("--vary %s: the range %s..%s holds 1, the real rate, which is no fault: vary below it or above it", name, fromS, toS)
	}
	switch {
	case mf.Trials < 1:
		return Param{}, fmt.Errorf("--trials must be at least 1, got %d", mf.Trials)
	case mf.Grid < 2:
		return Param{}, fmt.Errorf("--grid must be at least 2, got %d", mf.Grid)
	case mf.Resolution <= 0:
		return Param{}, fmt.Errorf("--resolution must be positive, got %v", mf.Resolution)
	case mf.At < 0:
		return Param{}, fmt.Errorf("--at must not be negative, got %v", mf.At)
	case mf.Budget < 0:
		return Param{}, fmt.Errorf("--budget must not be negative, got %v", mf.Budget)
	}
	if mf.Gate != "" {
		if _, err := parseMagnitude(kind, mf.Gate); err != nil {
			return Param{}, fmt.Errorf("--gate: %v (a value of --vary %s)", err, name)
		}
	}
	return Param{Name: name, Kind: kind, From: from, To: to, BreaksLow: slices.Contains(breaksLow, name)}, nil
}

// Prepare checks the settings of a study of the runs cfg describes (as
// `locktest run` would take them, not yet run.Config.Prepared) and
// returns it, with no folder made yet; given says whether a setting was
// given on the command line. Its errors are the user's: bad settings.
func Prepare(cfg run.Config, mf Settings, given func(name string) bool) (*Study, error) {
	param, err := mf.Param()
	if err != nil {
		return nil, err
	}
	name := param.Name
	named := ""
	if given("name") {
		named = cfg.Name
	}
	// A flag that the search overrides in every trial changes nothing,
	// and a flag that changes nothing is refused, as run refuses it.
	for _, f := range []struct{ flag, why string }{
		{"expect", "margin decides each trial itself (a trial fails when its run finds a safety violation)"},
		{"interval", "margin injects one pinned fault --at its offset, so there is no quiet time between faults"},
		{"stop-on-violation", "every trial stops soon after its first violation already"},
	} {
		if given(f.flag) {
			return nil, fmt.Errorf("--%s: %s; give no --%s", f.flag, f.why, f.flag)
		}
	}
	if cfg, err = cfg.Prepared(); err != nil {
		return nil, err
	}
	if cfg.Plan != nil {
		return nil, errors.New("--schedule: margin makes its own schedule of one pinned fault; give --faults")
	}
	if len(cfg.Faults) != 1 {
		faults := "none"
		if len(cfg.Faults) > 0 {
			faults = strings.Join(cfg.Faults, ",")
		}
		return nil, fmt.Errorf("--faults %s: margin varies one fault (a combined fault a+b counts as one): give exactly one", faults)
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
		return nil, fmt.Errorf("--vary targets: the parts of %s hit different things; vary the targets of one fault", fault)
	case name != "ttl" && name != "targets" && len(readers) == 0:
		return nil, fmt.Errorf("--vary %s: %s does not read it (it reads %s)", name, fault, strings.Join(reads, ", "))
	}
	if name != "targets" && given(name) {
		return nil, fmt.Errorf("--%s and --vary %s=… both set it: give one", name, name)
	}
	info, err := cfg.ImplInfo()
	if err != nil {
		return nil, err
	}
	m := &Study{cfg: cfg, mf: mf, fault: fault, parts: parts, readers: readers, settings: map[string]string{}, pins: map[string][]string{},
		lock: info.Name, backend: info.Backend, majority: info.Majority, renewal: info.Renewal, stopsAfter: info.StopsAfter,
		name:  cmp.Or(named, info.Name+"-"+fault+"-"+name),
		param: param}
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
		if n := nodesOf(cfg); param.To > float64(n) {
			_, rng, _ := strings.Cut(mf.Vary, "=")
			return nil, fmt.Errorf("--vary targets=%s: %s has %d nodes", rng, cfg.Impl, n)
		}
		if len(m.pins[fault]) > 0 {
			return nil, fmt.Errorf("--target %s=… and --vary targets=… both say what it hits: give one", fault)
		}
	}
	// Every value's schedule must make a run `locktest run` accepts.
	for _, v := range []float64{param.From, param.To} {
		plan, c, err := m.plan(v)
		if err == nil {
			c.Plan = &plan
			_, err = c.Prepared()
		}
		if err != nil {
			return nil, fmt.Errorf("--vary %s=%s: %v", name, m.param.Format(v), err)
		}
	}
	return m, nil
}

// removeDir removes the search's folder, and its name's folder when that
// is left empty: what a search whose first run could not start made.
func (m *Study) removeDir() {
	os.RemoveAll(m.dir)
	os.Remove(filepath.Dir(m.dir))
}

// MakeDir makes the study's folder in the store.
func (m *Study) MakeDir() error {
	m.begun = time.Now()
	dir, err := runstore.MakeRunDir(m.cfg.StoreDir, m.name+".margin", m.begun)
	if err != nil {
		return fmt.Errorf("--store: %v", err)
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
func parseMagnitude(k Kind, s string) (float64, error) {
	switch k {
	case Count:
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number", s)
		}
		return float64(n), nil
	case Factor:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x <= 0 {
			return 0, fmt.Errorf("%q is not a positive rate (e.g. 0.5)", s)
		}
		return math.Round(x * 1000), nil
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
func (m *Study) plan(v float64) (nemesis.Plan, run.Config, error) {
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
		ends = max(ends, m.mf.At+time.Duration(i)*cfg.Stagger+waits[i]+lasts[i])
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
			plan.Faults = append(plan.Faults, nemesis.PlannedFault{At: m.mf.At, Fault: m.fault, Settings: maps.Clone(partSettings[0]),
				Pins: []string{fmt.Sprintf("n%d", i+1)}, Lasts: lasts[0], Outcome: string(history.OK)})
		}
	default:
		for i, p := range m.parts {
			plan.Faults = append(plan.Faults, nemesis.PlannedFault{At: m.mf.At + time.Duration(i)*cfg.Stagger, Fault: p, Settings: partSettings[i],
				Pins: slices.Clone(m.pins[p]), Lasts: lasts[i], Outcome: string(history.OK)})
		}
	}
	cfg.Faults = nil
	cfg.Targets = nil
	return plan, cfg, nil
}

// trial runs value v once.
func (m *Study) trial(ctx context.Context, v float64, i int) (Trial, error) {
	plan, cfg, err := m.plan(v)
	if err != nil {
		return Trial{}, err
	}
	label := m.param.Format(v)
	runs := filepath.Join(m.dir, "runs")
	path := filepath.Join(m.dir, "schedules", m.param.Name+"-"+label+".json")
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return Trial{}, err
		}
		if err := runstore.WriteJSON(path, plan); err != nil {
			return Trial{}, err
		}
	}
	cfg.Schedule, cfg.Plan = path, &plan
	cfg.StoreDir, cfg.Name, cfg.Expect = runs, m.param.Name+"-"+label, "invalid"
	cfg.StopOnViolation = true
	cfg.Command = "locktest run --schedule " + path + " --stop-on-violation"
	cfg.Logger = nil
	o, err := run.Run(ctx, cfg)
	if o == nil {
		return Trial{}, err
	}
	if m.started != nil {
		m.started()
		m.started = nil
	}
	if ctx.Err() != nil {
		return Trial{}, ctx.Err()
	}
	t := Trial{Run: o.Dir, Verdict: shout(o.Results.Valid)}
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
	if cutShort(t, v, m.mf.Resolution) {
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
func cutShort(t Trial, v float64, resolution time.Duration) bool {
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
func (m *Study) relRun(run string) string {
	rel, err := filepath.Rel(m.dir, run)
	if err != nil {
		return run
	}
	return rel
}

// offPlan lists the trials of res whose applied magnitude differs from
// the value planned by more than the search's resolution, each as
// "planned 900ms, applied 1.012s (runs/…)", farthest first.
func (m *Study) offPlan(res Result) []string {
	type off struct {
		by   float64
		line string
	}
	var offs []off
	for _, p := range res.Points {
		for _, t := range p.Trials {
			by := math.Abs(t.Applied - p.Value)
			if !t.Measured || by <= float64(m.mf.Resolution) {
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
func (m *Study) measure(h history.History) {
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
func (m *Study) bound() *reports.MarginBound {
	ttl := m.cfg.TTL
	gap := median(m.gaps).Round(time.Millisecond)
	el := median(m.elapsed).Round(time.Millisecond)
	// A lock's bound comes from what its backend grants (backend.LocksOf):
	// a lease ends a TTL after its last renewal, a client session a
	// session timeout after its client went silent, and a server's session
	// states none. A lock granted by a majority of independent nodes
	// (Redlock, impls.Impl.Majority) states its validity, its quorum and
	// its drift allowance.
	redlock := m.majority != nil
	var drift time.Duration
	var driftRule string
	if redlock {
		drift, driftRule = m.majority.Drift(ttl), m.majority.DriftRule()
	}
	locks := backend.LocksOf(m.backend)
	lease, zk := locks == backend.Leases, locks == backend.ClientSessions
	contender := locks == backend.ContenderLeases && m.renewal != nil
	mk := func(d time.Duration, rule string) *reports.MarginBound {
		return &reports.MarginBound{Value: float64(d), Label: d.String(), Rule: rule}
	}
	switch m.param.Name {
	case "pause":
		switch {
		case redlock:
			return mk(ttl-gap-el-drift, fmt.Sprintf("Redlock's validity less the time from the acquire to the pause: TTL − elapsed − (%s) − gap = %s − %s − %s − %s", driftRule, ttl, el, drift, gap))
		case lease:
			return mk(ttl-gap, fmt.Sprintf("the lease less the time from the acquire to the pause: TTL − gap = %s − %s", ttl, gap))
		case zk:
			return mk(ttl, fmt.Sprintf("the session timeout, %s", ttl))
		case contender:
			// A contender takes the Lease once it has watched it unchanged
			// for its duration; the holder renewed it every `every`, so
			// its last renewal came at most min(gap, every) before the
			// pause.
			d, every := m.renewal(ttl, m.cfg.ImplParams)
			since := min(gap, every)
			return mk(d-since, fmt.Sprintf("the Lease's duration less the time from the holder's last renewal to the pause, which it renews every %s: LeaseDuration − min(gap, %s) = %s − %s", every, every, d, since))
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
	case "clock-rate":
		if contender && m.stopsAfter != nil {
			// client-go's package doc: a client tolerates a ratio of the
			// fastest to the slowest clock of about LeaseDuration /
			// RenewDeadline, so a holder's clock may run as slow as
			// RenewDeadline / LeaseDuration of its contenders'.
			d, _ := m.renewal(ttl, m.cfg.ImplParams)
			stops := m.stopsAfter(ttl, m.cfg.ImplParams)
			r := math.Round(1000 * float64(stops) / float64(d))
			return &reports.MarginBound{Value: r, Label: m.param.Format(r),
				Rule: fmt.Sprintf("the clock-rate ratio its package doc tolerates, LeaseDuration / RenewDeadline: a holder's clock may run as slow as RenewDeadline / LeaseDuration = %s / %s of its contenders'", stops, d)}
		}
	case "clock-bump":
		if redlock {
			return mk(drift, fmt.Sprintf("Redlock's drift allowance, %s = %s: its model assumes no clock moves more", driftRule, drift))
		}
	}
	return nil
}

// NotStarted is the error of a study whose first run could not start
// (a missing server, a bad inventory): it made nothing worth keeping, and
// its folder is gone.
type NotStarted struct{ Err error }

func (e NotStarted) Error() string { return e.Err.Error() }
func (e NotStarted) Unwrap() error { return e.Err }

// Dir is the study's folder, once MakeDir made it.
func (m *Study) Dir() string { return m.dir }

// Param is the parameter the study varies.
func (m *Study) Param() Param { return m.param }

// Lock is what the study tests: the impl, or the external client's label.
func (m *Study) Lock() string { return m.lock }

// Fault is the fault the study varies (a combined fault counts as one).
func (m *Study) Fault() string { return m.fault }

// Run runs the study's search and writes margin.json and margin.html into
// its folder, and returns what they hold. started is called once, when
// the first run has started; progress, when set, with every value
// decided. The error is nil when the search ended (a boundary found or
// none in the range), ErrBudget when the budget ran out, the context's
// error when it was interrupted (the document says both), NotStarted when
// the first run could not start, and any other error of a later run that
// could not start.
func (m *Study) Run(ctx context.Context, started func(), progress func(Point)) (reports.Margin, error) {
	m.started = started
	opt := Options{Grid: m.mf.Grid, Trials: m.mf.Trials, Resolution: m.Resolution(), Progress: progress}
	if m.param.Kind == Count {
		opt.Resolution = 1
	}
	if m.mf.Budget > 0 {
		opt.Deadline = m.begun.Add(m.mf.Budget)
	}
	res, serr := Search(ctx, m.param, m.trial, opt)
	if serr != nil && res.Runs == 0 && ctx.Err() == nil && !errors.Is(serr, ErrBudget) {
		m.removeDir()
		return reports.Margin{}, NotStarted{serr}
	}
	doc := m.document(res)
	doc.BudgetSpent = errors.Is(serr, ErrBudget)
	doc.Interrupted = ctx.Err() != nil
	if err := reports.WriteMargin(m.dir, doc); err != nil {
		return doc, fmt.Errorf("margin: %w", err)
	}
	switch {
	case doc.Interrupted:
		return doc, ctx.Err()
	case serr != nil && !doc.BudgetSpent:
		return doc, fmt.Errorf("margin: a run could not start: %w (what it decided is in %s)", serr, m.dir)
	}
	return doc, serr
}

// shout is a verdict as the CLI prints it: an invalid one in capitals.
func shout(v checker.Verdict) string {
	if v == checker.Invalid {
		return strings.ToUpper(reports.VerdictWord(v))
	}
	return reports.VerdictWord(v)
}

// document is margin.json of res.
func (m *Study) document(res Result) reports.Margin {
	unit := "duration"
	if m.param.Kind == Count {
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
	doc := reports.Margin{SchemaVersion: reports.MarginSchemaVersion, Command: m.cfg.Command,
		Started: m.begun.Format(time.RFC3339), Elapsed: time.Since(m.begun).Round(time.Second).String(), Impl: m.lock, Fault: m.fault,
		Param: m.param.Name, Unit: unit, From: m.param.Format(m.param.From), To: m.param.Format(m.param.To), BreaksLow: m.param.BreaksLow,
		Settings: fixed, Trials: m.mf.Trials, Grid: m.mf.Grid, Resolution: m.param.Format(float64(m.mf.Resolution)),
		Found: res.Found, Summary: res.Summary(), Runs: res.Runs, Points: []reports.MarginPoint{}}
	if m.param.Kind == Count {
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
	doc.Gate = m.gate(res, doc.Bound)
	return doc
}

// gate is the study's gate over res: --gate, else the stated bound; nil
// when it has neither.
func (m *Study) gate(res Result, bound *reports.MarginBound) *reports.MarginGate {
	tolerance := m.Resolution()
	if m.param.Kind == Count {
		tolerance = 0
	}
	g := &reports.MarginGate{Source: "stated bound", Tolerance: m.param.Format(tolerance)}
	switch {
	case m.mf.Gate != "":
		v, _ := parseMagnitude(m.param.Kind, m.mf.Gate) // checked by Param
		g.Value, g.Label, g.Source = v, m.param.Format(v), "--gate"
	case bound != nil:
		g.Value, g.Label = bound.Value, bound.Label
	default:
		return nil
	}
	g.Failed = res.Breached(g.Value, tolerance)
	side := "below"
	if m.param.BreaksLow {
		side = "above"
	}
	if g.Failed {
		g.Why = fmt.Sprintf("it broke at %s %s, %s the %s %s by more than %s", m.param.Name, m.param.Format(res.Breaks), side, g.Source, g.Label, g.Tolerance)
	}
	return g
}
