package reports

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/testkit/schemacheck"
)

// handMargin is a search as `locktest margin` would record it: a grid of
// three pauses and two bisection steps, the boundary between 938ms and
// 1.125s, a value beyond it that held, and the lease's stated bound.
func handMargin() Margin {
	ms := float64(time.Millisecond)
	pt := func(v float64, label string, k, n int, lo, hi float64, bisect bool) MarginPoint {
		p := MarginPoint{Value: v, Label: label, Failures: k, Trials: n, Rate: float64(k) / float64(n), Low: lo, High: hi, Bisect: bisect, Runs: []MarginRun{}}
		for i := range n {
			p.Runs = append(p.Runs, MarginRun{Run: "runs/pause-" + label + "/2026112" + string(rune('0'+i)), Verdict: map[bool]string{true: "INVALID", false: "valid"}[i < k], Failed: i < k, Applied: label})
		}
		return p
	}
	m := Margin{SchemaVersion: MarginSchemaVersion, Command: "locktest margin --impl redis-set-nx-px --faults pause-client --vary pause=0s..3s --ttl 1s --trials 3 --grid 3",
		Started: "2026-11-28T15:00:00Z", Elapsed: "2m10s", Impl: "redis-set-nx-px", Fault: "pause-client", Param: "pause", Unit: "duration", From: "0s", To: "3s",
		Settings: map[string]string{"ttl": "1s", "clients": "5", "pause-point": "after-acquire"}, Trials: 3, Grid: 3, Resolution: "200ms",
		Points: []MarginPoint{
			pt(0, "0s", 0, 3, 0, 0.56, false),
			pt(938*ms, "938ms", 0, 3, 0, 0.56, true),
			pt(1125*ms, "1.125s", 2, 3, 0.21, 0.94, true),
			pt(1500*ms, "1.5s", 3, 3, 0.44, 1, false),
			pt(3000*ms, "3s", 3, 3, 0.44, 1, false),
		},
		OffPlan: []string{"planned 938ms, applied 1.052s (runs/pause-938ms/20261122)"},
		Found:   true, Breaks: "1.125s", Holds: "938ms", Boundary: "1.032s",
		Summary: "breaks at pause ≥ 1.032s (between 938ms, 0 of 3 failed, and 1.125s, 2 of 3 failed)",
		Bound:   &MarginBound{Value: 997 * ms, Label: "997ms", Rule: "the lease less the time from the acquire to the pause: TTL − gap = 1s − 3ms"},
		Runs:    15,
	}
	// One run the machine stretched: its pause ran 114 ms long.
	m.Points[1].Runs[2].Applied = "1.052s"
	return m
}

// TestMarginPage renders a hand-made search: margin.json validates against
// its schema, and the page (a golden file) draws every point with its
// interval, the bracket and the stated bound, with no script.
func TestMarginPage(t *testing.T) {
	m := handMargin()
	dir := t.TempDir()
	if err := WriteMargin(dir, m); err != nil {
		t.Fatal(err)
	}
	if err := schemacheck.ValidateFile("margin", filepath.Join(dir, MarginFile)); err != nil {
		t.Error(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, MarginFile))
	if err != nil {
		t.Fatal(err)
	}
	var back Margin
	if err := json.Unmarshal(b, &back); err != nil || back.Boundary != m.Boundary || len(back.Points) != 5 || back.Bound == nil {
		t.Errorf("margin.json read back: %v, %+v", err, back)
	}
	page, err := os.ReadFile(filepath.Join(dir, MarginHTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	svg := string(MarginSVG(m))
	for _, want := range []string{
		`the boundary lies between 938ms and 1.125s`,  // the bracket's band
		`stated bound 997ms`,                          // the dashed line
		`1.125s: 2 of 3 failed (67%, 95% CI 21%–94%)`, // a point with its interval
		`0s: 0 of 3 failed (0%, 95% CI 0%–56%)`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<circle"); n != 5 {
		t.Errorf("%d points drawn, want 5", n)
	}
	if bytes.Contains(page, []byte("<script")) {
		t.Error("the page has a script: it must work as a file, offline")
	}
	for _, want := range []string{"(applied 1.052s)", "1 of 15 runs applied a pause more than 200ms off the value planned", "planned 938ms, applied 1.052s (runs/pause-938ms/20261122)"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}
	got := bytes.Replace(page, []byte(reportCSS), []byte("/* report.css */"), 1)
	compareFile(t, filepath.Join("testdata", "margin.html.golden"), got)
}

// TestMarginChartOfASearchThatFoundNothing: no band, no bound, the points.
func TestMarginChartOfASearchThatFoundNothing(t *testing.T) {
	m := handMargin()
	m.Found, m.Breaks, m.Holds, m.Boundary, m.Bound, m.Reached = false, "", "", "", nil, "3s"
	for i := range m.Points {
		m.Points[i].Failures, m.Points[i].Rate = 0, 0
	}
	svg := string(MarginSVG(m))
	if strings.Contains(svg, "the boundary lies") || strings.Contains(svg, "stated bound") {
		t.Errorf("a search that found nothing draws a bracket or a bound:\n%s", svg)
	}
	if strings.Count(svg, "<circle") != 5 {
		t.Errorf("want 5 points:\n%s", svg)
	}
}
