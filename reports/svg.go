package reports

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// The geometry of the timeline SVG, in px. templates/report.js draws with
// the same numbers; change both together.
const (
	svgWidth     = 1200
	svgLeft      = 64 // lane labels
	svgRight     = 12
	svgAxis      = 22 // the time axis on top
	svgNemesis   = 22 // the nemesis lane
	svgLane      = 16 // a process lane's bar height
	svgLanePitch = 20 // lane to lane
	svgBottom    = 8
	// maxTitles is the largest number of holds and writes whose <title>
	// (the browser's own tooltip, for readers without JavaScript) the
	// static SVG carries.
	maxTitles = 2000
)

func laneY(l int) float64 {
	if l == 0 {
		return svgAxis
	}
	return svgAxis + svgNemesis + float64(l-1)*svgLanePitch
}

func svgHeight(lanes int) float64 {
	return laneY(lanes) + svgBottom
}

// scale maps µs to px for the span [t0, t1].
type scale struct{ t0, t1 int64 }

func (s scale) x(t int64) float64 {
	span := float64(max(s.t1-s.t0, 1))
	return svgLeft + float64(t-s.t0)/span*float64(svgWidth-svgLeft-svgRight)
}

func f1(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// secsLabel renders µs as seconds for axis labels and tooltips.
func secsLabel(t int64, step int64) string {
	digits := 0
	for s := step; s < 1_000_000 && digits < 6; s *= 10 {
		digits++
	}
	return strconv.FormatFloat(float64(t)/1e6, 'f', digits, 64) + "s"
}

// tickStep is a round step (1, 2 or 5 × 10^k µs) giving about n ticks over span.
func tickStep(span int64, n int) int64 {
	raw := float64(max(span, 1)) / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return max(int64(m*p), 1)
		}
	}
	return max(int64(10*p), 1)
}

// timelineSVG draws the whole timeline, as the page shows it before any
// zoom and without JavaScript.
func timelineSVG(t *timeline) template.HTML {
	s := scale{0, max(t.End, 1)}
	var b strings.Builder
	nl := len(t.Lanes)
	hgt := svgHeight(nl)
	bottom := laneY(nl) - (svgLanePitch - svgLane)
	fmt.Fprintf(&b, `<svg id="tl" xmlns="http://www.w3.org/2000/svg" width="%d" height="%s" viewBox="0 0 %d %s" role="img" aria-label="lease timeline">`,
		svgWidth, f1(hgt), svgWidth, f1(hgt))
	b.WriteString(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#555"/></pattern></defs>`)
	b.WriteString(`<g id="tl-body">`)
	// Lanes.
	for l, name := range t.Lanes {
		y := laneY(l)
		h := float64(svgLane)
		if l == 0 {
			h = svgNemesis - 4
		}
		fmt.Fprintf(&b, `<rect class="lane" x="%d" y="%s" width="%d" height="%s"/><text class="lbl" x="%d" y="%s">%s</text>`,
			svgLeft, f1(y), svgWidth-svgLeft-svgRight, f1(h), svgLeft-6, f1(y+h/2+4), template.HTMLEscapeString(name))
	}
	// Fault windows, with the lanes of the processes they paused or killed.
	for i, f := range t.Faults {
		x0, x1 := s.x(f.Start), s.x(f.End)
		w := max(x1-x0, 1)
		title := template.HTMLEscapeString(faultTitle(f))
		fmt.Fprintf(&b, `<rect class="fault" data-f="%d" x="%s" y="%d" width="%s" height="%s"><title>%s</title></rect>`,
			i, f1(x0), svgAxis, f1(w), f1(bottom-svgAxis), title)
		if w > 40 {
			fmt.Fprintf(&b, `<text class="flbl" x="%s" y="%s">%s</text>`, f1(x0+2), f1(svgAxis+13), template.HTMLEscapeString(clip(f.Name+" "+f.Targets, int(w/6))))
		}
		for _, l := range f.Lanes {
			fmt.Fprintf(&b, `<rect class="pause" data-f="%d" x="%s" y="%s" width="%s" height="%d"><title>%s</title></rect>`,
				i, f1(x0), f1(laneY(l)), f1(w), svgLane, title)
		}
	}
	titles := len(t.Holds)+len(t.Writes) <= maxTitles
	// Holds, merged per lane where they are narrower than a pixel.
	type run struct {
		x0, x1 float64
		n      int
		first  int
		an     bool
		narrow bool // every hold of the run is narrower than a pixel
	}
	flush := func(r *run, lane int64) {
		if r.n == 0 {
			return
		}
		y := laneY(int(lane)) + 2
		if r.n == 1 {
			hd := t.Holds[r.first]
			cls := "hold"
			if hd[5]&holdAnomaly != 0 {
				cls += " an"
			}
			if hd[5]&holdNoRelease != 0 {
				cls += " norel"
			}
			xs := s.x(hd[2])
			fmt.Fprintf(&b, `<rect class="%s" data-h="%d" x="%s" y="%s" width="%s" height="%d">`, cls, r.first, f1(r.x0), f1(y), f1(max(xs-r.x0, 1)), svgLane-4)
			if titles {
				fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(t.holdTitle(r.first)))
			}
			b.WriteString(`</rect>`)
			if r.x1-xs >= 0.5 {
				fmt.Fprintf(&b, `<rect class="exp" data-h="%d" x="%s" y="%s" width="%s" height="%d"/>`, r.first, f1(xs), f1(y), f1(r.x1-xs), svgLane-4)
			}
			if hd[4] >= 0 {
				lbl := strconv.FormatInt(hd[4], 10)
				if r.x1-r.x0 >= float64(7*len(lbl)+4) {
					fmt.Fprintf(&b, `<text class="tok" x="%s" y="%s">%s</text>`, f1((r.x0+r.x1)/2), f1(y+svgLane-7), lbl)
				}
			}
		} else {
			cls := "hold merged"
			if r.an {
				cls += " an"
			}
			fmt.Fprintf(&b, `<rect class="%s" data-m="%d" x="%s" y="%s" width="%s" height="%d"/>`, cls, r.n, f1(r.x0), f1(y), f1(max(r.x1-r.x0, 1)), svgLane-4)
		}
		*r = run{}
	}
	byLane := make([][]int, nl)
	for i, hd := range t.Holds {
		byLane[hd[0]] = append(byLane[hd[0]], i)
	}
	for l, idx := range byLane {
		var r run
		for _, i := range idx {
			hd := t.Holds[i]
			x0, x1 := s.x(hd[1]), s.x(hd[3])
			if r.n > 0 && r.narrow && x1-x0 < 1 && x0 <= r.x1+1 {
				r.x1 = max(r.x1, x0+1, x1)
				r.n++
				r.an = r.an || hd[5]&holdAnomaly != 0
				continue
			}
			flush(&r, int64(l))
			r = run{x0: x0, x1: max(x1, x0+1), n: 1, first: i, an: hd[5]&holdAnomaly != 0, narrow: x1-x0 < 1}
		}
		flush(&r, int64(l))
	}
	// Writes: at most one tick per lane, pixel and kind.
	seen := map[[3]int]bool{}
	for i, w := range t.Writes {
		x := s.x(w[1])
		k := [3]int{int(w[0]), int(x), int(w[2])}
		if seen[k] {
			continue
		}
		seen[k] = true
		y := laneY(int(w[0]))
		y0, y1 := y+svgLane-5, y+svgLane+2
		if w[2] == writeRejected {
			y0 = y - 1
		}
		fmt.Fprintf(&b, `<line class="w w%d" data-w="%d" x1="%s" x2="%s" y1="%s" y2="%s">`, w[2], i, f1(x), f1(x), f1(y0), f1(y1))
		if titles || w[2] == writeRejected {
			fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(t.opTitle(int(w[3]))))
		}
		b.WriteString(`</line>`)
	}
	// Lost-lock notices: a small triangle above the lane, pointing down.
	for i, n := range t.Notices {
		x, y := s.x(n[1]), laneY(int(n[0]))
		fmt.Fprintf(&b, `<path class="n" data-n="%d" d="M%s %sL%s %sL%s %sZ">`, i, f1(x-4), f1(y-3), f1(x+4), f1(y-3), f1(x), f1(y+4))
		if titles {
			fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(t.opTitle(int(n[2]))))
		}
		b.WriteString(`</path>`)
	}
	// Anomalies, in red, each a line through the ops that prove it.
	for i, a := range t.Anoms {
		fmt.Fprintf(&b, `<g class="anom" id="tl-%s" data-a="%d">`, a.ID, i)
		if len(a.Points) > 1 {
			b.WriteString(`<polyline points="`)
			for j, p := range a.Points {
				if j > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "%s,%s", f1(s.x(p[1])), f1(laneY(int(p[0]))+svgLane/2))
			}
			b.WriteString(`"/>`)
		}
		for j, p := range a.Points {
			op := a.Ops[j]
			fmt.Fprintf(&b, `<circle data-o="%d" cx="%s" cy="%s" r="4"><title>%s</title></circle>`,
				op, f1(s.x(p[1])), f1(laneY(int(p[0]))+svgLane/2), template.HTMLEscapeString(a.Kind+": "+t.Ops[op]))
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</g>`)
	// The time axis.
	step := tickStep(s.t1-s.t0, 12)
	fmt.Fprintf(&b, `<g class="axis"><line x1="%d" x2="%d" y1="%d" y2="%d"/>`, svgLeft, svgWidth-svgRight, svgAxis-2, svgAxis-2)
	for v := (s.t0 + step - 1) / step * step; v <= s.t1; v += step {
		x := s.x(v)
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%d" y2="%d"/><text x="%s" y="%d">%s</text>`, f1(x), f1(x), svgAxis-6, svgAxis-2, f1(x), svgAxis-9, secsLabel(v, step))
	}
	b.WriteString(`</g></svg>`)
	return template.HTML(b.String())
}

// clip shortens s to at most n characters.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 2 {
		return ""
	}
	return s[:n-1] + "…"
}

func faultTitle(f tlFault) string {
	end := "never healed"
	if f.Heal >= 0 {
		end = "healed at " + secsLabel(f.End, 1000)
	}
	return fmt.Sprintf("%s %s: from %s, %s (ops %d–%d)", f.Name, f.Targets, secsLabel(f.Start, 1000), end, f.Inject, f.Heal)
}

// opTitle is the record of op i, or a pointer to it.
func (t *timeline) opTitle(i int) string {
	if r, ok := t.Ops[i]; ok {
		return r
	}
	return fmt.Sprintf("op %d (see history.jsonl)", i)
}

// holdTitle describes hold i and the records of its ops.
func (t *timeline) holdTitle(i int) string {
	hd := t.Holds[i]
	var b strings.Builder
	fmt.Fprintf(&b, "%s holds %s", t.Lanes[hd[0]], t.Locks[hd[8]])
	if hd[4] >= 0 {
		fmt.Fprintf(&b, " with token %d", hd[4])
	}
	fmt.Fprintf(&b, " from %s to %s", secsLabel(hd[1], 1000), secsLabel(hd[3], 1000))
	switch {
	case hd[5]&holdNoRelease != 0:
		b.WriteString(" (no release came)")
	case hd[2] < hd[3]:
		fmt.Fprintf(&b, " (its lease ended at %s)", secsLabel(hd[2], 1000))
	}
	b.WriteString("\n" + t.opTitle(int(hd[6])))
	if hd[7] >= 0 {
		b.WriteString("\n" + t.opTitle(int(hd[7])))
	}
	return b.String()
}
