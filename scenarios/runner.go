package scenarios

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// RunResult is what one run of a scenario showed.
type RunResult struct {
	Seed int64
	// Dir is the stored run; "" when the run could not start.
	Dir string
	// Outcome is ExpectViolation, ExpectSafe, or "" when the run was
	// inconclusive; Reason then says why.
	Outcome string
	Reason  string
	// Kinds counts the run's anomalies by kind.
	Kinds map[string]int
	// FirstViolation is the time, in seconds from the run's start, of the
	// earliest op of an anomaly that counts as the violation; -1 if none.
	FirstViolation float64
	Seconds        float64
}

// Options says how to run scenarios.
type Options struct {
	// Base is the run configuration the scenarios' settings are applied
	// to: the store, the worker and node programs, the logger.
	Base run.Config
	// Seeds are the seeds each scenario runs with, in order.
	Seeds []int64
	// UntilReproduced stops a scenario's seeds at the first run that shows
	// the outcome the scenario tests for.
	UntilReproduced bool
	// Progress, if set, is called after each run.
	Progress func(s Scenario, r RunResult)
}

// providerFlags are the flags that put a scenario's run where base's
// nodes run, to follow its reproducing command: "" for the local
// provider.
func providerFlags(base run.Config) string {
	var a []string
	if base.Provider != "" && base.Provider != run.ProviderLocal {
		a = append(a, "--provider", base.Provider)
	}
	if base.SSH.Inventory != "" {
		a = append(a, "--inventory", quote(base.SSH.Inventory))
	}
	if len(a) == 0 {
		return ""
	}
	return " " + strings.Join(a, " ")
}

// Run runs scenario s once per seed and returns what each run showed. A
// run that could not start (a missing server, a fault this machine cannot
// make) is an inconclusive result with the reason, not an error; errors
// are for the store and for a cancelled context, after which the results
// so far are returned too.
func Run(ctx context.Context, s Scenario, opt Options) ([]RunResult, error) {
	var out []RunResult
	for _, seed := range opt.Seeds {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		cfg, err := s.Config(opt.Base)
		if err != nil {
			return out, fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		cfg.Seed = seed
		cfg.Command = s.Command(seed) + providerFlags(opt.Base)
		start := time.Now()
		o, err := run.Run(ctx, cfg)
		r := RunResult{Seed: seed, FirstViolation: -1}
		var se *run.SetupError
		switch {
		case errors.As(err, &se):
			r.Reason = "the run could not start: " + se.Error()
		case err != nil:
			return out, fmt.Errorf("scenario %s, seed %d: %w", s.Name, seed, err)
		default:
			r.Dir = o.Dir
			h, herr := o.History()
			if herr != nil {
				return out, fmt.Errorf("scenario %s, seed %d: %w", s.Name, seed, herr)
			}
			Classify(s, o.Results, h, &r)
		}
		if ctx.Err() != nil && r.Outcome != ExpectViolation {
			r.Outcome, r.Reason = "", "interrupted"
		}
		r.Seconds = time.Since(start).Seconds()
		out = append(out, r)
		if opt.Progress != nil {
			opt.Progress(s, r)
		}
		if opt.UntilReproduced && r.Outcome == s.Expect && s.Expect == ExpectViolation {
			break
		}
	}
	return out, nil
}

// Classify decides what one run showed about scenario s, from its results
// and history, into r: a violation (an anomaly of a kind the scenario
// counts), safe (a valid verdict), or inconclusive with the reason (the run
// did not test what it meant to, or a checker could not decide).
func Classify(s Scenario, res runstore.Results, h history.History, r *RunResult) {
	r.Kinds = map[string]int{}
	first := int64(math.MaxInt64)
	for _, c := range res.Checkers {
		for _, a := range c.Anomalies {
			r.Kinds[a.Kind]++
			if len(s.Anomalies) > 0 && !slices.Contains(s.Anomalies, a.Kind) {
				continue
			}
			for _, i := range a.Ops {
				if i >= 0 && i < len(h) && h[i].Time < first {
					first = h[i].Time
				}
			}
		}
	}
	counted := 0
	for k, n := range r.Kinds {
		if len(s.Anomalies) == 0 || slices.Contains(s.Anomalies, k) {
			counted += n
		}
	}
	r.FirstViolation = -1
	switch {
	case len(res.Problems) > 0:
		r.Outcome, r.Reason = "", res.Problems[0]
		return
	case counted > 0:
		r.Outcome = ExpectViolation
		if first != math.MaxInt64 {
			r.FirstViolation = float64(first) / 1e9
		}
		return
	case res.Valid == checker.Unknown:
		var undecided []string
		for _, c := range res.Checkers {
			if c.Valid == checker.Unknown {
				undecided = append(undecided, c.Checker)
			}
		}
		r.Outcome, r.Reason = "", "checkers could not decide: "+strings.Join(undecided, ", ")
		return
	}
	r.Outcome = ExpectSafe
	if res.Valid == checker.Invalid {
		// Anomalies the scenario does not count: safe as far as this claim
		// goes, and said so.
		r.Reason = "other anomalies: " + reports.KindsText(r.Kinds)
	}
}

// Score sums up a scenario's runs into its scoreboard row. Links to run
// reports are made relative to dir, where the scoreboard is written.
func Score(s Scenario, runs []RunResult, dir string) reports.ScoreRow {
	row := reports.ScoreRow{
		Name: s.Name, Claim: s.Claim, Title: s.Title, Source: s.Source, Expect: s.Expect,
		Runs: len(runs), FirstViolation: -1, Anomalies: map[string]int{}, Repro: "repro-" + s.Name,
	}
	var linked *RunResult
	var reasons []string
	for i := range runs {
		r := &runs[i]
		row.Seconds += r.Seconds
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
	if linked == nil && len(runs) > 0 && runs[0].Dir != "" {
		linked = &runs[0]
	}
	seed := int64(1)
	if linked != nil {
		seed = linked.Seed
		if rel, err := filepath.Rel(dir, filepath.Join(linked.Dir, runstore.ReportFile)); err == nil && linked.Dir != "" {
			row.Report = rel
		}
	} else if len(runs) > 0 {
		seed = runs[0].Seed
	}
	row.Command = s.Command(seed)
	if row.Conclusive > 0 {
		ci := stats.Wilson(row.Violations, row.Conclusive)
		row.Rate, row.Lo, row.Hi = float64(row.Violations)/float64(row.Conclusive), ci.Lo, ci.Hi
		row.Observed = ExpectSafe
		if row.Violations > 0 {
			row.Observed = ExpectViolation
		}
	}
	inconclusive := strings.Join(reasons, "; ")
	switch {
	case row.Conclusive == 0:
		row.Verdict, row.Reason = reports.Inconclusive, orDefault(inconclusive, "no run was made")
	case s.Expect == ExpectViolation && row.Violations > 0:
		row.Verdict = reports.Reproduced
	case s.Expect == ExpectViolation:
		row.Verdict = reports.NotReproduced
		row.Reason = fmt.Sprintf("no violation in %d conclusive runs", row.Conclusive)
		if inconclusive != "" {
			row.Reason += "; " + inconclusive
		}
	case row.Violations > 0:
		row.Verdict, row.Reason = reports.NotReproduced, fmt.Sprintf("%d of %d runs showed a violation", row.Violations, row.Conclusive)
	case inconclusive != "":
		// A safety claim is only as good as every run that tested it.
		row.Verdict, row.Reason = reports.Inconclusive, inconclusive
	default:
		row.Verdict = reports.Reproduced
	}
	for _, side := range s.Sides() {
		p := reports.ScorePrediction{Side: side, Says: s.Predictions[side]}
		if row.Observed != "" {
			p.Agrees = "no"
			if Outcome(p.Says) == row.Observed {
				p.Agrees = "yes"
			}
		}
		row.Predictions = append(row.Predictions, p)
	}
	return row
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
