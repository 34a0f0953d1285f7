package shrink

// This file is the shrinker's real half: a Shrink reads a stored failing
// run, replays each candidate of the search (search.go, which stays pure)
// as a run of locktest (run.Run), judges it against the anomaly kept, and
// confirms the smallest. `locktest shrink` prints what it does.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// LogFile is the search's log in its folder, and ScheduleFile the
// smallest schedule's file beside it.
const (
	LogFile      = "shrink.json"
	ScheduleFile = "schedule.json"
)

// Settings are the settings of a shrink: the flags of `locktest shrink`.
type Settings struct {
	// Need of Replays replays of a candidate must fail the same way for
	// it to count as failing; Confirm replays of the smallest schedule
	// follow the search, counted whole.
	Need, Replays, Confirm int
	// Budget is the wall time after which the search starts no more
	// replays (0: none); Grace how long a replay goes on after its first
	// violation (0: 1s + the run's ttl).
	Budget, Grace time.Duration
	// Anomaly is the anomaly to keep, KIND or CHECKER:KIND ("": the run's
	// first proven one); Store the folder of stored runs, where the search
	// and its replays go.
	Anomaly, Store string
}

// Check refuses settings no search can take, naming the flag: a need
// outside 1..replays, a negative count or time, a store that is not a
// folder. It makes nothing.
func (s Settings) Check() error {
	if s.Need < 1 || s.Replays < s.Need {
		return fmt.Errorf("--need %d of --replays %d: want 1 ≤ need ≤ replays", s.Need, s.Replays)
	}
	for _, n := range []struct {
		flag     string
		negative bool
		value    any
	}{{"confirm", s.Confirm < 0, s.Confirm}, {"budget", s.Budget < 0, s.Budget}, {"grace", s.Grace < 0, s.Grace}} {
		if n.negative {
			return fmt.Errorf("--%s must not be negative, got %v", n.flag, n.value)
		}
	}
	if st, err := os.Stat(s.Store); err == nil && !st.IsDir() {
		return fmt.Errorf("--store: %s is not a folder", s.Store)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--store: %v", err)
	}
	return nil
}

// Target is the anomaly a shrink keeps.
type Target struct {
	Checker string `json:"checker"`
	Kind    string `json:"kind"`
}

func (t Target) String() string { return t.Checker + ": " + t.Kind }

// Log is shrink.json: the search's settings, every candidate with its
// replays, and the result.
type Log struct {
	SchemaVersion int                 `json:"schema_version"`
	From          string              `json:"from"`
	Anomaly       Target              `json:"anomaly"`
	Need          int                 `json:"need"`
	Replays       int                 `json:"replays"`
	Grace         string              `json:"grace"`
	Budget        string              `json:"budget"`
	Started       string              `json:"started"`
	Elapsed       string              `json:"elapsed"`
	BudgetSpent   bool                `json:"budget_spent,omitempty"`
	Interrupted   bool                `json:"interrupted,omitempty"`
	Before        runstore.ShrinkSize `json:"before"`
	After         runstore.ShrinkSize `json:"after"`
	Smallest      string              `json:"smallest,omitempty"`
	ReplaysRun    int                 `json:"replays_run"`
	Steps         []StepLog           `json:"steps"`
	Confirmations []Trial             `json:"confirmations"`
}

// StepLog is one candidate of the log: the step, its size and its
// schedule file.
type StepLog struct {
	Step
	Size     runstore.ShrinkSize `json:"size"`
	Schedule string              `json:"schedule"`
}

func sizeOf(s Size) runstore.ShrinkSize {
	return runstore.ShrinkSize{Faults: s.Faults, Time: s.Time.String(), Clients: s.Clients, Locks: s.Locks}
}

// replayer replays candidates of one search.
type replayer struct {
	dir    string // the search's folder
	store  string
	name   string // the stored run's name
	target Target
	info   runstore.RunInfo
}

// Shrink is one search for the smallest run that fails as a stored run
// did, over real replays.
type Shrink struct {
	replayer
	// From is the stored run's folder; First when its anomaly was first
	// proven, from the start of its faults; Log what shrink.json holds.
	From  string
	First time.Duration
	Log   Log
	set   Settings
	begun time.Time
	start Candidate
	// Smallest is the smallest candidate found, and its schedule file,
	// once Search ended.
	Smallest     Result
	SmallestFile string
	// LogErr is the error of the last write of shrink.json, if any.
	LogErr error
}

// Prepare reads the failing run in dir and picks the anomaly to keep,
// and makes the search's folder in the store. Its errors are the
// user's: a run that did not fail, one stored without its schedule, an
// anomaly it lacks, a store that cannot be written.
func Prepare(dir string, s Settings) (*Shrink, error) {
	begun := time.Now()
	arg := dir
	dir = strings.TrimSuffix(dir, string(filepath.Separator))
	res, err := runstore.ReadResults(dir)
	if err != nil {
		return nil, fmt.Errorf("shrink %s: %v", arg, err)
	}
	if res.Valid != checker.Invalid {
		return nil, fmt.Errorf("shrink %s: the run did not fail (verdict %s): nothing to shrink", arg, shout(res.Valid))
	}
	plan, err := run.ReadSchedule(filepath.Join(dir, runstore.ScheduleFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("shrink %s: no %s (the run was stored before locktest wrote schedules): nothing to replay", arg, runstore.ScheduleFile)
	}
	if err != nil {
		return nil, fmt.Errorf("shrink %s: %v", arg, err)
	}
	h, err := history.ReadTable(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		return nil, fmt.Errorf("shrink %s: %v", arg, err)
	}
	tg, first, err := pickTarget(res, h, s.Anomaly)
	if err != nil {
		return nil, fmt.Errorf("shrink %s: %v", arg, err)
	}
	first = max(0, first-plan.Began)
	if s.Grace == 0 {
		ttl, _ := time.ParseDuration(plan.Workload[KeyTTL])
		s.Grace = time.Second + ttl
	}
	name := res.Run.Name
	if name == "" {
		name = filepath.Base(filepath.Dir(dir))
	}
	sdir, err := runstore.MakeRunDir(s.Store, name+".shrink", begun)
	if err != nil {
		return nil, fmt.Errorf("--store: %v", err)
	}
	sh := &Shrink{replayer: replayer{dir: sdir, store: s.Store, name: name, target: tg, info: res.Run},
		From: dir, First: first, set: s, begun: begun, start: Candidate{Plan: *plan}}
	sh.start.Plan.ReplayOf, sh.start.Plan.Began = "", 0
	sh.Log = Log{SchemaVersion: 1, From: dir, Anomaly: tg, Need: s.Need, Replays: s.Replays, Grace: s.Grace.String(),
		Budget: s.Budget.String(), Started: begun.Format(time.RFC3339), Before: sizeOf(SizeOf(sh.start)), Steps: []StepLog{}, Confirmations: []Trial{}}
	return sh, nil
}

// Dir is the search's folder in the store.
func (sh *Shrink) Dir() string { return sh.dir }

// Target is the anomaly the search keeps.
func (sh *Shrink) Target() Target { return sh.target }

// Start is the candidate the search starts from: the stored run's
// schedule.
func (sh *Shrink) Start() Candidate { return sh.start }

// Elapsed is the time since the shrink began.
func (sh *Shrink) Elapsed() time.Duration { return time.Since(sh.begun) }

// Search runs the search, telling progress of every step, keeps its log
// in shrink.json as it goes, and writes the smallest schedule into
// schedule.json. The error is nil when the search ended or its budget ran
// out (Log.BudgetSpent), the context's when it was interrupted (the log
// is written), or a replay's that could not start.
func (sh *Shrink) Search(ctx context.Context, progress func(Step)) error {
	opt := Options{Need: sh.set.Need, Replays: sh.set.Replays, Grace: sh.set.Grace}
	if sh.set.Budget > 0 {
		opt.Deadline = sh.begun.Add(sh.set.Budget)
	}
	opt.Progress = func(st Step) {
		sh.Log.Steps = append(sh.Log.Steps, StepLog{Step: st, Size: sizeOf(st.Size), Schedule: sh.schedulePath(st.ID)})
		_ = runstore.WriteJSON(filepath.Join(sh.dir, LogFile), sh.Log) // the log so far, for a search cut short
		if progress != nil {
			progress(st)
		}
	}
	result, serr := Search(ctx, sh.start, sh.First, sh.replay, opt)
	sh.Smallest = result
	sh.Log.BudgetSpent = errors.Is(serr, ErrBudget)
	sh.Log.Interrupted = ctx.Err() != nil
	sh.Log.After, sh.Log.Smallest, sh.Log.ReplaysRun = sizeOf(SizeOf(result.Smallest)), result.SmallestID, result.Replays
	if serr != nil && !sh.Log.BudgetSpent {
		sh.finish()
		if sh.Log.Interrupted {
			return ctx.Err()
		}
		return fmt.Errorf("shrink: a replay could not start: %w (the search so far is in %s)", serr, sh.dir)
	}
	sh.SmallestFile = filepath.Join(sh.dir, ScheduleFile)
	if err := writePlan(sh.SmallestFile, result.Smallest.Plan); err != nil {
		sh.finish()
		return err
	}
	return nil
}

// finish writes the log with the search's elapsed time; an error is
// kept in LogErr, and does not end the shrink.
func (sh *Shrink) finish() {
	sh.Log.Elapsed = time.Since(sh.begun).Round(time.Second).String()
	sh.LogErr = runstore.WriteJSON(filepath.Join(sh.dir, LogFile), sh.Log)
}

// Confirmation is what the replays of the smallest schedule showed.
type Confirmation struct {
	// Runs are the replays' folders, Reproduced how many failed the same
	// way, Story the story of the first one's anomaly ("" when none).
	Runs       []string
	Reproduced int
	Story      string
}

// Confirm replays the smallest schedule Settings.Confirm times, counted
// whole, as runs named <name>-shrunk in the store, writes the log, and
// marks each replay with what it was shrunk from (its results.json and
// report). The context's error is returned when it was interrupted.
func (sh *Shrink) Confirm(ctx context.Context) (Confirmation, error) {
	var c Confirmation
	for i := 0; i < sh.set.Confirm; i++ {
		t, err := sh.replayAs(ctx, sh.SmallestFile, sh.Smallest.Smallest, sh.store, sh.ConfirmName())
		if err != nil {
			sh.finish()
			if ctx.Err() != nil {
				return c, ctx.Err()
			}
			return c, fmt.Errorf("shrink: a confirmation replay could not start: %w", err)
		}
		sh.Log.Confirmations = append(sh.Log.Confirmations, t)
		c.Runs = append(c.Runs, t.Run)
		if t.Failed {
			c.Reproduced++
		}
	}
	sh.finish()
	shrunk := runstore.Shrunk{From: sh.From, Search: sh.dir, Checker: sh.target.Checker, Kind: sh.target.Kind, Before: sh.Log.Before, After: sh.Log.After,
		Replays: sh.Smallest.Replays, Need: sh.set.Need, OfReplays: sh.set.Replays, BudgetSpent: sh.Log.BudgetSpent, Reproduced: c.Reproduced, Confirmations: sh.set.Confirm}
	for _, d := range c.Runs {
		s, err := markShrunk(d, shrunk, sh.target)
		if err != nil {
			return c, fmt.Errorf("shrink: mark %s: %w", d, err)
		}
		if c.Story == "" {
			c.Story = s
		}
	}
	return c, nil
}

// ConfirmName is the name the confirmation replays are stored under.
func (sh *Shrink) ConfirmName() string { return sh.name + "-shrunk" }

// writePlan writes a schedule file, and its folder when it is missing.
func writePlan(path string, p nemesis.Plan) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return runstore.WriteJSON(path, p)
}

// shout is a verdict as the CLI prints it: an invalid one in capitals.
func shout(v checker.Verdict) string {
	if v == checker.Invalid {
		return strings.ToUpper(reports.VerdictWord(v))
	}
	return reports.VerdictWord(v)
}

// pickTarget chooses the anomaly to keep: the one want names (KIND or
// CHECKER:KIND), or the run's first proven one; first is when it was
// proven, on the history's clock.
func pickTarget(res runstore.Results, h *history.Table, want string) (Target, time.Duration, error) {
	var have []string
	best, bestAt, found := Target{}, time.Duration(0), false
	for _, c := range res.Checkers {
		if c.Valid != checker.Invalid {
			continue
		}
		for _, a := range c.Anomalies {
			t := Target{c.Checker, a.Kind}
			if !slices.Contains(have, t.Checker+":"+t.Kind) {
				have = append(have, t.Checker+":"+t.Kind)
			}
			if want != "" && want != a.Kind && want != t.Checker+":"+t.Kind {
				continue
			}
			if at := proven(h, a); !found || at < bestAt {
				best, bestAt, found = t, at, true
			}
		}
	}
	if !found {
		if want != "" {
			has := "none"
			if len(have) > 0 {
				has = strings.Join(have, ",")
			}
			return best, 0, fmt.Errorf("--anomaly %s: the run has none (it has: %s)", want, has)
		}
		return best, 0, fmt.Errorf("no checker found an anomaly: nothing to shrink")
	}
	return best, bestAt, nil
}

// proven is when anomaly a was proven: the time of the last of its ops.
func proven(h *history.Table, a checker.Anomaly) time.Duration {
	var t int64
	for _, i := range a.Ops {
		if i >= 0 && i < h.Len() {
			t = max(t, h.Time(i))
		}
	}
	return time.Duration(t)
}

// schedulePath is where candidate id's schedule file goes.
func (sh *replayer) schedulePath(id string) string {
	return filepath.Join(sh.dir, "candidates", id+".json")
}

// replay is the search's Runner: candidate id, replayed once, stored in
// the search's folder.
func (sh *replayer) replay(ctx context.Context, id string, c Candidate) (Trial, error) {
	path := sh.schedulePath(id)
	if _, err := os.Stat(path); err != nil {
		if err := writePlan(path, c.Plan); err != nil {
			return Trial{}, err
		}
	}
	return sh.replayAs(ctx, path, c, filepath.Join(sh.dir, "candidates"), id)
}

// replayAs replays c, whose schedule file is path, as a run named name in
// store, and judges it.
func (sh *replayer) replayAs(ctx context.Context, path string, c Candidate, store, name string) (Trial, error) {
	cfg := run.DefaultConfig()
	plan := c.Plan
	cfg.Schedule, cfg.Plan = path, &plan
	if err := run.ApplyMachine(&cfg, sh.info.Settings); err != nil {
		return Trial{}, err
	}
	if err := run.ApplyWorkload(&cfg, &plan, nil); err != nil {
		return Trial{}, err
	}
	cfg.StoreDir, cfg.Name, cfg.Expect = store, name, "invalid"
	// A replay that fails as the search wants has shown what it was run
	// for: it stops a grace after that violation, confirmed while it runs
	// (another violation first does not stop it).
	cfg.StopOnViolation, cfg.StopOnly = true, run.StopTarget{Checker: sh.target.Checker, Kind: sh.target.Kind}
	cfg.Command = "locktest run --schedule " + path + " --stop-on-violation"
	o, err := run.Run(ctx, cfg)
	if o == nil {
		if strings.Contains(err.Error(), "faults[") {
			// The smaller run has no such node or worker for a pin.
			return Trial{}, fmt.Errorf("%v: %w", err, ErrCannotRun)
		}
		return Trial{}, err
	}
	if ctx.Err() != nil {
		return Trial{}, ctx.Err()
	}
	return judge(o.Dir, o.Results, sh.target)
}

// judge says whether the run in dir failed as t says, and when.
func judge(dir string, res runstore.Results, t Target) (Trial, error) {
	tr := Trial{Run: dir, Verdict: shout(res.Valid)}
	var hit []checker.Anomaly
	for _, c := range res.Checkers {
		if c.Checker != t.Checker || c.Valid != checker.Invalid {
			continue
		}
		for _, a := range c.Anomalies {
			if a.Kind == t.Kind {
				hit = append(hit, a)
			}
		}
	}
	if len(hit) == 0 {
		return tr, nil
	}
	h, err := history.ReadTable(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		return tr, fmt.Errorf("replay %s: %w", dir, err)
	}
	var began time.Duration
	if p, err := run.ReadSchedule(filepath.Join(dir, runstore.ScheduleFile)); err == nil {
		began = p.Began
	}
	tr.Failed = true
	tr.FirstViolation = -1
	for _, a := range hit {
		if at := max(0, proven(h, a)-began); tr.FirstViolation < 0 || at < tr.FirstViolation {
			tr.FirstViolation = at
		}
	}
	return tr, nil
}

// markShrunk records in the run in dir what it was shrunk from, with the
// story its own history tells of its first anomaly of t's kind, and
// rewrites its report; it returns the story ("" when the replay did not
// fail so).
func markShrunk(dir string, s runstore.Shrunk, t Target) (string, error) {
	res, err := runstore.ReadResults(dir)
	if err != nil {
		return "", err
	}
	h, err := history.ReadTable(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		return "", err
	}
	var first *checker.Anomaly
	for _, c := range res.Checkers {
		if c.Checker != t.Checker {
			continue
		}
		for i, a := range c.Anomalies {
			if a.Kind == t.Kind && (first == nil || proven(h, a) < proven(h, *first)) {
				first = &c.Anomalies[i]
			}
		}
	}
	if first != nil {
		s.Story = reports.Story(h, *first)
	}
	res.Run.Shrunk = &s
	if err := runstore.WriteResults(dir, res); err != nil {
		return "", err
	}
	return s.Story, reports.WriteHTML(dir, res, h)
}
