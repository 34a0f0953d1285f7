package matrix

import (
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/workloads"
)

// ClassClientPauseFenced is the client-pause class run again with the
// resource store in fenced mode (--resource fenced: the store rejects a
// write whose fencing token is lower than the highest it accepted), for
// the impls whose leases carry a fencing token: the "saved by fencing"
// column (ColFenced). It is a variant of ClassClientPause, not a column of
// its own in Classes: its jobs are ProbeSafety jobs, so they are sampled
// sequentially as every safety cell is (Sequential, Decided), and their
// Safety is what the resource showed (ClassifyFenced), not mutual
// exclusion. Its runs are stored as matrix-<impl>-client-pause-fenced.
const ClassClientPauseFenced Class = "client-pause-fenced"

// ColFenced is the column key of the saved-by-fencing cell.
const ColFenced = "saved-by-fencing"

// ResourceModes are the values of Options.Resource (--resource): fenced
// adds the saved-by-fencing column, none leaves it out. The mutex columns
// always run with resource mode none.
var ResourceModes = []workloads.Mode{workloads.ModeFenced, workloads.ModeNone}

// fencedColumn is the saved-by-fencing column.
var fencedColumn = reports.MatrixColumn{Key: ColFenced, Title: "saved by fencing",
	Doc: "the client-pause runs again (a holder frozen right after its acquire for 4 TTLs, the GC pause of the debate) with the resource store in fenced mode " +
		"(--resource fenced: it rejects a write whose fencing token is lower than the highest it accepted), for the impls whose leases carry a fencing token. " +
		"held (saved) when no run's store accepted a stale write or lost an update, although the lock broke in every run counted (the paused holder woke and wrote after a newer holder was granted the lock, and the store rejected it); " +
		"violated (not saved) in the runs where the store still accepted one: the share of runs that lost an update, with its 95% Wilson interval. " +
		"n/a for an impl without fencing tokens. Each run runs its whole time, so that the paused holder wakes and writes."}

// FencedRun is what a run of ClassClientPauseFenced showed besides its
// Safety (which is the resource's): whether the lock itself broke, and
// how many stale writes the store rejected.
type FencedRun struct {
	// LockBroke is true when the lock let two holders act at once: a
	// holder wrote after its lease ended while a newer holder had the lock
	// (the store rejected it, or accepted it: a resource violation), or a
	// lock checker (mutual exclusion, fencing tokens) found an anomaly. A
	// lease lock's paused holder shows so: its hold ends with its lease,
	// and only its late write shows it still acted as the holder.
	LockBroke bool
	// LockKinds counts those anomalies by kind.
	LockKinds map[string]int
	// Rejected is how many writes the store rejected from a holder whose
	// lease had ended (the resource checker's saved_by_fencing).
	Rejected int
}

// lockHeld is why a fenced run whose resource held is not counted when
// the lock did not break in it.
const lockHeld = "the lock did not break in this run (no two holders at once), so the fenced store had nothing to save the resource from"

// resourceChecker is the checker of what the resource store accepted.
const resourceChecker = "resource"

// ClassifyFenced reads a fenced run's results: its Safety says whether the
// resource was violated (an anomaly of the resource checker: a stale write
// accepted, a lost update, a token regression it accepted), and FencedRun
// whether the lock broke. A run whose resource was violated is conclusive
// whatever else went wrong; one whose resource held is conclusive only
// when the run has no problems, the resource checker said valid and the
// lock broke at least once (else the store had nothing to save: the run
// could not show fencing at work). A client that gives no fencing token
// makes the run n/a.
func ClassifyFenced(r runstore.Results) (Safety, FencedRun) {
	s := Safety{Kinds: map[string]int{}, Faults: int(r.Stats["faults_injected"]), Effective: r.EffectiveFaults()}
	f := FencedRun{LockKinds: map[string]int{}}
	var resource *checker.Result
	for i, c := range r.Checkers {
		if c.Checker == resourceChecker {
			resource = &r.Checkers[i]
			f.Rejected = int(c.Stats["saved_by_fencing"])
		}
		for _, a := range c.Anomalies {
			if !slices.Contains(checker.SafetyKinds, a.Kind) {
				continue
			}
			if c.Checker == resourceChecker {
				s.Kinds[a.Kind]++
			} else {
				f.LockKinds[a.Kind]++
			}
		}
	}
	f.LockBroke = len(f.LockKinds) > 0 || f.Rejected > 0 || len(s.Kinds) > 0
	if len(s.Kinds) > 0 {
		s.Violated, s.Conclusive = true, true
		return s, f
	}
	for _, p := range r.Problems {
		if strings.Contains(p, "gives no fencing token") {
			s.NA, s.Reason = true, p
			return s, f
		}
	}
	switch {
	case len(r.Problems) > 0:
		s.Reason = strings.Join(r.Problems, "; ")
	case resource == nil:
		s.Reason = "the results have no resource checker"
	case resource.Valid != checker.Valid:
		s.Reason = fmt.Sprintf("the resource checker gave %s", reports.VerdictWord(resource.Valid))
		if resource.Error != "" {
			s.Reason += ": " + resource.Error
		}
	case !f.LockBroke:
		s.Reason = lockHeld
	default:
		s.Conclusive = true
	}
	return s, f
}

// fencedCell aggregates the fenced runs rs of impl: n/a for an impl
// without fencing tokens (an external client's runs say whether it gives
// them); held (saved) when the store accepted no stale write in any
// conclusive run although the lock broke in each; violated (not saved)
// with the runs that lost an update among the conclusive ones and their
// 95% interval; inconclusive with the reasons when no run was conclusive.
// Its counts and interval are those of a safety cell, so that Compare
// gates on it as on the mutex cells.
func fencedCell(fenced bool, rs []Result) reports.MatrixCell {
	cell := reports.MatrixCell{Links: links(rs)}
	if !fenced && len(rs) == 0 {
		cell.Status, cell.Links = reports.StatusNA, nil
		cell.Reason = "the leases carry no fencing token: no store can tell a stale holder's write from the holder's (the mutex columns show what that costs; a check-and-set store can still refuse it: locktest run --resource check-and-set)"
		return cell
	}
	if len(rs) == 0 {
		cell.Status, cell.Reason = reports.StatusNotRun, "no fenced run: the client-pause class was not in this matrix, or --resource none left the column out"
		return cell
	}
	t := tallySafety(rs)
	k, n, kinds, na, inconclusive := t.k, t.n, t.kinds, t.na, t.inconclusive
	broke, rejected := 0, 0
	for _, r := range t.conclusive {
		if r.Fenced != nil {
			rejected += r.Fenced.Rejected
			if r.Fenced.LockBroke {
				broke++
			}
		}
	}
	reason := func(r Result) string { return r.Safety.Reason }
	switch {
	case n == 0 && len(na) > 0 && len(inconclusive) == 0:
		cell.Status, cell.Reason = reports.StatusNA, whyNot(na, reason)
		return cell
	case n == 0 && len(na) == 0 && !slices.ContainsFunc(inconclusive, func(r Result) bool { return r.Err != "" || r.Safety.Reason != lockHeld }):
		// The lock held under the pause in every run: a fact of the mutex
		// column, not a run that could not tell.
		cell.Status = reports.StatusNA
		cell.Reason = fmt.Sprintf("the lock did not break in any of the %d fenced run(s): fencing had nothing to save the resource from (see the client-pause mutex column)", len(rs))
		return cell
	case n == 0:
		cell.Status, cell.Reason = reports.StatusInconclusive, whyNot(append(inconclusive, na...), reason)
		return cell
	}
	ci := stats.Wilson(k, n)
	cell.Runs, cell.Conclusive, cell.Violations, cell.Lo, cell.Hi = len(rs), n, k, ci.Lo, ci.Hi
	if k > 0 {
		cell.Status = reports.StatusViolated
		cell.Value = fmt.Sprintf("not saved: %d/%d runs lost an update (the lock broke in %d/%d)", k, n, broke, n)
		cell.Reason = fmt.Sprintf("not saved by fencing: in %d of %d runs (95%% interval %s–%s) the fenced store still accepted what the lock's violation let through: %s; it rejected %d stale write(s) in all",
			k, n, reports.Percent(ci.Lo), reports.Percent(ci.Hi), reports.KindsText(kinds), rejected)
	} else {
		cell.Status = reports.StatusHeld
		cell.Value = fmt.Sprintf("saved: 0/%d runs lost an update (the lock broke in %d/%d)", n, broke, n)
		cell.Reason = fmt.Sprintf("saved by fencing: the lock broke in each of the %d run(s) counted, and the fenced store rejected %d stale write(s) and accepted none; the share of runs it would not save is at most %s at 95%% confidence, not zero",
			n, rejected, reports.Percent(ci.Hi))
	}
	if len(inconclusive)+len(na) > 0 {
		cell.Reason += fmt.Sprintf("; %d more run(s) not counted: %s", len(inconclusive)+len(na), whyNot(append(inconclusive, na...), reason))
	}
	return cell
}
