package matrix

import (
	"fmt"
	"slices"

	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
)

// The matrix samples each cell sequentially: the seeds of a cell run one
// after the other, seed s only once seeds 1..s-1 of the same cell have
// finished, and a cell whose verdict is decided (Decided) runs no more
// seeds. Which runs a cell gets so depends only on what its own runs
// showed, never on which run happened to finish first, so a matrix made
// one run at a time and one made four at a time have the same cells.

// cellKey names the cell a job's seeds sample: its impl, its probe and
// its fault class.
type cellKey struct {
	impl  string
	probe Probe
	class Class
}

func keyOf(j Job) cellKey { return cellKey{j.Impl, j.Probe, j.Class} }

// Sequential reports whether the seeds of probe p are sampled
// sequentially, so that a decided cell stops adding seeds: the safety runs
// and the deadlock runs. The probes that run once per impl (perf-1,
// reentrancy) have nothing to stop.
func Sequential(p Probe) bool { return p == ProbeSafety || p == ProbeDeadlock }

// Decided reports whether the runs rs of one cell, its seeds in order,
// decide its verdict so that more seeds could not change it, and says why
// in a phrase:
//   - a safety cell whose violation rate is shown to lie above
//     stats.DefaultMaxRate (the 95% Wilson interval of k violations in n
//     conclusive runs starts above it: 1 of 1, 2 of 2 to 4, 3 of 5 to 7)
//     is violated, and more seeds would only narrow its rate;
//   - a safety cell whose runs were all n/a (its faults do not apply to
//     the backend; a fenced cell of a client without tokens) is n/a, a
//     fact of the backend or the client that every seed repeats;
//   - a deadlock cell that saw a lock stay stuck after its holder died is
//     stuck, which no later run can undo.
//
// Every other cell, and every cell with a run that could not start, is not
// decided: a cell that held runs all its seeds, as its upper bound needs
// them.
func Decided(p Probe, rs []Result) (bool, string) {
	if len(rs) == 0 || !Sequential(p) {
		return false, ""
	}
	if p == ProbeDeadlock {
		c := deadlockCell(rs)
		if c.Status == reports.StatusStuck {
			return true, "a lock stayed stuck after its holder died"
		}
		return false, ""
	}
	if slices.ContainsFunc(rs, func(r Result) bool { return r.Err != "" }) {
		return false, ""
	}
	t := tallySafety(rs)
	k, n, na := t.k, t.n, len(t.na)
	if na == len(rs) {
		return true, "n/a, which every seed would repeat: " + rs[0].Safety.Reason
	}
	if lo := stats.Wilson(k, n).Lo; k > 0 && lo > stats.DefaultMaxRate {
		return true, fmt.Sprintf("%s in %s put the rate at %s or more at 95%%, above the %s a held cell may still have",
			count(k, "violation"), count(n, "run"), reports.Percent(lo), reports.Percent(stats.DefaultMaxRate))
	}
	return false, ""
}

// stoppedText says, of a cell whose runs rs stopped before the planned
// seeds, that the sequential rule stopped it and why; "" when the cell ran
// every seed or is not decided.
func stoppedText(p Probe, rs []Result, planned int) string {
	if len(rs) == 0 || len(rs) >= planned {
		return ""
	}
	ok, why := Decided(p, rs)
	if !ok {
		return ""
	}
	return fmt.Sprintf("stopped after %d of %d seeds: %s", len(rs), planned, why)
}

// count says n of what, in the plural unless n is 1: "1 run", "2 runs".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
