package reports

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/runstore"
)

// WriteRunText writes the text that `locktest run` and `locktest check`
// print of a run stored in dir whose results are r: what it ran (its
// versions, for a run that recorded them), the verdict of every checker
// (an invalid one in capitals, to stand out in a terminal), an example of
// each kind of anomaly, the run's problems and stalls, and where the
// report is; stored says whether results.json and the report were
// written.
func WriteRunText(w io.Writer, dir string, r runstore.Results, stored bool) {
	fmt.Fprintf(w, "run %s (%s, resource %s, faults %s, seed %d)\n", dir, r.Run.Impl, r.Run.Mode,
		noneOr(r.Run.Faults), r.Run.Seed)
	if v := VersionsText(r.Run.Versions); v != "" {
		fmt.Fprintf(w, "  versions: %s\n", v)
	}
	fmt.Fprintf(w, "  %d ops, %d critical sections, %d faults\n", int(r.Stats["ops"]),
		int(r.Stats["critical_sections"]), int(r.Stats["faults_injected"]))
	for _, c := range r.Checkers {
		fmt.Fprintf(w, "  %-17s %-8s %d anomalies%s  (%s)\n", c.Checker, shout(c.Valid), len(c.Anomalies),
			noteSummary(c), time.Duration(c.Elapsed).Round(time.Microsecond))
		// One example of each kind, in order of first appearance.
		first, count := byKind(c.Anomalies)
		for _, a := range first {
			fmt.Fprintf(w, "    %s ×%d, e.g. %s ops %v\n", a.Kind, count[a.Kind], a.Explanation, a.Ops)
		}
	}
	for _, e := range r.Problems {
		fmt.Fprintf(w, "  run problem: %s\n", e)
	}
	if r.Run.LongestStall() > 0 || r.Run.LongestDiskStall() > 0 {
		fmt.Fprintf(w, "  machine stalls: %s\n", StallsText(r.Run))
	}
	fmt.Fprintf(w, "verdict: %s (expected %s)\n", shout(r.Valid), r.Run.Expect)
	if !stored {
		fmt.Fprintf(w, "report: not written (see the run problems); %s holds what was stored\n", dir)
		return
	}
	fmt.Fprintf(w, "report: %s/%s\n", dir, runstore.ReportFile)
}

// noteSummary counts the notes of c by kind, for its line.
func noteSummary(c checker.Result) string {
	if len(c.Notes) == 0 {
		return ""
	}
	first, count := byKind(c.Notes)
	var parts []string
	for _, n := range first {
		parts = append(parts, fmt.Sprintf("%d %s", count[n.Kind], n.Kind))
	}
	return ", notes: " + strings.Join(parts, ", ")
}

// byKind returns the first anomaly of each kind, in order of appearance, and
// how many there are of each kind.
func byKind(as []checker.Anomaly) ([]checker.Anomaly, map[string]int) {
	count := map[string]int{}
	var first []checker.Anomaly
	for _, a := range as {
		if count[a.Kind] == 0 {
			first = append(first, a)
		}
		count[a.Kind]++
	}
	return first, count
}

// shout says an invalid verdict, so it stands out in a terminal.
func shout(v checker.Verdict) string {
	if v == checker.Invalid {
		return strings.ToUpper(VerdictWord(v))
	}
	return VerdictWord(v)
}

// noneOr joins xs with commas, or says none.
func noneOr(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ",")
}
