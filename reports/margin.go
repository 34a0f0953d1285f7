package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"path/filepath"
	"strings"

	"github.com/locktest/locktest/runstore"
)

// The files of a margin search (`locktest margin`) in its folder.
const (
	MarginFile     = "margin.json"
	MarginHTMLFile = "margin.html"
)

// MarginSchemaVersion is the version of margin.json's layout
// (docs/schemas/margin.schema.json).
const MarginSchemaVersion = 2

// Margin is margin.json: one search for the boundary of one fault
// magnitude or lock setting, every value it tried with its trials, the
// boundary it found and the lock's own stated bound beside it.
type Margin struct {
	SchemaVersion int    `json:"schema_version"`
	Command       string `json:"command"`
	Started       string `json:"started"`
	Elapsed       string `json:"elapsed"`
	Impl          string `json:"impl"`
	Fault         string `json:"fault"`
	// Param is the setting varied (its flag name), Unit "duration"
	// (values in nanoseconds) or "count"; From and To the range, as the
	// flag takes them. BreaksLow says small values break the lock.
	Param     string `json:"param"`
	Unit      string `json:"unit"`
	From      string `json:"from"`
	To        string `json:"to"`
	BreaksLow bool   `json:"breaks_low,omitempty"`
	// Settings are the run's settings held fixed, by flag name.
	Settings map[string]string `json:"settings"`
	// Trials, Grid and Resolution are the search's rule.
	Trials     int           `json:"trials"`
	Grid       int           `json:"grid"`
	Resolution string        `json:"resolution"`
	Points     []MarginPoint `json:"points"`
	// Found says a value broke the lock: Breaks is the one nearest the
	// safe side, Holds (when not empty) the one beyond it on the safe side
	// at which no trial failed, and Boundary the estimate between them.
	// Otherwise Reached is the farthest value that held.
	Found       bool     `json:"found"`
	Breaks      string   `json:"breaks,omitempty"`
	Holds       string   `json:"holds,omitempty"`
	Boundary    string   `json:"boundary,omitempty"`
	Reached     string   `json:"reached,omitempty"`
	NotMonotone []string `json:"not_monotone,omitempty"`
	// OffPlan lists the runs whose applied magnitude differed from the
	// value planned by more than the resolution ("planned 900ms, applied
	// 1.012s (runs/…)"), farthest first: the search counted them at the
	// value planned, so a boundary beside them is less sharp than it
	// says.
	OffPlan []string `json:"off_plan,omitempty"`
	Summary string   `json:"summary"`
	// Bound is the bound the lock itself states for this parameter, nil
	// when it states none.
	Bound *MarginBound `json:"stated_bound,omitempty"`
	// Gate is what the search is judged against, nil when it has nothing
	// to be judged against: Failed makes locktest margin exit 1.
	Gate        *MarginGate `json:"gate,omitempty"`
	Runs        int         `json:"runs"`
	BudgetSpent bool        `json:"budget_spent,omitempty"`
	Interrupted bool        `json:"interrupted,omitempty"`
}

// MarginPoint is one value tried.
type MarginPoint struct {
	Value    float64     `json:"value"`
	Label    string      `json:"label"`
	Failures int         `json:"failures"`
	Trials   int         `json:"trials"`
	Unusable int         `json:"unusable,omitempty"`
	Rate     float64     `json:"rate"`
	Low      float64     `json:"low"`
	High     float64     `json:"high"`
	Bisect   bool        `json:"bisect,omitempty"`
	Runs     []MarginRun `json:"runs"`
}

// MarginRun is one trial's run.
type MarginRun struct {
	Run      string `json:"run"`
	Verdict  string `json:"verdict"`
	Failed   bool   `json:"failed"`
	Unusable bool   `json:"unusable,omitempty"`
	Why      string `json:"why,omitempty"`
	// Applied is the magnitude the run really applied, as its history
	// measures it (a pause, a time down or a window: from the fault's ok
	// to its heal's ok), empty when the parameter is not such a length.
	Applied string `json:"applied,omitempty"`
}

// MarginBound is a lock's stated bound for the varied parameter: its
// value (in the parameter's unit), as the flag takes it, and the rule it
// comes from with the figures put in.
type MarginBound struct {
	Value float64 `json:"value"`
	Label string  `json:"label"`
	Rule  string  `json:"rule"`
}

// MarginGate is the value a margin search is judged against: the lock's
// stated bound, or --gate. The gate fails when a trial broke the lock on
// the safe side of Value by more than Tolerance (the search's resolution,
// for how far a real fault may land from the value planned).
type MarginGate struct {
	Value     float64 `json:"value"`
	Label     string  `json:"label"`
	Source    string  `json:"source"` // "stated bound" or "--gate"
	Tolerance string  `json:"tolerance"`
	Failed    bool    `json:"failed"`
	Why       string  `json:"why,omitempty"`
}

var marginTmpl = template.Must(template.New("margin.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/margin.html.tmpl"))

// WriteMargin writes margin.json and margin.html into dir.
func WriteMargin(dir string, m Margin) error {
	if err := runstore.WriteJSON(filepath.Join(dir, MarginFile), m); err != nil {
		return err
	}
	page, err := RenderMarginHTML(m)
	if err != nil {
		return err
	}
	return runstore.WriteFileAtomic(filepath.Join(dir, MarginHTMLFile), page)
}

// RenderMarginHTML renders a margin search as a self-contained page: its
// summary, a chart of the violation rate against the value with each
// point's interval, the bracket and the stated bound, and a table of the
// points with their runs.
func RenderMarginHTML(m Margin) ([]byte, error) {
	var b bytes.Buffer
	err := marginTmpl.Execute(&b, struct {
		Margin
		Style template.CSS
		Chart template.HTML
	}{m, reportCSS, MarginSVG(m)})
	return b.Bytes(), err
}

// The margin chart's size and plot area.
const (
	mW, mH                 = 720.0, 300.0
	mLeft, mRight, mTop    = 56.0, 16.0, 16.0
	mBottom                = 44.0
	mPlotW, mPlotH, mPlotB = mW - mLeft - mRight, mH - mTop - mBottom, mH - mBottom
)

// MarginSVG draws the violation rate against the value: a point per value
// with its 95% Wilson interval as a bar, the bracket of the boundary as a
// band, and the stated bound as a dashed line. It needs no script and no
// network.
func MarginSVG(m Margin) template.HTML {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range m.Points {
		lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
	}
	if m.Bound != nil {
		lo, hi = math.Min(lo, m.Bound.Value), math.Max(hi, m.Bound.Value)
	}
	if len(m.Points) == 0 {
		lo, hi = 0, 1
	}
	if hi <= lo {
		hi = lo + 1
	}
	pad := (hi - lo) * 0.04
	lo, hi = lo-pad, hi+pad
	x := func(v float64) float64 { return mLeft + (v-lo)/(hi-lo)*mPlotW }
	y := func(r float64) float64 { return mPlotB - r*mPlotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="margin" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="violation rate against %s">`,
		f1(mW), f1(mH), f1(mW), f1(mH), template.HTMLEscapeString(m.Param))
	// The bracket of the boundary.
	if m.Found && m.Holds != "" {
		h, k := valueOf(m, m.Holds), valueOf(m, m.Breaks)
		x0, x1 := math.Min(x(h), x(k)), math.Max(x(h), x(k))
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="#fde68a" opacity="0.6"><title>the boundary lies between %s and %s</title></rect>`,
			f1(x0), f1(mTop), f1(math.Max(x1-x0, 2)), f1(mPlotH), template.HTMLEscapeString(m.Holds), template.HTMLEscapeString(m.Breaks))
	}
	// Axes, with rate gridlines every 25%.
	for _, r := range []float64{0, 0.25, 0.5, 0.75, 1} {
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#d0d7de"/><text x="%s" y="%s" font-size="11" text-anchor="end">%s</text>`,
			f1(mLeft), f1(y(r)), f1(mW-mRight), f1(y(r)), f1(mLeft-6), f1(y(r)+4), Percent(r))
	}
	// The grid's values label the axis; the bisection's, close together,
	// are named in their points' titles and in the table.
	for _, p := range m.Points {
		if !p.Bisect {
			fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="11" text-anchor="middle">%s</text>`, f1(x(p.Value)), f1(mPlotB+16), template.HTMLEscapeString(p.Label))
		}
	}
	fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="12" text-anchor="middle">%s</text>`, f1(mLeft+mPlotW/2), f1(mH-6), template.HTMLEscapeString(m.Param))
	fmt.Fprintf(&b, `<text x="14" y="%s" font-size="12" text-anchor="middle" transform="rotate(-90 14 %s)">violation rate</text>`, f1(mTop+mPlotH/2), f1(mTop+mPlotH/2))
	// The stated bound.
	if m.Bound != nil {
		bx := x(m.Bound.Value)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#0969da" stroke-width="2" stroke-dasharray="6 4"><title>stated bound %s: %s</title></line><text x="%s" y="%s" font-size="11" fill="#0969da">stated %s</text>`,
			f1(bx), f1(mTop), f1(bx), f1(mPlotB), template.HTMLEscapeString(m.Bound.Label), template.HTMLEscapeString(m.Bound.Rule), f1(bx+4), f1(mTop+12), template.HTMLEscapeString(m.Bound.Label))
	}
	// The points, each with its interval.
	for _, p := range m.Points {
		px := x(p.Value)
		color := "#1a7f37"
		if p.Failures > 0 {
			color = "#cf222e"
		}
		fmt.Fprintf(&b, `<g><title>%s: %d of %d failed (%s, 95%% CI %s–%s)</title><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/><circle cx="%s" cy="%s" r="4" fill="%s"/></g>`,
			template.HTMLEscapeString(p.Label), p.Failures, p.Trials, Percent(p.Rate), Percent(p.Low), Percent(p.High),
			f1(px), f1(y(p.Low)), f1(px), f1(y(p.High)), color, f1(px), f1(y(p.Rate)), color)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// valueOf finds the value of the point labelled label; 0 when none has
// it.
func valueOf(m Margin, label string) float64 {
	for _, p := range m.Points {
		if p.Label == label {
			return p.Value
		}
	}
	return 0
}
