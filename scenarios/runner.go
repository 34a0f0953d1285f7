package scenarios

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// RunResult is what one run of a scenario showed: a row of the
// scoreboard's seeds.
type RunResult = reports.ScoreRun

// Options says how to run scenarios.
type Options struct {
	// Base is the run configuration the scenarios' settings are applied
	// to: the store, the worker and node programs, the logger.
	Base run.Config
	// Seeds are the seeds each scenario runs with, in order; with
	// UntilReproduced or CIWidth, the most it runs with.
	Seeds []int64
	// UntilReproduced stops a violation scenario's seeds at the first run
	// that shows its violation.
	UntilReproduced bool
	// CIWidth, when above 0, stops adding seeds to a scenario once the
	// two-sided 95% Wilson interval of its violation rate is narrower.
	CIWidth float64
	// Parallel is how many runs go at once; below 1 means 1. Every run
	// has its own ports, network lab, subnet and store folder.
	Parallel int
	// Shard and Shards, when Shards is above 0, make only this shard's
	// share of the runs: of the (scenario, seed) pairs in order, the k-th
	// (from 0) is made by shard k mod Shards + 1. Shards that ran the same
	// catalogue and seeds join into one scoreboard with Merge.
	Shard, Shards int
	// Progress, if set, is called after each run, one call at a time,
	// with how many runs are still to come at most.
	Progress func(s Scenario, r RunResult, left int)
}

// sharded reports whether the k-th (scenario, seed) pair, counted from 0,
// is this shard's.
func (o Options) sharded(k int) bool { return o.Shards <= 0 || k%o.Shards == o.Shard-1 }

// stopped reports whether scenario s needs no more seeds after runs.
func (o Options) stopped(s Scenario, runs []RunResult) bool {
	if o.UntilReproduced && s.Expect == ExpectViolation && slices.ContainsFunc(runs, func(r RunResult) bool { return r.Outcome == ExpectViolation }) {
		return true
	}
	if o.CIWidth > 0 {
		k, n := 0, 0
		for _, r := range runs {
			if r.Outcome != "" {
				n++
				if r.Outcome == ExpectViolation {
					k++
				}
			}
		}
		if ci := stats.Wilson(k, n); n > 0 && ci.Hi-ci.Lo < o.CIWidth {
			return true
		}
	}
	return false
}

// providerFlags are the flags that put a scenario's run where base's
// nodes run, to follow its reproducing command (run.Config.ProviderArgs):
// "" for the default provider.
func providerFlags(base run.Config) string {
	var a []string
	for _, arg := range base.ProviderArgs() {
		a = append(a, quote(arg))
	}
	if len(a) == 0 {
		return ""
	}
	return " " + strings.Join(a, " ")
}

// Run runs scenario s once per seed and returns what each run showed, in
// seed order; see RunAll.
func Run(ctx context.Context, s Scenario, opt Options) ([]RunResult, error) {
	res, err := RunAll(ctx, []Scenario{s}, opt)
	return res[0], err
}

// RunAll runs every scenario of scs once per seed, opt.Parallel runs at a
// time, and returns what each run showed: out[i] holds scs[i]'s runs in
// seed order. A run that could not start (a missing server, a fault this
// machine cannot make) is an inconclusive result with the reason, not an
// error; errors are for the store and for a cancelled context, after
// which the runs already made are returned too, and no new run starts.
func RunAll(ctx context.Context, scs []Scenario, opt Options) ([][]RunResult, error) {
	out := make([][]RunResult, len(scs))
	type job struct {
		si   int
		seed int64
	}
	type done struct {
		job
		r   RunResult
		err error
	}
	// The plan: per scenario, the seeds still to run, this shard's only.
	plan := make([][]int64, len(scs))
	total := 0
	for i := range scs {
		for j, seed := range opt.Seeds {
			if opt.sharded(i*len(opt.Seeds) + j) {
				plan[i] = append(plan[i], seed)
				total++
			}
		}
	}
	par := max(opt.Parallel, 1)
	jobs, dones := make(chan job), make(chan done)
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r, err := runScenario(ctx, scs[j.si], j.seed, opt)
				dones <- done{j, r, err}
			}
		}()
	}
	var firstErr error
	inflight, finished := 0, 0
	next := func() (job, bool) {
		if firstErr != nil || ctx.Err() != nil {
			return job{}, false
		}
		for i := range scs {
			if len(plan[i]) > 0 && !opt.stopped(scs[i], out[i]) {
				return job{i, plan[i][0]}, true
			}
		}
		return job{}, false
	}
	for {
		j, ok := next()
		if !ok && inflight == 0 {
			break
		}
		var send chan job
		if ok {
			send = jobs
		}
		select {
		case send <- j:
			plan[j.si] = plan[j.si][1:]
			inflight++
		case d := <-dones:
			inflight--
			if d.err != nil {
				if firstErr == nil {
					firstErr = d.err
				}
				continue
			}
			out[d.si] = append(out[d.si], d.r)
			finished++
			if opt.Progress != nil {
				left := 0
				for i := range scs {
					if !opt.stopped(scs[i], out[i]) {
						left += len(plan[i])
					}
				}
				opt.Progress(scs[d.si], d.r, left+inflight)
			}
		}
	}
	close(jobs)
	wg.Wait()
	for i := range out {
		slices.SortFunc(out[i], func(a, b RunResult) int { return cmp.Compare(a.Seed, b.Seed) })
	}
	if firstErr == nil && ctx.Err() != nil && finished < total {
		firstErr = ctx.Err()
	}
	return out, firstErr
}

// runScenario makes one run; tests replace it to check the scheduling
// of RunAll without servers.
var runScenario = runOne

// runOne makes scenario s's run with seed and says what it showed.
func runOne(ctx context.Context, s Scenario, seed int64, opt Options) (RunResult, error) {
	r := RunResult{Seed: seed, FirstViolation: -1, Command: s.Command(seed) + providerFlags(opt.Base)}
	cfg, err := s.Config(opt.Base)
	if err != nil {
		return r, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	cfg.Seed = seed
	cfg.Command = r.Command
	start := time.Now()
	o, err := run.Run(ctx, cfg)
	var se *run.SetupError
	switch {
	case errors.As(err, &se):
		r.Reason = "the run could not start: " + se.Error()
	case err != nil:
		return r, fmt.Errorf("scenario %s, seed %d: %w", s.Name, seed, err)
	default:
		r.Dir = o.Dir
		r.Versions = o.Results.Run.Versions
		h, herr := o.History()
		if herr != nil {
			return r, fmt.Errorf("scenario %s, seed %d: %w", s.Name, seed, herr)
		}
		Classify(s, o.Results, h, &r)
	}
	if ctx.Err() != nil && r.Outcome != ExpectViolation {
		r.Outcome, r.Reason = "", "interrupted"
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// Classify decides what one run showed about scenario s, from its results
// and history, into r: a violation (an anomaly of a kind the scenario
// counts), safe (a valid verdict), or inconclusive with the reason (the run
// did not test what it meant to, a checker could not decide, or none of
// its faults was in force while a client held the lock).
func Classify(s Scenario, res runstore.Results, h history.History, r *RunResult) {
	r.Kinds = map[string]int{}
	for _, c := range res.Checkers {
		for _, a := range c.Anomalies {
			r.Kinds[a.Kind]++
		}
	}
	counts := func(kind string) bool { return len(s.Anomalies) == 0 || slices.Contains(s.Anomalies, kind) }
	counted := 0
	for k, n := range r.Kinds {
		if counts(k) {
			counted += n
		}
	}
	first, workload := reports.TimeToFailure(res, h, counts)
	r.FirstViolation, r.Workload = -1, workload
	r.Faults, r.Effective = int(res.Stats["faults_injected"]), res.EffectiveFaults()
	switch {
	case len(res.Problems) > 0:
		r.Outcome, r.Reason = "", res.Problems[0]
		return
	case counted > 0:
		r.Outcome, r.FirstViolation = ExpectViolation, first
		return
	case res.Valid == checker.Unknown:
		r.Outcome, r.Reason = "", "checkers could not decide: "+strings.Join(res.Undecided(), ", ")
		return
	case res.Ineffective() != "":
		r.Outcome, r.Reason = "", res.Ineffective()
		return
	}
	r.Outcome = ExpectSafe
	if res.Valid == checker.Invalid {
		// Anomalies the scenario does not count: safe as far as this claim
		// goes, and said so.
		r.Reason = "other anomalies: " + reports.KindsText(r.Kinds)
	}
}

// SurvivalSample returns the runs as survival observations, by
// reports.RunObservation's rule: a run that showed its violation fails at
// its first violation (or, where that time is unknown, at the end of its
// workload); a safe run is censored at the end of its workload.
// Inconclusive runs tested nothing and are left out, as are runs that
// recorded no workload time (stored before it was kept).
func SurvivalSample(runs []RunResult) []stats.Observation {
	var out []stats.Observation
	for _, r := range runs {
		conclusive := r.Outcome == ExpectViolation || r.Outcome == ExpectSafe
		if o, ok := reports.RunObservation(conclusive, r.Outcome == ExpectViolation, r.FirstViolation, r.Workload); ok {
			out = append(out, o)
		}
	}
	return out
}

// DefaultMaxRate is the violation rate a safe scenario must be shown to
// stay below, at 95% confidence, to be held: 16 runs without a violation
// do it.
const DefaultMaxRate = stats.DefaultMaxRate

// Score sums up a scenario's runs into its scoreboard row. A safe scenario
// is held only when the one-sided 95% upper bound of its violation rate is
// below maxRate. Links to run reports are made relative to dir, where the
// scoreboard is written.
func Score(s Scenario, runs []RunResult, dir string, maxRate float64) reports.ScoreRow {
	row := reports.ScoreRow{
		Name: s.Name, Claim: s.Claim, Title: s.Title, Source: s.Source, Bug: s.Bug, Expect: s.Expect, Repro: s.ReproCommand(),
		Command: s.Command(1),
	}
	for _, side := range s.Sides() {
		row.Predictions = append(row.Predictions, reports.ScorePrediction{Side: side, Says: s.Predictions[side]})
	}
	return Rescore(row, runs, dir, maxRate)
}

// Rescore sums up runs into row, whose scenario fields (name, claim,
// title, source, expectation, predictions) are kept and whose counts,
// rate, verdict, links and seeds are made again from runs alone. Merge
// uses it to join the rows of several shards.
func Rescore(row reports.ScoreRow, runs []RunResult, dir string, maxRate float64) reports.ScoreRow {
	runs = slices.Clone(runs)
	slices.SortFunc(runs, func(a, b RunResult) int { return cmp.Compare(a.Seed, b.Seed) })
	cmdFallback := row.Command
	row.Seeds, row.MaxRate = runs, maxRate
	row.Runs, row.Conclusive, row.Violations, row.Seconds = len(runs), 0, 0, 0
	row.FirstViolation, row.Anomalies, row.Versions = -1, map[string]int{}, runstore.Versions{}
	row.Rate, row.Lo, row.Hi, row.Upper, row.Observed, row.Reason, row.Report = 0, 0, 1, 1, "", "", ""
	var linked *RunResult
	var reasons []string
	for i := range runs {
		r := &runs[i]
		row.Seconds += r.Seconds
		row.Versions = row.Versions.Merge(r.Versions)
		for k, n := range r.Kinds {
			row.Anomalies[k] += n
		}
		if r.Outcome == "" {
			reasons = append(reasons, fmt.Sprintf("seed %d: %s", r.Seed, r.Reason))
			continue
		}
		row.Conclusive++
		if r.Outcome == ExpectViolation {
			row.Violations++
			if row.FirstViolation < 0 || (r.FirstViolation >= 0 && r.FirstViolation < row.FirstViolation) {
				row.FirstViolation = r.FirstViolation
			}
			if linked == nil || linked.Outcome != ExpectViolation {
				linked = r
			}
		}
		if linked == nil && r.Dir != "" {
			linked = r
		}
	}
	if linked == nil && len(runs) > 0 {
		linked = &runs[0]
	}
	row.Command = cmdFallback
	if linked != nil {
		if linked.Command != "" {
			row.Command = linked.Command
		}
		if rel, ok := relLink(dir, filepath.Join(linked.Dir, runstore.ReportFile)); ok && linked.Dir != "" {
			row.Report = rel
		}
	}
	row.Survival = reports.NewSurvival(SurvivalSample(runs))
	if row.Conclusive > 0 {
		ci := stats.Wilson(row.Violations, row.Conclusive)
		row.Rate, row.Lo, row.Hi = float64(row.Violations)/float64(row.Conclusive), ci.Lo, ci.Hi
		row.Upper = stats.Upper95(row.Violations, row.Conclusive)
		row.Observed = ExpectSafe
		if row.Violations > 0 {
			row.Observed = ExpectViolation
		}
	}
	inconclusive := strings.Join(reasons, "; ")
	switch {
	case row.Conclusive == 0:
		row.Verdict, row.Reason = reports.Inconclusive, orDefault(inconclusive, "no run was made")
	case row.Expect == ExpectViolation && row.Violations > 0:
		row.Verdict = reports.Reproduced
	case row.Expect == ExpectViolation:
		row.Verdict = reports.NotReproduced
		row.Reason = fmt.Sprintf("no violation in %d conclusive runs", row.Conclusive)
		if inconclusive != "" {
			row.Reason += "; " + inconclusive
		}
	case row.Violations > 0:
		row.Verdict, row.Reason = reports.Refuted, fmt.Sprintf("%d of %d runs showed a violation", row.Violations, row.Conclusive)
	case inconclusive != "":
		// A safety claim is only as good as every run that tested it.
		row.Verdict, row.Reason = reports.Inconclusive, inconclusive
	case row.Upper < maxRate:
		row.Verdict = reports.Held
		row.Reason = fmt.Sprintf("no violation in %d runs: the rate is at most %s at 95%% confidence, below %s", row.Conclusive, reports.Percent(row.Upper), reports.Percent(maxRate))
	default:
		row.Verdict = reports.NotRefuted
		row.Reason = fmt.Sprintf("no violation in %d runs: the rate is at most %s at 95%% confidence, not below %s (%d runs without one would show that)",
			row.Conclusive, reports.Percent(row.Upper), reports.Percent(maxRate), stats.SeedsToHold(maxRate))
	}
	for i := range row.Predictions {
		p := &row.Predictions[i]
		p.Agrees = ""
		if row.Observed != "" {
			p.Agrees = "no"
			if Outcome(p.Says) == row.Observed {
				p.Agrees = "yes"
			}
		}
	}
	return row
}

// Merge joins scoreboards made by shards of one debate (the same
// catalogue and seeds, Options.Shard) into one, its rows rescored over
// every shard's runs as one unsharded debate would have scored them. Rows
// are matched by scenario name and kept in the order of their first
// board; a seed of one scenario in two boards is an error, since the
// shards were not disjoint. Links are made relative to dir. The public
// bugs of the boards are joined, by id, in the order first seen.
func Merge(boards []reports.Scoreboard, dir string, maxRate float64) (reports.Scoreboard, error) {
	if len(boards) == 0 {
		return reports.Scoreboard{}, errors.New("no scoreboard to merge")
	}
	out := boards[0]
	out.Rows, out.Shard, out.MaxRate, out.Versions = nil, "", maxRate, runstore.Versions{}
	out.Bugs = slices.Clone(out.Bugs)
	type acc struct {
		row   reports.ScoreRow
		runs  []RunResult
		seeds map[int64]int
	}
	if err := completeShards(boards); err != nil {
		return out, err
	}
	var order []string
	rows := map[string]*acc{}
	var elapsed time.Duration
	for bi, b := range boards {
		if b.SchemaVersion > reports.ScoreboardSchemaVersion {
			return out, fmt.Errorf("scoreboard %d has schema_version %d; this locktest reads up to %d", bi+1, b.SchemaVersion, reports.ScoreboardSchemaVersion)
		}
		if d, err := time.ParseDuration(b.Elapsed); err == nil {
			elapsed = max(elapsed, d)
		}
		out.Seeds = max(out.Seeds, b.Seeds)
		if bi > 0 {
			for _, bug := range b.Bugs {
				if !slices.ContainsFunc(out.Bugs, func(o reports.Bug) bool { return o.ID == bug.ID }) {
					out.Bugs = append(out.Bugs, bug)
				}
			}
		}
		for _, r := range b.Rows {
			a := rows[r.Name]
			if a == nil {
				a = &acc{row: r, seeds: map[int64]int{}}
				rows[r.Name] = a
				order = append(order, r.Name)
			}
			for _, run := range r.Seeds {
				if prev, dup := a.seeds[run.Seed]; dup {
					return out, fmt.Errorf("scenario %s seed %d is in scoreboards %d and %d: the shards overlap", r.Name, run.Seed, prev+1, bi+1)
				}
				a.seeds[run.Seed] = bi
				a.runs = append(a.runs, run)
			}
		}
	}
	for _, name := range order {
		a := rows[name]
		row := Rescore(a.row, a.runs, dir, maxRate)
		out.Versions = out.Versions.Merge(row.Versions)
		out.Rows = append(out.Rows, row)
	}
	out.Elapsed = elapsed.String()
	return out, nil
}

// completeShards checks that boards made by shards (Shard "I/N") are every
// shard of one debate: one N, each I once, the same seeds. Boards that are
// not shards (a debate of its own, a merge) are joined as they are.
func completeShards(boards []reports.Scoreboard) error {
	n, seeds := 0, -1
	have := map[int]bool{}
	for bi, b := range boards {
		if b.Shard == "" {
			continue
		}
		var i, m int
		if _, err := fmt.Sscanf(b.Shard, "%d/%d", &i, &m); err != nil || i < 1 || i > m {
			return fmt.Errorf("scoreboard %d: shard %q is not I/N", bi+1, b.Shard)
		}
		switch {
		case n == 0:
			n, seeds = m, b.Seeds
		case m != n:
			return fmt.Errorf("scoreboard %d is shard %s, the others are of %d shards", bi+1, b.Shard, n)
		case b.Seeds != seeds:
			return fmt.Errorf("scoreboard %d (shard %s) ran %d seeds, the others %d: not shards of one debate", bi+1, b.Shard, b.Seeds, seeds)
		}
		if have[i] {
			return fmt.Errorf("shard %s is given twice: the shards overlap", b.Shard)
		}
		have[i] = true
	}
	var missing []string
	for i := 1; i <= n; i++ {
		if !have[i] {
			missing = append(missing, fmt.Sprintf("%d/%d", i, n))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("shards %s are missing: a merge of some shards would score only their seeds", strings.Join(missing, ", "))
	}
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// relLink is target's path from the folder dir, for a link of a page
// written in dir. One of them relative and the other absolute (a store
// given as a relative --store, a run folder made absolute) are both taken
// from the working folder first.
func relLink(dir, target string) (string, bool) {
	if filepath.IsAbs(dir) != filepath.IsAbs(target) {
		d, err1 := filepath.Abs(dir)
		t, err2 := filepath.Abs(target)
		if err1 != nil || err2 != nil {
			return "", false
		}
		dir, target = d, t
	}
	rel, err := filepath.Rel(dir, target)
	return rel, err == nil
}
