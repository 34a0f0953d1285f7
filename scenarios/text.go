package scenarios

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
)

// WriteBoardText writes what `locktest debate` and `locktest merge` print
// of board, whose pages are in the folder out: one line per scenario with
// its claim, what it tests for, its violation rate and its verdict, and
// where the scoreboard is.
func WriteBoardText(w io.Writer, out string, board reports.Scoreboard) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "claim\tscenario\ttests for\tviolations\tverdict")
	for _, r := range board.Rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Claim, r.Name, r.Expect, r.RateText(), r.Verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "scoreboard: %s\n", filepath.Join(out, "scoreboard.html"))
}

// WriteCatalogue writes what `locktest debate --list` prints of the
// scenarios: one line each with its claim, impl, faults, resource mode
// and what it tests for.
func WriteCatalogue(w io.Writer, scs []Scenario) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "claim\tscenario\timpl\tfaults\tresource\ttests for")
	for _, s := range scs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.Claim, s.Name, s.Impl(), strings.Join(s.Faults(), ","), cmp.Or(s.Settings["resource"], "none"), s.Expect)
	}
	tw.Flush()
}

// Progress returns the Progress of a debate that started at started: one
// line on w per finished run, with what it showed, how long it took and
// how much is left.
func Progress(w io.Writer, started time.Time) func(Scenario, RunResult, int) {
	done := 0
	return func(s Scenario, r RunResult, left int) {
		done++
		what := r.Outcome
		if what == "" {
			what = "inconclusive: " + r.Reason
		}
		if len(r.Kinds) > 0 {
			what += " (" + reports.KindsText(r.Kinds) + ")"
		}
		fmt.Fprintf(w, "[%d done, %d left%s] %s seed %d: %s, %.0fs\n", done, left, run.ToGo(started, done, left), s.Name, r.Seed, what, r.Seconds)
	}
}

// WriteComparisonText writes what `locktest merge --compare` prints of c:
// how many scenarios agree, and a line for each that does not.
func WriteComparisonText(w io.Writer, c reports.ScoreComparison) {
	fmt.Fprintf(w, "compared with %s: %d of %d scenarios agree\n", c.Command, len(c.Rows)-c.Disagreements(), len(c.Rows))
	for _, r := range c.Rows {
		if !r.Agree {
			fmt.Fprintf(w, "  disagree: %s: %s (%s) against %s (%s): %s\n", r.Name, r.Here, r.HereVerdict, r.There, r.ThereVerdict, r.Why)
		}
	}
}
