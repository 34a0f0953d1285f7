package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/history"
)

// PlanSchemaVersion is the version of the schedule file's format
// (docs/schemas/schedule.schema.json).
const PlanSchemaVersion = 1

// Plan is a run's fault schedule as data, the run's schedule.json: every
// fault it injected, at its offset from the start of the fault phase, with
// the settings it had, what it hit and how long it stayed. A seeded
// Schedule makes the plan of what it did as it runs (Schedule.Planned); a
// Schedule given a plan (Schedule.Plan, built by BuildPlan) injects exactly
// those faults again, at those offsets, and draws no fault, target or
// direction at random. A plan and a seed are two ways to say the same
// thing: a replay's own plan is what it did.
type Plan struct {
	// SchemaVersion is PlanSchemaVersion.
	SchemaVersion int `json:"schema_version"`
	// Seed and Interval are those of the seeded schedule that drew the
	// faults; ReplayOf names the plan a replay injected instead.
	Seed     int64         `json:"seed"`
	Interval time.Duration `json:"-"`
	ReplayOf string        `json:"replay_of,omitempty"`
	// Began is the history's clock when the fault phase began: what
	// ties the plan's offsets to the times of the run's history (an op at
	// history time t came at offset t − Began). 0 in files that do not
	// say.
	Began time.Duration `json:"-"`
	// Workload holds the run's own settings by flag name: what a replay
	// of the file runs with, unless its command line says otherwise.
	Workload map[string]string `json:"workload,omitempty"`
	// Faults are the injections, in the order they began.
	Faults []PlannedFault `json:"faults"`
}

// PlannedFault is one injection of a plan. A combined fault
// ("partition+kill-node") is one entry per part, each at its own offset.
type PlannedFault struct {
	// At is when the injection began, from the start of the fault phase
	// (the workload's start).
	At time.Duration
	// Fault is the registered fault's name.
	Fault string
	// Settings are the run settings the fault reads (Spec.Settings), by
	// flag name, as it had them: the magnitudes (pause, window, clock-bump,
	// loss, delay, down) and the pause point. A clock jump's drawn
	// direction is its clock-direction.
	Settings map[string]string
	// Pins are what the fault hits, as --target names them: the node
	// ("n2") or worker ("p1") it hit. A fault at a pause point hits the
	// first of its candidates to get there: its pins are those candidates,
	// none meaning every worker. Partitions have Cuts instead.
	Pins []string
	// Cuts are a partition's cuts, "n1|n2,n3,c0" (hosts on either side of
	// the bar cannot talk).
	Cuts []string
	// Hit is what the injection's op recorded it hit, and Roles the roles
	// its nodes had then, as the history has them.
	Hit   []string
	Roles map[string]string
	// Lasts is how long the fault stayed, from the end of its injection
	// to its heal.
	Lasts time.Duration
	// Healed is when its heal began, from the start of the fault phase; 0
	// when the file does not say. A replay keeps the order of heals and
	// injections it shows: a fault healed before another began is healed
	// before that one goes in, however late its own injection was.
	Healed time.Duration
	// Outcome is the injection's completion, ok, info or fail, and Error
	// its error.
	Outcome string
	Error   string
}

// plannedJSON and planJSON are the file's form of PlannedFault and Plan.
type plannedJSON struct {
	At       string            `json:"at"`
	Fault    string            `json:"fault"`
	Settings map[string]string `json:"settings,omitempty"`
	Pins     []string          `json:"pins,omitempty"`
	Cuts     []string          `json:"cuts,omitempty"`
	Hit      []string          `json:"hit,omitempty"`
	Roles    map[string]string `json:"roles,omitempty"`
	Lasts    string            `json:"lasts"`
	Healed   string            `json:"healed,omitempty"`
	Outcome  string            `json:"outcome,omitempty"`
	Error    string            `json:"error,omitempty"`
}

type planJSON struct {
	SchemaVersion int               `json:"schema_version"`
	Seed          int64             `json:"seed"`
	Interval      string            `json:"interval,omitempty"`
	ReplayOf      string            `json:"replay_of,omitempty"`
	Began         string            `json:"began,omitempty"`
	Workload      map[string]string `json:"workload,omitempty"`
	Faults        []plannedJSON     `json:"faults"`
}

// MarshalJSON writes the plan as schedule.json has it: durations as Go
// durations ("1.5s"), offsets and stays to the millisecond.
func (p Plan) MarshalJSON() ([]byte, error) {
	out := planJSON{SchemaVersion: p.SchemaVersion, Seed: p.Seed, ReplayOf: p.ReplayOf, Workload: p.Workload, Faults: []plannedJSON{}}
	if p.Interval != 0 {
		out.Interval = p.Interval.String()
	}
	if p.Began != 0 {
		out.Began = p.Began.Round(time.Millisecond).String()
	}
	for _, f := range p.Faults {
		// Milliseconds: finer would claim a precision no replay has.
		pj := plannedJSON{At: f.At.Round(time.Millisecond).String(), Fault: f.Fault, Settings: f.Settings, Pins: f.Pins,
			Cuts: f.Cuts, Hit: f.Hit, Roles: f.Roles, Lasts: f.Lasts.Round(time.Millisecond).String(), Outcome: f.Outcome, Error: f.Error}
		if f.Healed != 0 {
			pj.Healed = f.Healed.Round(time.Millisecond).String()
		}
		out.Faults = append(out.Faults, pj)
	}
	return json.Marshal(out)
}

// ReadPlan reads a schedule file. A file that is not one, an unknown
// field, a bad duration or offset, an unknown fault, an unknown setting
// or bad pins or cuts is a one-line error naming the field ("faults[2].at:
// ..."); what needs the run (do the nodes exist, can the fault be
// applied) is BuildPlan's to check.
func ReadPlan(r io.Reader) (Plan, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Plan{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in planJSON
	if err := dec.Decode(&in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Plan{}, fmt.Errorf("%s: want %s, got a JSON %s", te.Field, te.Type, te.Value)
		}
		return Plan{}, fmt.Errorf("not a schedule file: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if in.SchemaVersion != PlanSchemaVersion {
		return Plan{}, fmt.Errorf("schema_version: this locktest reads version %d, got %d", PlanSchemaVersion, in.SchemaVersion)
	}
	p := Plan{SchemaVersion: in.SchemaVersion, Seed: in.Seed, ReplayOf: in.ReplayOf, Workload: in.Workload}
	if in.Interval != "" {
		if p.Interval, err = parseOffset(in.Interval); err != nil {
			return Plan{}, fmt.Errorf("interval: %v", err)
		}
	}
	if in.Began != "" {
		if p.Began, err = parseOffset(in.Began); err != nil {
			return Plan{}, fmt.Errorf("began: %v", err)
		}
	}
	if in.Faults == nil {
		return Plan{}, fmt.Errorf("faults: missing (an empty schedule is [])")
	}
	for i, f := range in.Faults {
		at := fmt.Sprintf("faults[%d]", i)
		pf := PlannedFault{Fault: f.Fault, Settings: f.Settings, Pins: f.Pins, Cuts: f.Cuts, Hit: f.Hit, Roles: f.Roles, Outcome: f.Outcome, Error: f.Error}
		if pf.At, err = parseOffset(f.At); err != nil {
			return Plan{}, fmt.Errorf("%s.at: %v", at, err)
		}
		if pf.Lasts, err = parseOffset(f.Lasts); err != nil {
			return Plan{}, fmt.Errorf("%s.lasts: %v", at, err)
		}
		if f.Healed != "" {
			if pf.Healed, err = parseOffset(f.Healed); err != nil {
				return Plan{}, fmt.Errorf("%s.healed: %v", at, err)
			}
		}
		if err := pf.check(); err != nil {
			return Plan{}, fmt.Errorf("%s.%v", at, err)
		}
		p.Faults = append(p.Faults, pf)
	}
	if !slices.IsSortedFunc(p.Faults, func(a, b PlannedFault) int { return int(a.At - b.At) }) {
		return Plan{}, fmt.Errorf("faults: not in the order of their at")
	}
	return p, nil
}

// parseOffset reads a duration that is not negative.
func parseOffset(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case s == "":
		return 0, fmt.Errorf("missing: want a duration such as 1.5s")
	case err != nil:
		return 0, fmt.Errorf("want a duration such as 1.5s, got %q", s)
	case d < 0:
		return 0, fmt.Errorf("must not be negative, got %s", s)
	}
	return d, nil
}

// check refuses what a plan entry can never be, whatever the run: an
// unknown fault, a setting it does not read or cannot parse, pins of the
// wrong kind, cuts of a fault that makes none, cuts that do not parse.
// The error starts with the field it is about, after the entry's prefix.
func (f PlannedFault) check() error {
	s, ok := lookup(f.Fault)
	if !ok {
		return fmt.Errorf("fault: unknown fault %q (known: %s)", f.Fault, strings.Join(Names(), ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(f.Settings)) {
		fs, known := declared[name]
		if !known || !slices.Contains(s.Settings, name) {
			return fmt.Errorf("settings.%s: %s does not read it (it reads: %s)", name, f.Fault, orNone(s.Settings))
		}
		var vs Values
		err := fs.SetText(&vs, f.Settings[name])
		if err == nil {
			err = fs.Check(vs)
		}
		if err != nil {
			return fmt.Errorf("settings.%s: %v", name, err)
		}
	}
	if err := checkPinKinds(f.Fault, f.Pins); err != nil {
		return fmt.Errorf("pins: %v", err)
	}
	_, partition := shapes[f.Fault]
	if len(f.Cuts) > 0 && !partition {
		return fmt.Errorf("cuts: %s is not a partition", f.Fault)
	}
	if len(f.Cuts) > 0 && len(f.Pins) > 0 {
		return fmt.Errorf("pins: a partition with cuts takes no pins: the cuts say everything")
	}
	for _, c := range f.Cuts {
		if _, err := parseCut(c); err != nil {
			return fmt.Errorf("cuts: %v", err)
		}
	}
	switch f.Outcome {
	case "", string(history.OK), string(history.Info), string(history.Fail):
	default:
		return fmt.Errorf("outcome: want ok, info or fail, got %q", f.Outcome)
	}
	return nil
}

// FaultNames returns the faults plan injects, each once, in the order they
// first come: what a run of it must be able to apply.
func (p Plan) FaultNames() []string {
	var out []string
	for _, f := range p.Faults {
		if !slices.Contains(out, f.Fault) {
			out = append(out, f.Fault)
		}
	}
	return out
}

// planStep is a plan entry and the fault that replays it.
type planStep struct {
	PlannedFault
	f Fault
}

// PlanSteps are the faults of a plan built for a run (BuildPlan).
type PlanSteps struct {
	steps []planStep
}

// BuildPlan builds the faults of plan's entries for env: each fault with
// env's abilities, the settings it had (env's own where the entry has
// none), exactly its pins (none: any target, as the fault chooses), and
// for a partition its cuts in place of its shape. An entry that names a
// node, worker or host the run cannot have, or whose settings its fault
// refuses, is an error naming the entry ("faults[2] (kill-node at 1.5s):
// ..."); a fault the platform cannot apply is an error wrapping
// ErrUnavailable, as Build's.
func BuildPlan(plan Plan, env Env) (*PlanSteps, error) {
	var procs []int
	if env.Clients != nil {
		procs = env.Clients.Processes()
	}
	out := &PlanSteps{}
	for i, pf := range plan.Faults {
		where := fmt.Sprintf("faults[%d] (%s at %s)", i, pf.Fault, pf.At)
		if err := pf.check(); err != nil {
			return nil, fmt.Errorf("faults[%d].%v", i, err)
		}
		e := env
		for _, name := range slices.Sorted(maps.Keys(pf.Settings)) {
			_ = declared[name].SetText(&e.Settings, pf.Settings[name]) // checked above
		}
		e.Targets = nil
		if len(pf.Pins) > 0 {
			e.Targets = map[string][]string{pf.Fault: pf.Pins}
		}
		e.cuts = nil
		for _, c := range pf.Cuts {
			cut, _ := parseCut(c) // checked above
			e.cuts = append(e.cuts, cut)
		}
		if err := e.checkPins(pf.Fault, procs); err != nil {
			return nil, fmt.Errorf("%s: pins: %w", where, err)
		}
		f, err := build(pf.Fault, e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out.steps = append(out.steps, planStep{pf, f})
	}
	return out, nil
}

// planner is what a fault tells the plan of its last injection: the pins
// that would make it hit the same target again, or the cuts it made.
type planner interface{ plannedPins() []string }

type cutPlanner interface{ plannedCuts() []string }

type settingsPlanner interface {
	plannedName() string
	plannedSettings() map[string]string
}

// planRecord keeps the entries of a schedule's plan as it runs.
type planRecord struct {
	mu      sync.Mutex
	start   time.Time
	began   time.Duration // on the history's clock
	entries []PlannedFault
}

// begin notes the start of the fault phase, now, and clock's reading then.
func (r *planRecord) begin(clock history.Clock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start, r.began = time.Now(), clock.Now()
	r.entries = nil
}

// injected adds the entry of an injection of f that began at began and
// completed with v and err, and returns its index.
func (r *planRecord) injected(f Fault, began time.Time, v history.Value, err error) int {
	pf := PlannedFault{Fault: f.Name(), Hit: v.Targets, Roles: v.Roles, Outcome: string(completion(err))}
	if err != nil {
		pf.Error = err.Error()
	}
	if s, ok := f.(settingsPlanner); ok {
		pf.Fault, pf.Settings = s.plannedName(), maps.Clone(s.plannedSettings())
	}
	if c, ok := f.(cutPlanner); ok {
		pf.Cuts = slices.Clone(c.plannedCuts())
	} else if p, ok := f.(planner); ok {
		pf.Pins = slices.Clone(p.plannedPins())
	}
	if _, reads := pf.Settings["clock-direction"]; reads && len(v.Targets) == 1 {
		// The direction a clock fault drew is its sign: "n3+4s".
		if i := strings.LastIndexAny(v.Targets[0], "+-"); i > 0 {
			pf.Settings["clock-direction"] = map[byte]string{'+': ClockForward, '-': ClockBackward}[v.Targets[0][i]]
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pf.At = began.Sub(r.start)
	r.entries = append(r.entries, pf)
	return len(r.entries) - 1
}

// healed sets how long entry i stayed, from when its injection completed
// to now, and when its heal began, now.
func (r *planRecord) healed(i int, injected time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[i].Lasts = time.Since(injected)
	r.entries[i].Healed = time.Since(r.start)
}

// healedBefore reports whether the plan shows step j healed before step
// i began: by its heal's offset, or, in a file that does not give it,
// by its offset and stay.
func healedBefore(j, i PlannedFault) bool {
	if j.Healed > 0 {
		return j.Healed <= i.At
	}
	return j.At+j.Lasts <= i.At
}

// Planned returns the plan of what the schedule did so far (Plan's
// Faults): every injection, with what it hit and how long it stayed; an
// injection not healed yet has Lasts 0. A seeded schedule's Seed and
// Interval, and a replay's ReplayOf, are the caller's to add, as are the
// workload's settings.
func (s *Schedule) Planned() []PlannedFault {
	s.plan.mu.Lock()
	defer s.plan.mu.Unlock()
	return slices.Clone(s.plan.entries)
}

// Began returns the history clock's reading when Run began the fault
// phase (Plan.Began), 0 before it did.
func (s *Schedule) Began() time.Duration {
	s.plan.mu.Lock()
	defer s.plan.mu.Unlock()
	return s.plan.began
}

// replay injects the steps of s.Steps at their offsets from now, in plan
// order (a step whose injection is late, behind a pause that waited for
// its point, goes in as soon as the one before it has, and a step goes in
// only after the heals of the steps the plan shows healed before it
// began), each healed its Lasts after its injection ended; a step planned from an injection that
// failed (outcome fail) is tried again, and stays its fault's own
// duration if it applies now. A step that would still be in at ctx's
// deadline is left out, as a seeded schedule leaves out its last fault.
// It returns the errors of heals that failed.
func (s *Schedule) replay(ctx context.Context, lg *slog.Logger) error {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x7265706c6179))
	start := s.plan.start
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		healErrs []error
	)
	prev := make(chan struct{})
	close(prev)
	healed := make([]chan struct{}, len(s.Steps.steps))
	for i, st := range s.Steps.steps {
		done := make(chan struct{})
		healed[i] = make(chan struct{})
		// The steps the plan shows healed before this one began: it goes
		// in after their heals, as it did.
		var after []<-chan struct{}
		for j := range i {
			if healedBefore(s.Steps.steps[j].PlannedFault, st.PlannedFault) {
				after = append(after, healed[j])
			}
		}
		wg.Add(1)
		go func(st planStep, prev <-chan struct{}, done chan<- struct{}, healed chan<- struct{}) {
			defer wg.Done()
			defer close(healed)
			injectedOK, injectedAt, entry := false, time.Time{}, -1
			func() {
				defer close(done)
				select {
				case <-prev:
				case <-ctx.Done():
					return
				}
				if !sleep(ctx, time.Until(start.Add(st.At))) {
					return
				}
				for _, h := range after {
					select {
					case <-h:
					case <-ctx.Done():
						return
					}
				}
				if end, ok := ctx.Deadline(); ok && time.Now().Add(st.Lasts).After(end) {
					lg.Info("planned fault left out: it would outlast the fault phase", "fault", st.Fault, "at", st.At, "lasts", st.Lasts)
					return
				}
				began := time.Now()
				injectedOK, entry = s.injectPlanned(ctx, st.f, rng, lg, began)
				injectedAt = time.Now()
			}()
			if entry < 0 {
				return
			}
			if injectedOK {
				lasts := st.Lasts
				if st.Outcome == string(history.Fail) && lasts == 0 {
					// It did not apply when planned, and so was healed
					// at once; now that it did, it stays its own time.
					lasts = st.f.Duration()
				}
				sleep(ctx, lasts)
			}
			if err := s.heal(st.f); err != nil {
				mu.Lock()
				healErrs = append(healErrs, err)
				mu.Unlock()
			}
			s.plan.healed(entry, injectedAt)
		}(st, prev, done, healed[i])
		prev = done
	}
	wg.Wait()
	if len(healErrs) == 0 {
		return nil
	}
	return healErrors(healErrs)
}
