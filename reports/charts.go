package reports

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// latencySeries are the series of the latency chart, in legend order.
var latencySeries = []struct {
	f     string
	typ   history.Type
	color string
}{
	{history.Acquire, history.OK, "#1f6fd1"},
	{history.Acquire, history.Fail, "#e08a00"},
	{history.Acquire, history.Info, "#b00020"},
	{history.Release, history.OK, "#2a9d3a"},
	{history.Release, history.Fail, "#8e5bd0"},
	{history.Release, history.Info, "#d03fa0"},
}

// latencyBins is how many time bins the latency chart has: each bin of
// each series is drawn as one line from its lowest to its highest latency
// with a dot at its median, so the chart's size does not grow with the
// history.
const latencyBins = 400

// Chart geometry, in px.
const (
	chartHeight = 220
	chartTop    = 10
	chartBottom = 24
	tputHeight  = 150
)

// latencyPoint is one completed op.
type latencyPoint struct {
	t, lat int64 // µs
}

// latencyData holds, per series, the completed ops of h in time order.
func latencyData(h *history.Table) [][]latencyPoint {
	out := make([][]latencyPoint, len(latencySeries))
	pair := h.Pair()
	for i := range h.Len() {
		if pair[i] < 0 || h.Process(i) < 0 || h.Type(i) == history.Invoke {
			continue
		}
		o := h.At(i)
		for s, ls := range latencySeries {
			if ls.f == o.F && ls.typ == o.Type {
				out[s] = append(out[s], latencyPoint{us(o.Time), max(us(o.Time-h.Time(int(pair[i]))), 0)})
			}
		}
	}
	return out
}

// faultBands draws the fault windows of t as bands from y0 to y1 on scale s.
func faultBands(b *strings.Builder, t *timeline, s scale, y0, y1 float64) {
	for _, f := range t.Faults {
		x0, x1 := s.x(f.Start), s.x(f.End)
		fmt.Fprintf(b, `<rect class="fault" x="%s" y="%s" width="%s" height="%s"><title>%s</title></rect>`,
			f1(x0), f1(y0), f1(max(x1-x0, 1)), f1(y1-y0), template.HTMLEscapeString(faultTitle(f)))
	}
}

// timeAxis draws the time axis of s at y.
func timeAxis(b *strings.Builder, s scale, y float64) {
	step := tickStep(s.t1-s.t0, 12)
	fmt.Fprintf(b, `<g class="axis"><line x1="%d" x2="%d" y1="%s" y2="%s"/>`, svgLeft, svgWidth-svgRight, f1(y), f1(y))
	for v := (s.t0 + step - 1) / step * step; v <= s.t1; v += step {
		x := s.x(v)
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s"/><text x="%s" y="%s">%s</text>`, f1(x), f1(x), f1(y), f1(y+4), f1(x), f1(y+16), secsLabel(v, step))
	}
	b.WriteString(`</g>`)
}

// latencySVG draws latency over time on a log scale, binned.
func latencySVG(t *timeline, series [][]latencyPoint) template.HTML {
	s := scale{0, max(t.End, 1)}
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, ps := range series {
		for _, p := range ps {
			lo, hi = min(lo, max(p.lat, 1)), max(hi, p.lat)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="lat" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="latency over time">`,
		svgWidth, chartHeight, svgWidth, chartHeight)
	plotBottom := float64(chartHeight - chartBottom)
	faultBands(&b, t, s, chartTop, plotBottom)
	if hi == 0 {
		b.WriteString(`<text x="600" y="100">no completed acquire or release</text>`)
		timeAxis(&b, s, plotBottom)
		b.WriteString(`</svg>`)
		return template.HTML(b.String())
	}
	// Decades of µs, from the one below the fastest op to the one above
	// the slowest.
	d0, d1 := math.Floor(math.Log10(float64(lo))), math.Ceil(math.Log10(float64(max(hi, 2))))
	if d1 <= d0 {
		d1 = d0 + 1
	}
	y := func(lat int64) float64 {
		v := math.Log10(float64(max(lat, 1)))
		return plotBottom - (v-d0)/(d1-d0)*(plotBottom-chartTop)
	}
	b.WriteString(`<g class="axis">`)
	for d := d0; d <= d1; d++ {
		yy := y(int64(math.Pow(10, d)))
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%s" y2="%s"/><text class="ylbl" x="%d" y="%s">%s</text>`,
			svgLeft, svgWidth-svgRight, f1(yy), f1(yy), svgLeft-4, f1(yy+4), durLabel(int64(math.Pow(10, d))))
	}
	b.WriteString(`</g>`)
	span := float64(max(s.t1-s.t0, 1))
	for si, ps := range series {
		if len(ps) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<g class="ls" style="stroke:%s;fill:%s">`, latencySeries[si].color, latencySeries[si].color)
		bins := make([][]int64, latencyBins)
		for _, p := range ps {
			k := min(int(float64(p.t-s.t0)/span*latencyBins), latencyBins-1)
			bins[k] = append(bins[k], p.lat)
		}
		for k, lats := range bins {
			if len(lats) == 0 {
				continue
			}
			slices.Sort(lats)
			x := s.x(s.t0 + int64((float64(k)+0.5)/latencyBins*span))
			if lats[0] != lats[len(lats)-1] {
				fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s"/>`, f1(x), f1(x), f1(y(lats[0])), f1(y(lats[len(lats)-1])))
			}
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="1.8"/>`, f1(x), f1(y(lats[len(lats)/2])))
		}
		b.WriteString(`</g>`)
	}
	timeAxis(&b, s, plotBottom)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// durLabel renders µs for an axis.
func durLabel(u int64) string {
	switch {
	case u >= 1_000_000:
		return fmt.Sprintf("%gs", float64(u)/1e6)
	case u >= 1000:
		return fmt.Sprintf("%gms", float64(u)/1e3)
	}
	return fmt.Sprintf("%gµs", float64(u))
}

// percentileRow is one line of the percentile table, in ms.
type percentileRow struct {
	Op                       string
	Count                    int
	P50, P90, P99, P999, Max string
}

// percentiles returns the latency percentiles of every client f and
// completion type of h, in a fixed order.
func percentiles(h *history.Table) []percentileRow {
	pair := h.Pair()
	lats := map[string][]int64{}
	for i := range h.Len() {
		if pair[i] < 0 || h.Process(i) < 0 || h.Type(i) == history.Invoke {
			continue
		}
		o := h.At(i)
		k := o.F + " " + string(o.Type)
		lats[k] = append(lats[k], max(o.Time-h.Time(int(pair[i])), 0))
	}
	var out []percentileRow
	for _, f := range []string{history.Acquire, history.Release, history.Claim, history.Read, history.Write} {
		for _, typ := range []history.Type{history.OK, history.Fail, history.Info} {
			xs := lats[f+" "+string(typ)]
			if len(xs) == 0 {
				continue
			}
			slices.Sort(xs)
			q := func(p float64) string {
				i := min(int(math.Ceil(p*float64(len(xs))))-1, len(xs)-1)
				return msLabel(xs[max(i, 0)])
			}
			out = append(out, percentileRow{Op: f + " " + string(typ), Count: len(xs),
				P50: q(0.5), P90: q(0.9), P99: q(0.99), P999: q(0.999), Max: msLabel(xs[len(xs)-1])})
		}
	}
	return out
}

func msLabel(ns int64) string {
	return fmt.Sprintf("%.3f", float64(ns)/1e6)
}

// throughputSVG draws, per second, the acquires that succeeded, those that
// did not (fail or info) and the writes the store accepted.
func throughputSVG(t *timeline, h *history.Table) template.HTML {
	secs := int(t.End/1_000_000) + 1
	series := []struct {
		name, color string
		n           []int
	}{
		{"acquire ok", "#1f6fd1", make([]int, secs)},
		{"acquire fail/info", "#e08a00", make([]int, secs)},
		{"write accepted", "#2a9d3a", make([]int, secs)},
	}
	top := 1
	for i := range h.Len() {
		if h.Process(i) < 0 || h.Type(i) == history.Invoke {
			continue
		}
		o := h.At(i)
		k := min(int(us(o.Time)/1_000_000), secs-1)
		switch {
		case o.F == history.Acquire && o.Type == history.OK:
			series[0].n[k]++
		case o.F == history.Acquire:
			series[1].n[k]++
		case o.F == history.Write && o.Type == history.OK:
			series[2].n[k]++
		default:
			continue
		}
	}
	for _, sr := range series {
		for _, n := range sr.n {
			top = max(top, n)
		}
	}
	s := scale{0, int64(secs) * 1_000_000}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="tput" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="throughput per second">`,
		svgWidth, tputHeight, svgWidth, tputHeight)
	plotBottom := float64(tputHeight - chartBottom)
	faultBands(&b, t, s, chartTop, plotBottom)
	y := func(n int) float64 { return plotBottom - float64(n)/float64(top)*(plotBottom-chartTop) }
	fmt.Fprintf(&b, `<g class="axis"><text class="ylbl" x="%d" y="%s">%d/s</text><text class="ylbl" x="%d" y="%s">0</text></g>`,
		svgLeft-4, f1(y(top)+4), top, svgLeft-4, f1(plotBottom))
	for _, sr := range series {
		fmt.Fprintf(&b, `<polyline class="tp" style="stroke:%s" points="`, sr.color)
		for k, n := range sr.n {
			if k > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s,%s %s,%s", f1(s.x(int64(k)*1_000_000)), f1(y(n)), f1(s.x(int64(k+1)*1_000_000)), f1(y(n)))
		}
		b.WriteString(`"/>`)
	}
	timeAxis(&b, s, plotBottom)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
