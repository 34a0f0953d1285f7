package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/shrink"
)

// shrinkFile is the search's log in its folder, and shrinkSchedule the
// smallest schedule's file beside it.
const (
	shrinkFile     = "shrink.json"
	shrinkSchedule = "schedule.json"
)

// shrinkFlags are the settings of `locktest shrink`.
type shrinkFlags struct {
	need, replays, confirm int
	budget, grace          time.Duration
	anomaly, store         string
	quiet                  bool
}

func newShrinkCmd() *cobra.Command {
	sf := &shrinkFlags{}
	c := &cobra.Command{
		Use:   "shrink RUN",
		Short: "Search for the smallest run that fails as a stored failing run did: fewest faults, weakest, shortest, fewest clients",
		Long: `shrink starts from a stored run that failed (RUN is its folder, with its
results.json and schedule.json) and searches for a smaller run that still
fails the same way: the same checker finds an anomaly of the same kind. It
replays candidates against real servers, made by
  - ending the run soon after its first violation (--grace after it),
  - dropping faults (delta debugging over the schedule, after trying none),
  - moving the faults sooner,
  - fewer clients (1, 2, 3, half) and one lock,
  - weakening each fault that stays: fewer targets, a shorter pause or
    window, a smaller clock jump, less loss or delay, one halving at a time,
until a round of them changes nothing or --budget is spent. A candidate
counts as failing only when --need of --replays replays fail, since real
servers do not fail the same way every time (docs/shrinking.md says what
that means).

Every candidate's schedule and replays are kept in STORE/<name>.shrink/<time>/
with shrink.json, the search's log; schedule.json there is the smallest
schedule. After the search, the smallest schedule is replayed --confirm more
times, stored as STORE/<name>-shrunk/, each report marked with what it was
shrunk from and the story in one sentence. The last lines give the command
that replays it.

Exit codes: 0 when the smallest schedule failed the same way in --need of
its --confirm replays (or --confirm is 0); 3 when it did not, or the search
was interrupted; 2 for a run that did not fail or has no schedule.json, and
for a set-up failure of a replay.`,
		Example: `  locktest shrink store/redis-gc-pause/latest
  locktest shrink store/redlock-clock-jump/latest --budget 20m --replays 5 --need 3`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if sf.need < 1 || sf.replays < sf.need {
				return usageError{fmt.Errorf("--need %d of --replays %d: want 1 ≤ need ≤ replays", sf.need, sf.replays)}
			}
			for _, n := range []struct {
				flag     string
				negative bool
				value    any
			}{{"confirm", sf.confirm < 0, sf.confirm}, {"budget", sf.budget < 0, sf.budget}, {"grace", sf.grace < 0, sf.grace}} {
				if n.negative {
					return usageError{fmt.Errorf("--%s must not be negative, got %v", n.flag, n.value)}
				}
			}
			if st, err := os.Stat(sf.store); err == nil && !st.IsDir() {
				return usageError{fmt.Errorf("--store: %s is not a folder", sf.store)}
			} else if err != nil && !errors.Is(err, os.ErrNotExist) {
				return usageError{fmt.Errorf("--store: %v", err)}
			}
			return shrinkRun(cmd.Context(), cmd.OutOrStdout(), a[0], *sf)
		},
	}
	f := c.Flags()
	f.IntVar(&sf.replays, "replays", 3, "replays of each candidate, at most")
	f.IntVar(&sf.need, "need", 2, "replays of a candidate that must fail the same way for it to count as failing")
	f.IntVar(&sf.confirm, "confirm", 3, "replays of the smallest schedule after the search, counted whole (0: none)")
	f.DurationVar(&sf.budget, "budget", 30*time.Minute, "wall time after which the search starts no more replays (0: none)")
	f.DurationVar(&sf.grace, "grace", 0, "how long a run goes on after its first violation when the search ends it early (0: 1s + the run's ttl)")
	f.StringVar(&sf.anomaly, "anomaly", "", "the anomaly to keep, KIND or CHECKER:KIND (default: the run's first proven one)")
	f.StringVar(&sf.store, "store", "store", "folder of stored runs, where the search and its replays go")
	f.BoolVarP(&sf.quiet, "quiet", "q", false, "no line per candidate, only the result")
	return c
}

// target is the anomaly a shrink keeps.
type target struct {
	Checker string `json:"checker"`
	Kind    string `json:"kind"`
}

func (t target) String() string { return t.Checker + ": " + t.Kind }

// shrinkLog is shrink.json: the search's settings, every candidate with
// its replays, and the result.
type shrinkLog struct {
	SchemaVersion int                 `json:"schema_version"`
	From          string              `json:"from"`
	Anomaly       target              `json:"anomaly"`
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
	Steps         []stepLog           `json:"steps"`
	Confirmations []shrink.Trial      `json:"confirmations"`
}

type stepLog struct {
	shrink.Step
	Size     runstore.ShrinkSize `json:"size"`
	Schedule string              `json:"schedule"`
}

func sizeOf(s shrink.Size) runstore.ShrinkSize {
	return runstore.ShrinkSize{Faults: s.Faults, Time: s.Time.String(), Clients: s.Clients, Locks: s.Locks}
}

// shrinker replays candidates of one search.
type shrinker struct {
	dir    string // the search's folder
	store  string
	name   string // the stored run's name
	target target
	info   runstore.RunInfo
}

func shrinkRun(ctx context.Context, out io.Writer, arg string, sf shrinkFlags) error {
	started := time.Now()
	dir := strings.TrimSuffix(arg, string(filepath.Separator))
	res, err := runstore.ReadResults(dir)
	if err != nil {
		return usageError{fmt.Errorf("shrink %s: %v", arg, err)}
	}
	if res.Valid != checker.Invalid {
		return usageError{fmt.Errorf("shrink %s: the run did not fail (verdict %s): nothing to shrink", arg, verdictWord(res.Valid))}
	}
	plan, err := run.ReadSchedule(filepath.Join(dir, runstore.ScheduleFile))
	if errors.Is(err, os.ErrNotExist) {
		return usageError{fmt.Errorf("shrink %s: no %s (the run was stored before locktest wrote schedules): nothing to replay", arg, runstore.ScheduleFile)}
	}
	if err != nil {
		return usageError{fmt.Errorf("shrink %s: %v", arg, err)}
	}
	h, err := history.ReadTable(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		return usageError{fmt.Errorf("shrink %s: %v", arg, err)}
	}
	tg, first, err := pickTarget(res, h, sf.anomaly)
	if err != nil {
		return usageError{fmt.Errorf("shrink %s: %v", arg, err)}
	}
	first = max(0, first-plan.Began)
	grace := sf.grace
	if grace == 0 {
		ttl, _ := time.ParseDuration(plan.Workload[shrink.KeyTTL])
		grace = time.Second + ttl
	}
	name := res.Run.Name
	if name == "" {
		name = filepath.Base(filepath.Dir(dir))
	}
	sdir, err := runstore.MakeRunDir(sf.store, name+".shrink", started)
	if err != nil {
		return usageError{fmt.Errorf("--store: %v", err)}
	}
	sh := &shrinker{dir: sdir, store: sf.store, name: name, target: tg, info: res.Run}
	from := shrink.Candidate{Plan: *plan}
	from.Plan.ReplayOf, from.Plan.Began = "", 0
	log := shrinkLog{SchemaVersion: 1, From: dir, Anomaly: tg, Need: sf.need, Replays: sf.replays, Grace: grace.String(),
		Budget: sf.budget.String(), Started: started.Format(time.RFC3339), Before: sizeOf(shrink.SizeOf(from)), Steps: []stepLog{}, Confirmations: []shrink.Trial{}}
	fmt.Fprintf(out, "shrink %s: keeping %s, first proven at %s into the faults; %s\n", dir, tg, first.Round(time.Millisecond), shrink.SizeOf(from))
	fmt.Fprintf(out, "  search in %s; a candidate fails when %d of %d replays do\n", sdir, sf.need, sf.replays)
	opt := shrink.Options{Need: sf.need, Replays: sf.replays, Grace: grace}
	if sf.budget > 0 {
		opt.Deadline = started.Add(sf.budget)
	}
	opt.Progress = func(st shrink.Step) {
		log.Steps = append(log.Steps, stepLog{Step: st, Size: sizeOf(st.Size), Schedule: sh.schedulePath(st.ID)})
		_ = runstore.WriteJSON(filepath.Join(sdir, shrinkFile), log) // the log so far, for a search cut short
		if !sf.quiet {
			fmt.Fprintln(out, "  "+stepLine(st, time.Since(started)))
		}
	}
	result, serr := shrink.Search(ctx, from, first, sh.replay, opt)
	log.BudgetSpent = errors.Is(serr, shrink.ErrBudget)
	log.Interrupted = ctx.Err() != nil
	log.After, log.Smallest, log.ReplaysRun = sizeOf(shrink.SizeOf(result.Smallest)), result.SmallestID, result.Replays
	finish := func() {
		log.Elapsed = time.Since(started).Round(time.Second).String()
		if err := runstore.WriteJSON(filepath.Join(sdir, shrinkFile), log); err != nil {
			fmt.Fprintf(out, "  shrink.json: %v\n", err)
		}
	}
	if serr != nil && !log.BudgetSpent {
		finish()
		if log.Interrupted {
			return inconclusiveError{fmt.Errorf("shrink interrupted after %d replays; %s holds the search so far", result.Replays, sdir)}
		}
		return fmt.Errorf("shrink: a replay could not start: %w (the search so far is in %s)", serr, sdir)
	}
	smallest := filepath.Join(sdir, shrinkSchedule)
	if err := writePlan(smallest, result.Smallest.Plan); err != nil {
		finish()
		return err
	}
	fmt.Fprintf(out, "smallest: %s (from %s), %d replays in %s%s\n", shrink.SizeOf(result.Smallest), shrink.SizeOf(from),
		result.Replays, time.Since(started).Round(time.Second), map[bool]string{true: "; the budget ran out"}[log.BudgetSpent])
	// Confirm: replays of the smallest schedule, counted whole, in the
	// store under a name of their own.
	var confirmed []string
	reproduced := 0
	for i := 0; i < sf.confirm; i++ {
		t, err := sh.replayAs(ctx, smallest, result.Smallest, sf.store, name+"-shrunk")
		if err != nil {
			finish()
			if ctx.Err() != nil {
				return inconclusiveError{fmt.Errorf("shrink interrupted while confirming; %s holds the search", sdir)}
			}
			return fmt.Errorf("shrink: a confirmation replay could not start: %w", err)
		}
		log.Confirmations = append(log.Confirmations, t)
		confirmed = append(confirmed, t.Run)
		if t.Failed {
			reproduced++
		}
	}
	finish()
	shrunk := runstore.Shrunk{From: dir, Search: sdir, Checker: tg.Checker, Kind: tg.Kind, Before: log.Before, After: log.After,
		Replays: result.Replays, Need: sf.need, OfReplays: sf.replays, BudgetSpent: log.BudgetSpent, Reproduced: reproduced, Confirmations: sf.confirm}
	var story string
	for _, d := range confirmed {
		s, err := markShrunk(d, shrunk, tg)
		if err != nil {
			return fmt.Errorf("shrink: mark %s: %w", d, err)
		}
		if story == "" {
			story = s
		}
	}
	if sf.confirm > 0 {
		fmt.Fprintf(out, "confirmed: failed the same way in %d of %d replays (%s)\n", reproduced, sf.confirm, filepath.Join(sf.store, name+"-shrunk"))
	}
	if story != "" {
		fmt.Fprintf(out, "story: %s\n", story)
	}
	fmt.Fprintf(out, "replay: locktest run --schedule %s\n", smallest)
	if len(confirmed) > 0 {
		fmt.Fprintf(out, "report: %s\n", filepath.Join(confirmed[len(confirmed)-1], runstore.ReportFile))
	}
	if sf.confirm > 0 && reproduced < sf.need {
		return inconclusiveError{fmt.Errorf("the smallest schedule failed the same way in only %d of %d confirmation replays (want %d)", reproduced, sf.confirm, sf.need)}
	}
	return nil
}

// stepLine is a candidate's progress line.
func stepLine(st shrink.Step, since time.Duration) string {
	outcome := "rejected"
	switch {
	case st.Accepted:
		outcome = "ACCEPTED"
	case st.NotRun != "":
		return fmt.Sprintf("%s not run   %s: %s", st.ID, st.Change, st.NotRun)
	}
	return fmt.Sprintf("%s %s %d of %d failed  %-38s %s  [%s]", st.ID, outcome, st.Failures(), len(st.Trials), st.Size, st.Change, since.Round(time.Second))
}

// pickTarget chooses the anomaly to keep: the one want names (KIND or
// CHECKER:KIND), or the run's first proven one; first is when it was
// proven, on the history's clock.
func pickTarget(res runstore.Results, h *history.Table, want string) (target, time.Duration, error) {
	var have []string
	best, bestAt, found := target{}, time.Duration(0), false
	for _, c := range res.Checkers {
		if c.Valid != checker.Invalid {
			continue
		}
		for _, a := range c.Anomalies {
			t := target{c.Checker, a.Kind}
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
			return best, 0, fmt.Errorf("--anomaly %s: the run has none (it has: %s)", want, orNone(have))
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
func (sh *shrinker) schedulePath(id string) string {
	return filepath.Join(sh.dir, "candidates", id+".json")
}

// replay is the search's Runner: candidate id, replayed once, stored in
// the search's folder.
func (sh *shrinker) replay(ctx context.Context, id string, c shrink.Candidate) (shrink.Trial, error) {
	path := sh.schedulePath(id)
	if _, err := os.Stat(path); err != nil {
		if err := writePlan(path, c.Plan); err != nil {
			return shrink.Trial{}, err
		}
	}
	return sh.replayAs(ctx, path, c, filepath.Join(sh.dir, "candidates"), id)
}

// replayAs replays c, whose schedule file is path, as a run named name in
// store, and judges it.
func (sh *shrinker) replayAs(ctx context.Context, path string, c shrink.Candidate, store, name string) (shrink.Trial, error) {
	cfg := run.DefaultConfig()
	plan := c.Plan
	cfg.Schedule, cfg.Plan = path, &plan
	if err := run.ApplyMachine(&cfg, sh.info.Settings); err != nil {
		return shrink.Trial{}, err
	}
	if err := run.ApplyWorkload(&cfg, &plan, nil); err != nil {
		return shrink.Trial{}, err
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
			return shrink.Trial{}, fmt.Errorf("%v: %w", err, shrink.ErrCannotRun)
		}
		return shrink.Trial{}, err
	}
	if ctx.Err() != nil {
		return shrink.Trial{}, ctx.Err()
	}
	return judge(o.Dir, o.Results, sh.target)
}

// judge says whether the run in dir failed as t says, and when.
func judge(dir string, res runstore.Results, t target) (shrink.Trial, error) {
	tr := shrink.Trial{Run: dir, Verdict: verdictWord(res.Valid)}
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
func markShrunk(dir string, s runstore.Shrunk, t target) (string, error) {
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

// writePlan writes a schedule file.
func writePlan(path string, p nemesis.Plan) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return runstore.WriteFileAtomic(path, append(data, '\n'))
}
