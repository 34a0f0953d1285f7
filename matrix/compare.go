package matrix

import (
	"fmt"
	"sort"

	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
)

// SurvivalP is the log-rank p-value below which matrix --baseline calls a
// cell's survival worse than the baseline's: 1 in 20 cells whose lock did
// not change would be flagged by chance.
const SurvivalP = 0.05

// Change is one cell of a matrix compared with the same impl's cell of
// the same column in a baseline matrix.
type Change struct {
	Impl, Column string
	// Before and After are the cell's text in the baseline and now.
	Before, After string
	// Why says in a few words what changed.
	Why string
}

// Comparison is what Compare found.
type Comparison struct {
	// Worse are cells that got worse: a violation or a stuck lock where
	// the baseline had none, or a violation rate whose 95% interval now
	// lies wholly above the baseline's.
	Worse []Change
	// Lost are cells the baseline showed to hold (held, recovers) that
	// this matrix could not show either way (inconclusive, not run): the
	// evidence is gone, not contradicted.
	Lost []Change
	// Compared counts the cells found in both matrices.
	Compared int
	// Survival are the cells whose time to failure was measured in both,
	// with the medians (Before, After) and the log-rank test (Why); those
	// that got worse are in Worse too.
	Survival []Change
}

// bad reports whether a cell shows a failure of the property.
func bad(c reports.MatrixCell) bool {
	return c.Status == reports.StatusViolated || c.Status == reports.StatusStuck
}

// good reports whether a cell shows the property holding.
func good(c reports.MatrixCell) bool {
	return c.Status == reports.StatusHeld || c.Status == reports.StatusRecovers
}

// Compare compares matrix now with baseline, cell by cell, matching rows
// by impl and cells by column key; rows and columns found in only one of
// them are not compared. It is pure: matrix --baseline exits 1 on any
// Worse change and 3 on any Lost one.
func Compare(baseline, now reports.Matrix) Comparison {
	var c Comparison
	base := map[string]reports.MatrixRow{}
	for _, r := range baseline.Rows {
		base[r.Impl] = r
	}
	for _, r := range now.Rows {
		b, ok := base[r.Impl]
		if !ok {
			continue
		}
		keys := make([]string, 0, len(r.Cells))
		for k := range r.Cells {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			after := r.Cells[k]
			before, ok := b.Cells[k]
			if !ok {
				continue
			}
			c.Compared++
			ch := Change{Impl: r.Impl, Column: k, Before: before.Text(), After: after.Text()}
			sv, survivalWorse := compareSurvival(before.Survival, after.Survival)
			if sv != nil {
				sv.Impl, sv.Column = r.Impl, k
				c.Survival = append(c.Survival, *sv)
			}
			switch {
			case bad(after) && !bad(before):
				ch.Why = fmt.Sprintf("%s now, %s in the baseline", after.Status, before.Status)
				c.Worse = append(c.Worse, ch)
			case after.Status == reports.StatusViolated && before.Status == reports.StatusViolated &&
				after.Conclusive > 0 && before.Conclusive > 0 && after.Lo > before.Hi:
				ch.Why = fmt.Sprintf("violation rate up: %d/%d (95%% interval from %.0f%%) against %d/%d (up to %.0f%%)",
					after.Violations, after.Conclusive, 100*after.Lo, before.Violations, before.Conclusive, 100*before.Hi)
				c.Worse = append(c.Worse, ch)
			case survivalWorse:
				ch.Why = sv.Why
				c.Worse = append(c.Worse, ch)
			case good(before) && !good(after) && !bad(after):
				ch.Why = fmt.Sprintf("%s now, %s in the baseline", after.Status, before.Status)
				c.Lost = append(c.Lost, ch)
			}
		}
	}
	return c
}

// compareSurvival compares the time to failure of a cell in the baseline
// (before) and now (after) with the log-rank test, in its exact form
// (stats.LogRankExact) where the runs are few enough: the change gives
// the medians and the test, and worse is true when the lock now fails
// sooner (more violations than a common curve would give it) with p below
// SurvivalP. Without runs on both sides, or with no violation on either,
// there is nothing to compare: nil.
func compareSurvival(before, after *reports.Survival) (*Change, bool) {
	if before == nil || after == nil || before.Runs == 0 || after.Runs == 0 || before.Violations+after.Violations == 0 {
		return nil, false
	}
	lr := stats.LogRankTest(after.Sample(), before.Sample())
	// A cell the sequential rule stopped at 1 violated run has one time:
	// the chi-square's p of 1 run against 5 is 0.025 whenever that run
	// failed first, one cell in six by chance. Where the runs are few
	// enough, every split of them is counted instead (LogRankExact).
	p, test := lr.P, "log-rank"
	if pe, ok := stats.LogRankExact(after.Sample(), before.Sample()); ok {
		p, test = pe, "exact log-rank"
	}
	worse := p < SurvivalP && lr.ObservedA > lr.ExpectedA
	was, now := before.MedianText(), after.MedianText()
	ch := &Change{Before: "median time to failure " + was, After: "median time to failure " + now}
	ch.Why = fmt.Sprintf("time to failure: median %s now, %s in the baseline; %s p = %.2g (%.0f violations now where a common curve gives %.1f)",
		now, was, test, p, lr.ObservedA, lr.ExpectedA)
	if worse {
		ch.Why = "survival worse: " + ch.Why
	}
	return ch, worse
}
