package matrix

import (
	"fmt"
	"sort"

	"github.com/locktest/locktest/reports"
)

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
			switch {
			case bad(after) && !bad(before):
				ch.Why = fmt.Sprintf("%s now, %s in the baseline", after.Status, before.Status)
				c.Worse = append(c.Worse, ch)
			case after.Status == reports.StatusViolated && before.Status == reports.StatusViolated &&
				after.Conclusive > 0 && before.Conclusive > 0 && after.Lo > before.Hi:
				ch.Why = fmt.Sprintf("violation rate up: %d/%d (95%% interval from %.0f%%) against %d/%d (up to %.0f%%)",
					after.Violations, after.Conclusive, 100*after.Lo, before.Violations, before.Conclusive, 100*before.Hi)
				c.Worse = append(c.Worse, ch)
			case good(before) && !good(after) && !bad(after):
				ch.Why = fmt.Sprintf("%s now, %s in the baseline", after.Status, before.Status)
				c.Lost = append(c.Lost, ch)
			}
		}
	}
	return c
}
