package reports

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// SeededBug is what a matrix found of the bug planted in one seeded impl
// (impls.Impl.Seeded): per column, whether its runs showed what the runs
// of the correct recipe it varies did not.
type SeededBug struct {
	// Impl is the seeded impl, Base the correct impl it varies, Bug its bug
	// in one line.
	Impl string `json:"impl"`
	Base string `json:"base"`
	Bug  string `json:"bug"`
	// Cells are the columns that could catch it (mutual exclusion under
	// each fault class, deadlock freedom), by the matrix's column key.
	Cells map[string]SeededCell `json:"cells"`
	// CaughtBy are the keys of the columns whose cell caught the bug, in
	// the matrix's column order; empty when none did.
	CaughtBy []string `json:"caught_by"`
	// Rate8 and BaseRate8 are the critical sections per second of the
	// fault-free 8-client runs of the seeded impl and of its recipe, the
	// sign of a bug that costs availability rather than safety; 0 when not
	// measured.
	Rate8     float64 `json:"rate8,omitempty"`
	BaseRate8 float64 `json:"base_rate8,omitempty"`
}

// The statuses of a SeededCell.
const (
	// SeededCaught: a run of the seeded impl showed an anomaly of a kind
	// that no run of its recipe in the same column showed.
	SeededCaught = "caught"
	// SeededSame: the seeded impl's runs showed anomalies, all of kinds
	// its recipe's runs showed as well, so they do not tell the bug.
	SeededSame = "same as recipe"
	// SeededMissed: the seeded impl's conclusive runs showed no anomaly.
	SeededMissed = "missed"
	// SeededInconclusive: no run of the seeded impl could show the bug
	// (none conclusive), or its recipe's runs are missing.
	SeededInconclusive = "inconclusive"
)

// SeededCell is one column's finding of one seeded bug.
type SeededCell struct {
	// Status is one of the Seeded* statuses.
	Status string `json:"status"`
	// Runs counts the seeded impl's runs that could show the bug (those
	// conclusive, and those with an anomaly); Caught those among them
	// with an anomaly of a kind the recipe's runs did not show;
	// Violated those with any anomaly. BaseRuns counts the recipe's runs
	// that ran, and BaseViolated those among them with an anomaly.
	Runs         int `json:"runs"`
	Caught       int `json:"caught"`
	Violated     int `json:"violated"`
	BaseRuns     int `json:"base_runs"`
	BaseViolated int `json:"base_violated"`
	// Kinds counts the anomalies, by kind, that told the bug: the kinds
	// the recipe's runs of the column did not show.
	Kinds map[string]int `json:"kinds,omitempty"`
	// Median is the median, over the runs that caught the bug, of the
	// time from the run's start to the first anomaly of those kinds, in
	// seconds; 0 when no run caught it.
	Median float64 `json:"median_s,omitempty"`
}

// Text is the cell as a few words: "caught 3/3: token-regression, first
// after 0.41 s (median)", "same as recipe (3/3 vs 3/3)", "missed (0/3)".
func (c SeededCell) Text() string {
	switch c.Status {
	case SeededCaught:
		return fmt.Sprintf("caught %d/%d: %s, first after %s (median)", c.Caught, c.Runs, kindList(c.Kinds), seconds(c.Median))
	case SeededSame:
		return fmt.Sprintf("same as recipe (%d/%d vs %d/%d)", c.Violated, c.Runs, c.BaseViolated, c.BaseRuns)
	case SeededMissed:
		return fmt.Sprintf("missed (0/%d)", c.Runs)
	}
	return c.Status
}

// kindList names the kinds of counts, sorted.
func kindList(counts map[string]int) string {
	ks := make([]string, 0, len(counts))
	for k := range counts {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// seconds writes s seconds with two significant digits below 10 s.
func seconds(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.2g s", s)
	}
	return fmt.Sprintf("%.0f s", s)
}

// SeededIntro says how to read the table of seeded bugs.
const SeededIntro = "Each seeded impl is a correct recipe with one bug planted; a column caught the bug when a run of the seeded impl showed an anomaly of a kind that no run of its recipe showed in the same column, and the time is from the run's start to the first such anomaly (the median over the runs that caught it)."

// SeededTable is the table of a matrix's seeded bugs: its columns (those
// of the matrix that can catch a bug) and one row per bug.
type SeededTable struct {
	Columns []MatrixColumn
	Rows    []SeededRow
}

// SeededRow is one bug's row of the table: the texts of its cells, in the
// table's column order.
type SeededRow struct {
	SeededBug
	Cells []string
	// Rate is the critical sections per second at 8 clients, the recipe's
	// in parentheses; CaughtBy the titles of the columns that caught it,
	// or "nothing".
	Rate, CaughtBy string
}

// NewSeededTable returns the table of m's seeded bugs; its Rows are empty
// when m has none.
func NewSeededTable(m Matrix) SeededTable {
	var t SeededTable
	title := map[string]string{}
	for _, c := range m.Columns {
		title[c.Key] = c.Title
		for _, s := range m.Seeded {
			if _, ok := s.Cells[c.Key]; ok {
				t.Columns = append(t.Columns, c)
				break
			}
		}
	}
	for _, s := range m.Seeded {
		r := SeededRow{SeededBug: s, Rate: "-", CaughtBy: "nothing"}
		for _, c := range t.Columns {
			r.Cells = append(r.Cells, s.Cells[c.Key].Text())
		}
		if s.Rate8 > 0 || s.BaseRate8 > 0 {
			r.Rate = fmt.Sprintf("%.0f (%.0f)", s.Rate8, s.BaseRate8)
		}
		if len(s.CaughtBy) > 0 {
			var ts []string
			for _, k := range s.CaughtBy {
				ts = append(ts, title[k])
			}
			r.CaughtBy = strings.Join(ts, ", ")
		}
		t.Rows = append(t.Rows, r)
	}
	return t
}

// RenderSeededMarkdown renders the seeded bugs of m as a Markdown table:
// one row per bug, one column per column of m that can catch one, the
// throughput beside its recipe's, and the columns that caught it; nothing
// when m has no seeded bug.
func RenderSeededMarkdown(m Matrix) []byte {
	t := NewSeededTable(m)
	if len(t.Rows) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("| seeded impl | recipe | bug |")
	for _, c := range t.Columns {
		fmt.Fprintf(&b, " %s |", mdEscape(c.Title))
	}
	b.WriteString(" cs/s, 8 clients (recipe) | caught by |\n| --- | --- | --- |")
	for range t.Columns {
		b.WriteString(" --- |")
	}
	b.WriteString(" --- | --- |\n")
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |", r.Impl, r.Base, mdEscape(r.Bug))
		for _, c := range r.Cells {
			fmt.Fprintf(&b, " %s |", mdEscape(c))
		}
		fmt.Fprintf(&b, " %s | %s |\n", r.Rate, mdEscape(r.CaughtBy))
	}
	return b.Bytes()
}
