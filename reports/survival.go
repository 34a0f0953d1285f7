package reports

import (
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/runstore"
)

// Survival is how long a lock lasted under one set of faults, from the
// conclusive runs that tested it: each run's time to its first violation,
// or, for a run that ended clean, the time it ran, after which it is
// censored (it says only that the lock lasted at least that long). It
// carries the runs themselves, so that a reader can redraw the curve or
// test it against another (matrix --baseline does, with a log-rank test),
// and the Kaplan–Meier estimate made from them.
type Survival struct {
	// Runs counts the runs, Violations those that broke the lock.
	Runs       int `json:"runs"`
	Violations int `json:"violations"`
	// ExposureS is the time observed, in seconds, summed over the runs:
	// each run up to its first violation or its end.
	ExposureS float64 `json:"exposure_s"`
	// MedianS is the median time to failure, in seconds, with its 95%
	// interval [MedianLoS, MedianHiS] (Brookmeyer–Crowley). Each is
	// absent when the curve (or that bound of its interval) never fell to
	// one half: more than half the runs outlived what was observed.
	MedianS   *float64 `json:"median_s,omitempty"`
	MedianLoS *float64 `json:"median_lo_s,omitempty"`
	MedianHiS *float64 `json:"median_hi_s,omitempty"`
	// RatePerHour is the violations per run-hour of exposure, and
	// RateUpperPerHour the one-sided 95% upper bound of that rate for a
	// Poisson process: with no violation, "fewer than RateUpperPerHour
	// per hour at 95%".
	RatePerHour      float64 `json:"rate_per_hour"`
	RateUpperPerHour float64 `json:"rate_upper_per_hour"`
	// Steps are the Kaplan–Meier curve's steps, one per time at which a
	// run broke; before the first the survival is 1.
	Steps []SurvivalStep `json:"steps,omitempty"`
	// Observations are the runs, in the order given.
	Observations []SurvivalObservation `json:"observations"`
}

// SurvivalStep is one step of a Kaplan–Meier curve: at TS seconds,
// Events of the AtRisk runs still unbroken broke, and the share of runs
// that survive fell to S, with its pointwise 95% interval [Lo, Hi].
type SurvivalStep struct {
	TS     float64 `json:"t_s"`
	AtRisk int     `json:"at_risk"`
	Events int     `json:"events"`
	S      float64 `json:"s"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
}

// SurvivalObservation is one run: the seconds to its first violation
// (Violation true), or the seconds it ran clean.
type SurvivalObservation struct {
	TS        float64 `json:"t_s"`
	Violation bool    `json:"violation"`
}

// NewSurvival estimates the survival of the runs obs; nil without a run.
// Observations at negative times count as at 0.
func NewSurvival(obs []stats.Observation) *Survival {
	if len(obs) == 0 {
		return nil
	}
	s := &Survival{}
	for _, o := range obs {
		s.Observations = append(s.Observations, SurvivalObservation{TS: round3(max(o.Time, 0)), Violation: o.Event})
	}
	c := s.Curve()
	s.Runs, s.Violations, s.ExposureS = c.Runs, c.Events, round3(c.Exposure)
	s.MedianS, s.MedianLoS, s.MedianHiS = finite(c.Median), finite(c.MedianLo), finite(c.MedianHi)
	if c.Exposure > 0 {
		hours := c.Exposure / 3600
		s.RatePerHour = round3(float64(c.Events) / hours)
		s.RateUpperPerHour = round3(stats.PoissonUpper95(c.Events, hours))
	}
	for _, st := range c.Steps {
		s.Steps = append(s.Steps, SurvivalStep{TS: st.Time, AtRisk: st.AtRisk, Events: st.Events,
			S: round4(st.Survival), Lo: round4(st.Lo), Hi: round4(st.Hi)})
	}
	return s
}

// Sample returns the runs as stats.Observations; none for nil.
func (s *Survival) Sample() []stats.Observation {
	if s == nil {
		return nil
	}
	out := make([]stats.Observation, len(s.Observations))
	for i, o := range s.Observations {
		out[i] = stats.Observation{Time: o.TS, Event: o.Violation}
	}
	return out
}

// Curve estimates the Kaplan–Meier curve of s's runs again.
func (s *Survival) Curve() stats.Curve { return stats.KaplanMeier(s.Sample()) }

// TimeToFailure reads one run's times from its results r and history h,
// in seconds from the run's start: first is the time of the earliest op
// of any anomaly whose kind counts (-1 when none names an op of h), and
// workload the time of h's last op (0 for an empty history). The
// scoreboard counts a scenario's own anomaly kinds, the matrix every
// safety kind.
func TimeToFailure(r runstore.Results, h history.History, counts func(kind string) bool) (first, workload float64) {
	earliest := int64(-1)
	for _, c := range r.Checkers {
		for _, a := range c.Anomalies {
			if !counts(a.Kind) {
				continue
			}
			for _, i := range a.Ops {
				if i >= 0 && i < len(h) && (earliest < 0 || h[i].Time < earliest) {
					earliest = h[i].Time
				}
			}
		}
	}
	for _, op := range h {
		workload = max(workload, float64(op.Time)/1e9)
	}
	if earliest < 0 {
		return -1, workload
	}
	return float64(earliest) / 1e9, workload
}

// RunObservation is one run's survival observation, by the rule the
// scoreboard and the matrix share: a conclusive run that broke the lock
// fails at its first violation (first, in seconds), or at the end of its
// workload where that time is unknown; a conclusive clean run is
// censored at the end of its workload. ok is false for a run that tells
// nothing of how long the lock lasts: an inconclusive one, or one whose
// times were not recorded (a history not read, a run stored before its
// workload time was kept).
func RunObservation(conclusive, violated bool, first, workload float64) (o stats.Observation, ok bool) {
	switch {
	case !conclusive:
		return o, false
	case violated && first >= 0:
		return stats.Observation{Time: first, Event: true}, true
	case workload <= 0:
		return o, false
	}
	return stats.Observation{Time: workload, Event: violated}, true
}

func finite(x float64) *float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	return &x
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// secs renders seconds for text: "4.2 s", "0.35 s", "20 s", "125 s".
func secs(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f s", x)
	case x >= 10:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", x), ".0") + " s"
	case x >= 1:
		return fmt.Sprintf("%.1f s", x)
	}
	return fmt.Sprintf("%.2f s", x)
}

// perHour renders a rate per hour to two significant figures.
func perHour(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "∞"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.0f", x)
	case x >= 1:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// exposureText renders run-seconds as run-seconds (under a minute),
// run-minutes or run-hours.
func exposureText(s float64) string {
	switch {
	case s >= 2*3600:
		return fmt.Sprintf("%.1f run-hours", s/3600)
	case s < 60:
		return fmt.Sprintf("%.1f run-seconds", s)
	}
	return fmt.Sprintf("%.1f run-minutes", s/60)
}

// MedianText renders the median time to failure with its interval,
// "4.2 s (95% CI 2.1–9.0 s)", "over 20 s" when more than half the runs
// outlived what was seen, and "—" for nil.
func (s *Survival) MedianText() string {
	if s == nil || s.Runs == 0 {
		return "—"
	}
	if s.MedianS == nil {
		longest := 0.0
		for _, o := range s.Observations {
			longest = max(longest, o.TS)
		}
		if s.Violations == 0 {
			return "no violation"
		}
		return "not reached (over half the runs outlived " + secs(longest) + ")"
	}
	lo, hi := "0 s", "∞"
	if s.MedianLoS != nil {
		lo = secs(*s.MedianLoS)
	}
	if s.MedianHiS != nil {
		hi = secs(*s.MedianHiS)
	}
	return fmt.Sprintf("%s (95%% CI %s–%s)", secs(*s.MedianS), strings.TrimSuffix(lo, " s"), hi)
}

// Text renders the survival in a sentence a design review can quote:
// "median time to failure 4.2 s (95% CI 2.1–9.0 s); 5 violations in 1.2
// run-minutes" or, for runs that all ended clean, "no violation in 12.5
// run-minutes under these faults: fewer than 14 per hour at 95%". "" for
// nil.
func (s *Survival) Text() string {
	if s == nil || s.Runs == 0 {
		return ""
	}
	if s.Violations == 0 {
		return fmt.Sprintf("no violation in %s under these faults: fewer than %s per hour at 95%%",
			exposureText(s.ExposureS), perHour(s.RateUpperPerHour))
	}
	return fmt.Sprintf("median time to failure %s; %d of %d runs broke in %s (%s per hour, at most %s at 95%%)",
		s.MedianText(), s.Violations, s.Runs, exposureText(s.ExposureS), perHour(s.RatePerHour), perHour(s.RateUpperPerHour))
}

// SurvivalCurve is one curve of a survival chart, with its name in the
// legend.
type SurvivalCurve struct {
	Name     string
	Survival *Survival
}

// The geometry of a survival chart, in px.
const (
	kmW, kmH                   = 520.0, 240.0
	kmLeft, kmRight            = 46.0, 150.0 // the legend is on the right
	kmTop, kmBottom            = 10.0, 34.0
	kmPlotW, kmPlotH           = kmW - kmLeft - kmRight, kmH - kmTop - kmBottom
	kmPlotB                    = kmTop + kmPlotH
	kmSmallW, kmSmallH         = 300.0, 150.0
	kmSmallLeft, kmSmallRight  = 40.0, 10.0
	kmSmallPlotW, kmSmallPlotH = kmSmallW - kmSmallLeft - kmSmallRight, kmSmallH - kmTop - kmBottom
)

// kmColors are the curves' colours, in order; the eighth and later reuse
// them.
var kmColors = []string{"#cf222e", "#0969da", "#1a7f37", "#9a6700", "#8250df", "#bc4c00", "#1b7c83", "#57606a"}

// SurvivalSVG draws Kaplan–Meier curves on one chart: the share of runs
// still unbroken against the time from the run's start, a step per
// violation, its 95% band shaded, and a tick where a run ended clean
// (censored). With one curve it is drawn small and without a legend, for
// a row of its own. It needs no script and no network; "" when no curve
// has a run.
func SurvivalSVG(label string, curves []SurvivalCurve) template.HTML {
	var cs []SurvivalCurve
	end := 0.0
	for _, c := range curves {
		if c.Survival == nil || c.Survival.Runs == 0 {
			continue
		}
		cs = append(cs, c)
		for _, o := range c.Survival.Observations {
			end = max(end, o.TS)
		}
	}
	if len(cs) == 0 {
		return ""
	}
	if end <= 0 {
		end = 1
	}
	small := len(cs) == 1
	w, h, left, plotW, plotH := kmW, kmH, kmLeft, kmPlotW, kmPlotH
	if small {
		w, h, left, plotW, plotH = kmSmallW, kmSmallH, kmSmallLeft, kmSmallPlotW, kmSmallPlotH
	} else if legend := kmTop + 14 + float64(len(cs))*16; legend > kmTop+plotH {
		// A long legend makes the chart taller.
		plotH = legend - kmTop
		h = plotH + kmTop + kmBottom
	}
	plotB := kmTop + plotH
	x := func(t float64) float64 { return left + t/end*plotW }
	y := func(s float64) float64 { return plotB - s*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="survival" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="%s">`,
		f1(w), f1(h), f1(w), f1(h), template.HTMLEscapeString(label))
	for _, s := range []float64{0, 0.5, 1} {
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#d0d7de"/><text x="%s" y="%s" font-size="10" text-anchor="end">%s</text>`,
			f1(left), f1(y(s)), f1(left+plotW), f1(y(s)), f1(left-4), f1(y(s)+3), Percent(s))
	}
	step := float64(tickStep(int64(end*1e6), 5)) / 1e6
	for t := 0.0; t <= end+step/1e6; t += step {
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#8c959f"/><text x="%s" y="%s" font-size="10" text-anchor="middle">%s</text>`,
			f1(x(t)), f1(plotB), f1(x(t)), f1(plotB+4), f1(x(t)), f1(plotB+15), template.HTMLEscapeString(strings.TrimSuffix(secs(t), " s")))
	}
	fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="11" text-anchor="middle">seconds from the run's start</text>`, f1(left+plotW/2), f1(h-4))
	fmt.Fprintf(&b, `<text x="11" y="%s" font-size="11" text-anchor="middle" transform="rotate(-90 11 %s)">unbroken</text>`, f1(kmTop+plotH/2), f1(kmTop+plotH/2))
	for i, c := range cs {
		color := kmColors[i%len(kmColors)]
		sv := c.Survival
		// The band: the pointwise interval, as steps.
		var band, line strings.Builder
		prevT, lo, hi := 0.0, 1.0, 1.0
		fmt.Fprintf(&line, "M%s %s", f1(x(0)), f1(y(1)))
		var upper, lower []string
		for _, st := range sv.Steps {
			upper = append(upper, fmt.Sprintf("%s %s %s %s", f1(x(prevT)), f1(y(hi)), f1(x(st.TS)), f1(y(hi))))
			lower = append(lower, fmt.Sprintf("%s %s %s %s", f1(x(st.TS)), f1(y(lo)), f1(x(prevT)), f1(y(lo))))
			fmt.Fprintf(&line, " H%s V%s", f1(x(st.TS)), f1(y(st.S)))
			prevT, lo, hi = st.TS, st.Lo, st.Hi
		}
		upper = append(upper, fmt.Sprintf("%s %s %s %s", f1(x(prevT)), f1(y(hi)), f1(x(end)), f1(y(hi))))
		lower = append(lower, fmt.Sprintf("%s %s %s %s", f1(x(end)), f1(y(lo)), f1(x(prevT)), f1(y(lo))))
		fmt.Fprintf(&line, " H%s", f1(x(end)))
		band.WriteString("M" + strings.Join(upper, " L"))
		for j := len(lower) - 1; j >= 0; j-- {
			band.WriteString(" L" + lower[j])
		}
		band.WriteString(" Z")
		fmt.Fprintf(&b, `<g><title>%s: %s</title><path d="%s" fill="%s" opacity="0.12"/><path d="%s" fill="none" stroke="%s" stroke-width="2"/>`,
			template.HTMLEscapeString(c.Name), template.HTMLEscapeString(sv.Text()), band.String(), color, line.String(), color)
		// A tick per time at which runs ended clean.
		seen := map[float64]bool{}
		for _, o := range sv.Observations {
			if o.Violation || seen[o.TS] {
				continue
			}
			seen[o.TS] = true
			sAt := 1.0
			for _, st := range sv.Steps {
				if st.TS <= o.TS {
					sAt = st.S
				}
			}
			fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5"/>`,
				f1(x(o.TS)), f1(y(sAt)-4), f1(x(o.TS)), f1(y(sAt)+4), color)
		}
		b.WriteString(`</g>`)
		if !small {
			ly := kmTop + 14 + float64(i)*16
			fmt.Fprintf(&b, `<g><title>%s</title><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"/><text x="%s" y="%s" font-size="11">%s</text></g>`,
				template.HTMLEscapeString(sv.MedianText()), f1(left+plotW+10), f1(ly-4), f1(left+plotW+24), f1(ly-4), color, f1(left+plotW+28), f1(ly), template.HTMLEscapeString(c.Name))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
