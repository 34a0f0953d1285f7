// Package margin searches for how close a lock is to breaking: the
// boundary of one fault magnitude (a pause, a clock jump, a node's time
// down) or of one lock setting (a TTL), beyond which the lock breaks. It
// runs a coarse grid of values, then bisects between the last value at
// which no trial failed and the first at which one did, with Trials
// trials at each value and a Wilson interval on each failure rate.
//
// The search (this file) is pure: whether a trial fails is a Runner's to
// say. A Study (runner.go) is the Runner of `locktest margin`: it runs one
// pinned schedule against real servers with run.Run, measures what each
// run applied, and states the lock's own bound. Because real servers do
// not fail the same way twice, a value "holds" only in the sense that none
// of its Trials trials failed: its Wilson interval says how high its
// failure rate may still be (docs/margins.md).
package margin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/locktest/locktest/internal/stats"
)

// Kind is what a parameter measures, which says how its values print and
// round.
type Kind int

const (
	// Duration values are nanoseconds, printed as Go durations and
	// rounded to the millisecond.
	Duration Kind = iota
	// Count values are whole numbers (nodes hit, targets).
	Count
	// Factor values are a rate in thousandths (500 is 0.5: a clock at
	// half the real rate), printed as the rate and rounded to the
	// thousandth.
	Factor
)

// Param is the one thing a search varies.
type Param struct {
	// Name is the setting's flag name: "pause", "clock-bump", "down",
	// "window", "ttl", "targets".
	Name string
	Kind Kind
	// From and To bound the values tried (From < To), in the Kind's unit.
	From, To float64
	// BreaksLow says the lock breaks at low values rather than high ones:
	// a TTL protects, a pause attacks.
	BreaksLow bool
}

// Format prints value as the parameter's flag takes it.
func (p Param) Format(v float64) string {
	switch p.Kind {
	case Count:
		return strconv.Itoa(int(math.Round(v)))
	case Factor:
		return strconv.FormatFloat(math.Round(v)/1000, 'f', -1, 64)
	}
	return time.Duration(v).Round(time.Millisecond).String()
}

// round makes v a value the parameter can take: a whole number, or a
// whole millisecond.
func (p Param) round(v float64) float64 {
	if p.Kind == Count || p.Kind == Factor {
		return math.Round(v)
	}
	return float64(time.Duration(v).Round(time.Millisecond))
}

// Trial is what one run at a value showed.
type Trial struct {
	// Run is where the run is stored.
	Run string `json:"run"`
	// Verdict is the run's verdict: valid, invalid or unknown.
	Verdict string `json:"verdict"`
	// Failed says the lock broke: the run found the violation the search
	// counts.
	Failed bool `json:"failed"`
	// Unusable says the run tested nothing at this value (its fault did not
	// go in, no client acquired): it is not counted either way. Why says
	// why.
	Unusable bool   `json:"unusable,omitempty"`
	Why      string `json:"why,omitempty"`
	// Applied, when Measured, is the magnitude the run really applied, in
	// the parameter's unit: for a pause, a time down or a window, from
	// its fault's ok to its heal's ok in the run's history. A loaded
	// machine stretches it past the value planned; the search still
	// counts the trial at the value planned, and its caller says by how
	// much the two differ.
	Applied  float64 `json:"applied,omitempty"`
	Measured bool    `json:"measured,omitempty"`
}

// Runner runs value v once, as its trial-th trial, and says what it
// showed. An error ends the search.
type Runner func(ctx context.Context, v float64, trial int) (Trial, error)

// ErrBudget is the error of a search whose budget ran out; its Result
// holds what was decided so far.
var ErrBudget = errors.New("the budget is spent")

// Options are how the search judges and bounds itself.
type Options struct {
	// Grid is how many evenly spaced values of [From, To] the coarse pass
	// runs, both ends included (at least 2).
	Grid int
	// Trials is how many counted trials each value gets.
	Trials int
	// Resolution: the bisection stops when the bracket is this narrow or
	// narrower, in the parameter's unit.
	Resolution float64
	// Deadline, when not zero, is when the search starts no more trials.
	Deadline time.Time
	// Progress, when set, is told of every value decided.
	Progress func(Point)
	// Now is the budget's clock; nil means time.Now.
	Now func() time.Time
}

// Point is one value tried, with its trials.
type Point struct {
	Value float64 `json:"value"`
	Label string  `json:"label"`
	// Trials are its counted runs; Failures how many failed; Unusable
	// counts the runs that tested nothing there and were run again.
	Trials   []Trial `json:"trials"`
	Failures int     `json:"failures"`
	Unusable int     `json:"unusable,omitempty"`
	// Rate is Failures over the counted trials; Low and High its 95%
	// Wilson interval.
	Rate float64 `json:"rate"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
	// Bisect says it was tried by the bisection, not the grid.
	Bisect bool `json:"bisect,omitempty"`
}

// Counted is how many of p's trials counted.
func (p Point) Counted() int { return len(p.Trials) - p.Unusable }

// Result is what a search found.
type Result struct {
	Param Param
	// Points are every value tried, in order of value.
	Points []Point
	// Found says some value broke the lock. Then Breaks is the value
	// nearest the safe side at which a trial failed, and Holds, when
	// HasHolds, the value nearest it on the safe side at which none did:
	// the boundary lies between them. A search that broke the lock at the
	// safe end of its range has no Holds.
	Found    bool
	Breaks   float64
	Holds    float64
	HasHolds bool
	// Reached is, when nothing broke the lock, the value farthest toward
	// breaking that held.
	Reached float64
	// NotMonotone lists the values that held beyond one that broke (on
	// the breaking side), which a boundary does not explain: noise of the
	// real servers, or a rate that does not grow with the magnitude.
	NotMonotone []float64
	// Runs counts every run made, the unusable ones too.
	Runs int
}

// Boundary is the estimate of the boundary: the middle of the bracket
// [Holds, Breaks]; Breaks when the search has no Holds, or when the
// parameter counts and the two are neighbours (no count lies between).
func (r Result) Boundary() float64 {
	if !r.HasHolds || r.Param.Kind == Count && math.Abs(r.Breaks-r.Holds) <= 1 {
		return r.Breaks
	}
	return r.Param.round((r.Holds + r.Breaks) / 2)
}

// Summary says the boundary in one line: "breaks at pause ≥ 940ms
// (between 900ms, 0 of 5 failed, and 980ms, 2 of 5)", or what held.
func (r Result) Summary() string {
	p := r.Param
	cmp := "≥"
	if p.BreaksLow {
		cmp = "≤"
	}
	if !r.Found && !r.decided() {
		return fmt.Sprintf("nothing decided: no run at any %s finished", p.Name)
	}
	if !r.Found {
		return fmt.Sprintf("no violation at any %s tried, up to %s (%s)", p.Name, p.Format(r.Reached), pointCount(r.at(r.Reached)))
	}
	b := r.at(r.Breaks)
	if !r.HasHolds {
		return fmt.Sprintf("breaks at every %s tried, from %s (%s): the boundary lies beyond the range", p.Name, p.Format(r.Breaks), pointCount(b))
	}
	h := r.at(r.Holds)
	return fmt.Sprintf("breaks at %s %s %s (between %s, %s, and %s, %s)", p.Name, cmp, p.Format(r.Boundary()),
		p.Format(r.Holds), pointCount(h), p.Format(r.Breaks), pointCount(b))
}

// Breached reports whether the search saw the lock break on the safe side
// of ref by more than tolerance: below ref for a parameter whose large
// values break a lock, above it for one whose small values do (BreaksLow).
// A failed trial is a proven violation, not an estimate; the tolerance
// stands for how far a real fault may land from the value planned (the
// search's resolution). A search that broke nothing never breaches.
func (r Result) Breached(ref, tolerance float64) bool {
	if !r.Found {
		return false
	}
	if r.Param.BreaksLow {
		return r.Breaks > ref+tolerance
	}
	return r.Breaks < ref-tolerance
}

// decided reports whether some point has a counted trial.
func (r Result) decided() bool {
	for _, p := range r.Points {
		if p.Counted() > 0 {
			return true
		}
	}
	return false
}

func pointCount(p Point) string {
	return fmt.Sprintf("%d of %d failed", p.Failures, p.Counted())
}

// at returns the point of value v.
func (r Result) at(v float64) Point {
	for _, p := range r.Points {
		if p.Value == v {
			return p
		}
	}
	return Point{Value: v}
}

// maxUnusable is how many unusable runs a value may have before the search
// counts it as held with what it has: a fault that never goes in at a value
// must not stall the search.
const maxUnusable = 3

// Search runs the grid over p and bisects toward the boundary.
func Search(ctx context.Context, p Param, run Runner, opt Options) (Result, error) {
	if !(p.From < p.To) {
		return Result{Param: p}, fmt.Errorf("margin: the range %s..%s is empty", p.Format(p.From), p.Format(p.To))
	}
	opt.Grid = max(opt.Grid, 2)
	opt.Trials = max(opt.Trials, 1)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	s := &search{p: p, run: run, opt: opt, tried: map[float64]int{}}
	err := s.do(ctx)
	return s.result(), err
}

type search struct {
	p     Param
	run   Runner
	opt   Options
	pts   []Point
	tried map[float64]int // value → index in pts
	runs  int
}

func (s *search) do(ctx context.Context) error {
	// The grid, from the safe end toward the breaking end.
	var grid []float64
	for i := range s.opt.Grid {
		v := s.p.round(s.p.From + (s.p.To-s.p.From)*float64(i)/float64(s.opt.Grid-1))
		if !slices.Contains(grid, v) {
			grid = append(grid, v)
		}
	}
	if s.p.BreaksLow {
		slices.Reverse(grid)
	}
	for _, v := range grid {
		if err := s.point(ctx, v, false); err != nil {
			return err
		}
	}
	// Bisect between the last value that held before the first that broke.
	for {
		holds, breaks, ok := s.bracket()
		if !ok {
			return nil
		}
		mid := s.p.round((holds + breaks) / 2)
		if math.Abs(breaks-holds) <= s.opt.Resolution || mid == holds || mid == breaks {
			return nil
		}
		if err := s.point(ctx, mid, true); err != nil {
			return err
		}
	}
}

// toward orders values from the safe end to the breaking end.
func (s *search) toward(a, b float64) bool {
	if s.p.BreaksLow {
		return a > b
	}
	return a < b
}

// bracket returns the first value (from the safe end) that broke the lock
// and the last value before it that held; ok is false when nothing broke
// or the first value tried broke.
func (s *search) bracket() (holds, breaks float64, ok bool) {
	pts := s.sorted()
	first := -1
	for i, p := range pts {
		if p.Failures > 0 {
			first = i
			break
		}
	}
	if first <= 0 {
		return 0, 0, false
	}
	return pts[first-1].Value, pts[first].Value, true
}

// sorted returns the points from the safe end to the breaking end.
func (s *search) sorted() []Point {
	pts := slices.Clone(s.pts)
	slices.SortFunc(pts, func(a, b Point) int {
		switch {
		case s.toward(a.Value, b.Value):
			return -1
		case s.toward(b.Value, a.Value):
			return 1
		}
		return 0
	})
	return pts
}

// point runs value v's trials.
func (s *search) point(ctx context.Context, v float64, bisect bool) error {
	pt := Point{Value: v, Label: s.p.Format(v), Bisect: bisect}
	for pt.Counted() < s.opt.Trials {
		if !s.opt.Deadline.IsZero() && !s.opt.Now().Before(s.opt.Deadline) {
			s.add(pt)
			return ErrBudget
		}
		if err := ctx.Err(); err != nil {
			s.add(pt)
			return err
		}
		t, err := s.run(ctx, v, len(pt.Trials))
		if err != nil {
			s.add(pt)
			return err
		}
		s.runs++
		pt.Trials = append(pt.Trials, t)
		switch {
		case t.Unusable:
			pt.Unusable++
			if pt.Unusable > maxUnusable {
				s.add(pt)
				return fmt.Errorf("margin: %s %s: %d runs tested nothing (%s)", s.p.Name, pt.Label, pt.Unusable, t.Why)
			}
		case t.Failed:
			pt.Failures++
		}
	}
	s.add(pt)
	if s.opt.Progress != nil {
		s.opt.Progress(s.pts[s.tried[v]])
	}
	return nil
}

// add stores pt with its rate and interval.
func (s *search) add(pt Point) {
	if n := pt.Counted(); n > 0 {
		iv := stats.Wilson(pt.Failures, n)
		pt.Rate, pt.Low, pt.High = float64(pt.Failures)/float64(n), iv.Lo, iv.Hi
	}
	s.tried[pt.Value] = len(s.pts)
	s.pts = append(s.pts, pt)
}

func (s *search) result() Result {
	r := Result{Param: s.p, Runs: s.runs}
	r.Points = slices.Clone(s.pts)
	slices.SortFunc(r.Points, func(a, b Point) int {
		switch {
		case a.Value < b.Value:
			return -1
		case a.Value > b.Value:
			return 1
		}
		return 0
	})
	pts := s.sorted()
	first := -1
	for i, p := range pts {
		if p.Counted() > 0 && p.Failures > 0 {
			first = i
			break
		}
	}
	if first < 0 {
		for _, p := range pts {
			if p.Counted() > 0 {
				r.Reached = p.Value
			}
		}
		return r
	}
	r.Found, r.Breaks = true, pts[first].Value
	for i := first - 1; i >= 0; i-- {
		if pts[i].Counted() > 0 {
			r.Holds, r.HasHolds = pts[i].Value, true
			break
		}
	}
	for _, p := range pts[first+1:] {
		if p.Counted() > 0 && p.Failures == 0 {
			r.NotMonotone = append(r.NotMonotone, p.Value)
		}
	}
	return r
}
