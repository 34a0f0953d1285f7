package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// RunFacts are what the decision needs to know of a run besides its
// history: how the run was made.
type RunFacts struct {
	// Mode is the resource mode ("none", "fenced", ...); "" checks
	// everything (a history with no results.json beside it).
	Mode string
	// Faults are the faults the run asked for, combined ones as
	// "partition+clock-bump".
	Faults []string
	// Errors are the run's own problems (a fault that could not be healed,
	// a worker protocol error, a history cut short) that make its history
	// suspect.
	Errors []string
	// Interrupted is a run stopped early (Ctrl-C, SIGTERM): it tested
	// less than it was asked to, so it is never valid.
	Interrupted bool
	// ServerSessions says that the locks are session locks of one server,
	// which a crash of its node ends (Linearizability.ServerSessions).
	ServerSessions bool
}

// Interrupted is the problem of a run stopped before its time was up.
const Interrupted = "the run was stopped early (Ctrl-C or SIGTERM): it tested less than it was asked to"

// Decision is the final verdict on one run: what `locktest run` and
// `locktest check` both write into results.json.
type Decision struct {
	// Valid is the verdict: the checkers' verdicts merged, and at best
	// Unknown when there are Problems.
	Valid Verdict
	// Results are the checkers' own results, in order.
	Results []Result
	// Problems are reasons the run tested less than it meant to: the run's
	// own errors, no successful acquire, faults asked for but none applied.
	Problems []string
	// Stats are the history-wide stats (see Summarize).
	Stats map[string]float64
	// Visual is the linearizability checker's search for porcupine's
	// visualization, when that checker ran (see RunVisual).
	Visual *Visualization
}

// Decide runs the checkers a run of facts calls for on h (For: those of its
// resource mode, the porcupine mutex model when the locks are not leases,
// told whether they are sessions of one server, the register model) and
// decides the run's verdict. The visualization
// covers at most maxVisualOps mutex ops. A run with problems is at best
// Unknown: it did not test what it meant to. Decide is pure, like every
// checker.
func Decide(ctx context.Context, h *history.Table, facts RunFacts, maxVisualOps int) Decision {
	cs := For(facts.Mode, Leases(h))
	for i, c := range cs {
		if l, ok := c.(Linearizability); ok && l.Model == MutexModel {
			l.ServerSessions = facts.ServerSessions
			cs[i] = l
		}
	}
	rs, vis := RunVisual(ctx, h, maxVisualOps, cs...)
	d := Judge(h, facts, rs)
	d.Visual = vis
	return d
}

// Judge decides the verdict of a run of facts whose history h the
// checkers found rs: their verdicts merged, and at best Unknown when the
// run has problems (its own errors, no successful acquire, faults asked
// for and never applied). Decide is Judge after running the checkers;
// Judge alone serves results that were found elsewhere (a test's, a
// stored run's).
func Judge(h *history.Table, facts RunFacts, rs []Result) Decision {
	return judge(facts, rs, Summarize(facts.Faults, h), neverApplied(facts.Faults, h))
}

// judge is Judge, given the history's stats (Summarize) and the faults it
// shows never applied (neverApplied).
func judge(facts RunFacts, rs []Result, stats map[string]float64, never []string) Decision {
	d := Decision{Valid: Overall(rs), Results: rs, Stats: stats}
	// How many faults had a chance to matter, as the liveness checker
	// counted them.
	for _, r := range rs {
		for _, k := range []string{"fault_windows", "faults_effective"} {
			if x, ok := r.Stats[k]; ok && len(facts.Faults) > 0 {
				d.Stats[k] = x
			}
		}
	}
	d.Problems = append(d.Problems, facts.Errors...)
	if facts.Interrupted {
		d.Problems = append(d.Problems, Interrupted)
	}
	if d.Stats["critical_sections"] == 0 {
		d.Problems = append(d.Problems, "no acquire succeeded: the run tested nothing")
	}
	if len(facts.Faults) > 0 && d.Stats["faults_injected"] == 0 {
		d.Problems = append(d.Problems, "no fault was applied: run longer, lower --interval, or shorten the faults (each must fit in --time less --quiet-time)")
	} else {
		d.Problems = append(d.Problems, never...)
	}
	if len(d.Problems) > 0 {
		d.Valid = Merge(d.Valid, Unknown)
	}
	return d
}

// Summarize computes the history-wide stats of a run: ops, critical
// sections (acquire ok), the faults injected (nemesis oks of the faults
// named in faults, as the fault registry names their ops) and the seconds
// the history spans.
func Summarize(faults []string, h *history.Table) map[string]float64 {
	faults = FaultParts(faults)
	s := map[string]float64{"ops": float64(h.Len())}
	for i := range h.Len() {
		if h.Type(i) != history.OK {
			continue
		}
		switch f := h.F(i); {
		case h.Process(i) == history.NemesisProcess && slices.Contains(faults, faultOf(f)):
			s["faults_injected"]++
		case f == history.Acquire:
			s["critical_sections"]++
		}
	}
	if n := h.Len(); n > 0 {
		s["seconds"] = float64(h.Time(n-1)) / 1e9
	}
	return s
}

// faultOf returns the name of the fault whose injection op has f, or f
// when no fault has (a heal, or an op of a fault this build does not have).
func faultOf(f string) string {
	if k, ok := history.FaultOfOp(f); ok {
		return k.Name
	}
	return f
}

// FaultParts splits combined faults ("partition+clock-bump") into their
// parts, each once, in order: the history records each part as its own op.
func FaultParts(faults []string) []string {
	var out []string
	for _, f := range faults {
		for _, p := range strings.Split(f, "+") {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// neverApplied names the faults that the nemesis tried to inject, every
// time without success: the run did not test what it asked for.
func neverApplied(faults []string, h *history.Table) []string {
	faults = FaultParts(faults)
	tried, applied := map[string]bool{}, map[string]bool{}
	for i := range h.Len() {
		if h.Process(i) != history.NemesisProcess {
			continue
		}
		f := faultOf(h.F(i))
		if !slices.Contains(faults, f) {
			continue
		}
		switch h.Type(i) {
		case history.Invoke:
			tried[f] = true
		case history.OK:
			applied[f] = true
		}
	}
	var out []string
	for _, f := range faults {
		if tried[f] && !applied[f] {
			out = append(out, fmt.Sprintf("fault %s was tried but never applied (see its failed ops)", f))
		}
	}
	return out
}
