package reports

import (
	"encoding/xml"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/runstore"
)

// TestSurvivalFiguresAndText: the texts a design review quotes, on
// hand-built runs. The rate bounds are the exact Poisson ones, 2.996,
// 4.744, 6.296 and 7.754 events per unit of exposure for 0 to 3 events
// (half the chi-square quantiles), over the run-hours observed.
func TestSurvivalFiguresAndText(t *testing.T) {
	tests := []struct {
		name         string
		obs          []stats.Observation
		median, text string
	}{
		{"clean runs bound the rate", []stats.Observation{{Time: 300}, {Time: 300}},
			"no violation", "no violation in 10.0 run-minutes under these faults: fewer than 18 per hour at 95%"},
		{"half broke", []stats.Observation{{Time: 2, Event: true}, {Time: 4, Event: true}, {Time: 10}, {Time: 10}},
			"4.0 s (95% CI 2.0–∞)", "median time to failure 4.0 s (95% CI 2.0–∞); 2 of 4 runs broke in 26.0 run-seconds (277 per hour, at most 872 at 95%)"},
		{"over half outlived", []stats.Observation{{Time: 3, Event: true}, {Time: 20}, {Time: 20}},
			"not reached (over half the runs outlived 20 s)", "median time to failure not reached (over half the runs outlived 20 s); 1 of 3 runs broke in 43.0 run-seconds (84 per hour, at most 397 at 95%)"},
		{"every run broke at once", []stats.Observation{{Time: 0.25, Event: true}, {Time: 0.25, Event: true}, {Time: 0.5, Event: true}},
			"0.25 s (95% CI 0.25–∞)", "median time to failure 0.25 s (95% CI 0.25–∞); 3 of 3 runs broke in 1.0 run-seconds (10800 per hour, at most 27913 at 95%)"},
	}
	for _, tt := range tests {
		s := NewSurvival(tt.obs)
		if got := s.MedianText(); got != tt.median {
			t.Errorf("%s: median %q, want %q", tt.name, got, tt.median)
		}
		if got := s.Text(); got != tt.text {
			t.Errorf("%s: text %q, want %q", tt.name, got, tt.text)
		}
		if s.Runs != len(tt.obs) || len(s.Observations) != len(tt.obs) {
			t.Errorf("%s: %d runs, %d observations", tt.name, s.Runs, len(s.Observations))
		}
		// The stored runs give the same curve again.
		if c := s.Curve(); c.Events != s.Violations || len(c.Steps) != len(s.Steps) {
			t.Errorf("%s: the curve made again has %d events and %d steps, the stored one %d and %d", tt.name, c.Events, len(c.Steps), s.Violations, len(s.Steps))
		}
	}
	if NewSurvival(nil) != nil {
		t.Error("no run gave a curve")
	}
	var none *Survival
	if none.MedianText() != "—" || none.Text() != "" || none.Sample() != nil {
		t.Error("a nil survival renders as something")
	}
}

// TestSurvivalSVG: the chart is well-formed SVG, with one curve (and one
// band) per series that has runs, a censoring tick per time at which runs
// ended clean, a legend only for several series, and nothing loaded from
// elsewhere.
func TestSurvivalSVG(t *testing.T) {
	a := NewSurvival([]stats.Observation{{Time: 1, Event: true}, {Time: 2.5, Event: true}, {Time: 8}, {Time: 8}})
	b := NewSurvival([]stats.Observation{{Time: 4, Event: true}, {Time: 6}, {Time: 8}})
	svg := string(SurvivalSVG("time to failure", []SurvivalCurve{{"redlock", a}, {"redis", b}, {"empty", nil}}))
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, svg)
	}
	if n := strings.Count(svg, `fill="none" stroke=`); n != 2 {
		t.Errorf("%d curves, want 2", n)
	}
	if n := strings.Count(svg, `opacity="0.12"`); n != 2 {
		t.Errorf("%d bands, want 2", n)
	}
	if n := strings.Count(svg, `stroke-width="1.5"`); n != 3 { // a at 8; b at 6 and 8
		t.Errorf("%d censoring ticks, want 3", n)
	}
	for _, want := range []string{">redlock</text>", ">redis</text>", "median time to failure 2.5 s"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	// a's curve: 1 until 1 s, 3/4 until 2.5 s, then 1/2 to the end (8 s).
	plotW := kmPlotW
	x := func(s float64) string { return f1(kmLeft + s/8*plotW) }
	y := func(s float64) string { return f1(kmTop + kmPlotH - s*kmPlotH) }
	if want := "M" + x(0) + " " + y(1) + " H" + x(1) + " V" + y(0.75) + " H" + x(2.5) + " V" + y(0.5) + " H" + x(8); !strings.Contains(svg, want) {
		t.Errorf("a's curve is not %q:\n%s", want, svg)
	}
	one := string(SurvivalSVG("one", []SurvivalCurve{{"", a}}))
	if strings.Contains(one, "<text x=\""+f1(kmLeft+kmPlotW+28)) || !strings.Contains(one, `width="300"`) {
		t.Error("a single curve is not drawn small and without a legend")
	}
	if SurvivalSVG("none", []SurvivalCurve{{"x", nil}}) != "" {
		t.Error("a chart without runs was drawn")
	}
	// Inline in an HTML page it needs no namespace, and names no address
	// (the scoreboard page is checked for none).
	if strings.Contains(svg, "http") {
		t.Error("the chart names an address")
	}
}

// TestTimeToFailureAndRunObservation: the one rule by which the
// scoreboard and the matrix turn a run into a survival observation, on
// hand-built results: the earliest op of a counted anomaly, not the first
// anomaly listed; uncounted kinds and ops outside the history ignored.
func TestTimeToFailureAndRunObservation(t *testing.T) {
	h := history.History{
		{Type: history.Invoke, Process: 0, F: history.Acquire, Time: ms(100)},
		{Type: history.OK, Process: 0, F: history.Acquire, Time: ms(200)},
		{Type: history.Invoke, Process: 1, F: history.Acquire, Time: ms(1500)},
		{Type: history.OK, Process: 1, F: history.Acquire, Time: ms(2500)},
	}
	r := runstore.Results{Checkers: []checker.Result{
		{Checker: "a", Anomalies: []checker.Anomaly{{Kind: "stale-write", Ops: []int{3}}, {Kind: "stuck-lock", Ops: []int{0}}}},
		{Checker: "b", Anomalies: []checker.Anomaly{{Kind: "overlapping-holds", Ops: []int{2, 3, 99}}}},
	}}
	safety := func(k string) bool { return k != "stuck-lock" }
	if first, workload := TimeToFailure(r, h, safety); first != 1.5 || workload != 2.5 {
		t.Errorf("safety kinds: first %v, workload %v; want 1.5 and 2.5", first, workload)
	}
	if first, _ := TimeToFailure(r, h, func(k string) bool { return k == "stale-write" }); first != 2.5 {
		t.Errorf("stale writes only: first %v, want 2.5", first)
	}
	if first, workload := TimeToFailure(r, nil, safety); first != -1 || workload != 0 {
		t.Errorf("no history: first %v, workload %v; want -1 and 0", first, workload)
	}

	tests := []struct {
		name                 string
		conclusive, violated bool
		first, workload      float64
		want                 stats.Observation
		ok                   bool
	}{
		{"broke at its first violation", true, true, 1.5, 10, stats.Observation{Time: 1.5, Event: true}, true},
		{"broke, its time unknown", true, true, -1, 10, stats.Observation{Time: 10, Event: true}, true},
		{"clean, censored at its end", true, false, -1, 10, stats.Observation{Time: 10}, true},
		{"inconclusive", false, true, 1.5, 10, stats.Observation{}, false},
		{"clean with no workload time", true, false, -1, 0, stats.Observation{}, false},
		{"broke with no time at all", true, true, -1, 0, stats.Observation{}, false},
	}
	for _, tt := range tests {
		o, ok := RunObservation(tt.conclusive, tt.violated, tt.first, tt.workload)
		if o != tt.want || ok != tt.ok {
			t.Errorf("%s: %+v, %v; want %+v, %v", tt.name, o, ok, tt.want, tt.ok)
		}
	}
}
