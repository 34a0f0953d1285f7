package margin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const ms = float64(time.Millisecond)

// threshold is a runner whose lock breaks, every time, at values at or
// beyond at (at or below, when low).
func threshold(at float64, low bool) Runner {
	return func(_ context.Context, v float64, trial int) (Trial, error) {
		broke := v >= at
		if low {
			broke = v <= at
		}
		return Trial{Run: fmt.Sprintf("v%v-t%d", v, trial), Failed: broke}, nil
	}
}

func TestSearchFindsTheBoundary(t *testing.T) {
	for _, c := range []struct {
		name      string
		p         Param
		at        float64
		res       float64
		summary   string
		wantHolds bool
	}{
		{"pause", Param{Name: "pause", From: 0, To: 3000 * ms}, 940 * ms, 20 * ms,
			"breaks at pause ≥ 944ms (between 938ms, 0 of 3 failed, and 950ms, 3 of 3 failed)", true},
		{"ttl breaks low", Param{Name: "ttl", From: 500 * ms, To: 5000 * ms, BreaksLow: true}, 1200 * ms, 50 * ms,
			"breaks at ttl ≤ 1.187s (between 1.204s, 0 of 3 failed, and 1.169s, 3 of 3 failed)", true},
		{"count", Param{Name: "targets", Kind: Count, From: 1, To: 5}, 3, 0.5,
			"breaks at targets ≥ 3 (between 2, 0 of 3 failed, and 3, 3 of 3 failed)", true},
		{"beyond the range", Param{Name: "pause", From: 2000 * ms, To: 3000 * ms}, 940 * ms, 20 * ms,
			"breaks at every pause tried, from 2s (3 of 3 failed): the boundary lies beyond the range", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var progress []string
			r, err := Search(context.Background(), c.p, threshold(c.at, c.p.BreaksLow), Options{Grid: 5, Trials: 3, Resolution: c.res,
				Progress: func(p Point) { progress = append(progress, p.Label) }})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Summary(); got != c.summary {
				t.Errorf("summary\n got %q\nwant %q", got, c.summary)
			}
			if !r.Found || r.HasHolds != c.wantHolds {
				t.Fatalf("found %v, holds %v: want found, holds %v", r.Found, r.HasHolds, c.wantHolds)
			}
			if c.wantHolds {
				// The true boundary lies in the bracket, which is no wider
				// than the resolution (or neighbouring counts).
				lo, hi := min(r.Holds, r.Breaks), max(r.Holds, r.Breaks)
				if c.p.BreaksLow {
					if !(lo <= c.at && c.at < hi) {
						t.Errorf("bracket [%v, %v] misses the boundary %v", lo, hi, c.at)
					}
				} else if !(lo < c.at && c.at <= hi) {
					t.Errorf("bracket [%v, %v] misses the boundary %v", lo, hi, c.at)
				}
				if hi-lo > max(c.res, 1) {
					t.Errorf("bracket [%v, %v] wider than the resolution %v", lo, hi, c.res)
				}
			}
			if !slices.IsSortedFunc(r.Points, func(a, b Point) int { return int(a.Value - b.Value) }) {
				t.Errorf("points not in order of value: %v", r.Points)
			}
			if len(progress) != len(r.Points) {
				t.Errorf("%d progress calls for %d points", len(progress), len(r.Points))
			}
			runs := 0
			for _, p := range r.Points {
				runs += len(p.Trials)
				if p.Failures > 0 && p.Low <= 0 || p.Failures == 0 && p.High <= 0 || p.High > 1 || p.Low > p.Rate || p.Rate > p.High {
					t.Errorf("point %s: rate %v with interval [%v, %v]", p.Label, p.Rate, p.Low, p.High)
				}
			}
			if runs != r.Runs {
				t.Errorf("%d trials in the points, Runs %d", runs, r.Runs)
			}
		})
	}
}

func TestSearchThatNeverBreaks(t *testing.T) {
	r, err := Search(context.Background(), Param{Name: "clock-bump", From: 0, To: 4000 * ms}, threshold(math.Inf(1), false), Options{Grid: 3, Trials: 2, Resolution: 10 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if r.Found || r.Reached != 4000*ms || len(r.Points) != 3 || r.Runs != 6 {
		t.Fatalf("found %v, reached %v, %d points, %d runs: want not found, reached 4s, the grid only", r.Found, r.Reached, len(r.Points), r.Runs)
	}
	if want := "no violation at any clock-bump tried, up to 4s (0 of 2 failed)"; r.Summary() != want {
		t.Errorf("summary %q, want %q", r.Summary(), want)
	}
	// 0 of 2: the rate may still be as high as Wilson's upper bound.
	if p := r.Points[2]; p.Rate != 0 || p.High < 0.6 {
		t.Errorf("0 of 2 failed: rate %v, upper %v; want 0 and about 0.66", p.Rate, p.High)
	}
}

// TestSearchReportsWhatABoundaryDoesNotExplain: a value beyond the first
// that broke held in all its trials.
func TestSearchReportsWhatABoundaryDoesNotExplain(t *testing.T) {
	broke := map[float64]bool{1500 * ms: true, 3000 * ms: true, 1125 * ms: true, 938 * ms: false}
	run := func(_ context.Context, v float64, _ int) (Trial, error) { return Trial{Failed: broke[v]}, nil }
	r, err := Search(context.Background(), Param{Name: "pause", From: 0, To: 3000 * ms}, run, Options{Grid: 5, Trials: 2, Resolution: 200 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Found || r.Holds != 938*ms || r.Breaks != 1125*ms {
		t.Fatalf("bracket %v..%v, want 938ms..1.125s", r.Holds, r.Breaks)
	}
	if !slices.Equal(r.NotMonotone, []float64{2250 * ms}) {
		t.Errorf("not monotone %v, want [2.25s]", r.NotMonotone)
	}
}

// TestSearchRunsUnusableTrialsAgain: a run that tested nothing is not
// counted, and a value whose runs keep testing nothing ends the search.
func TestSearchRunsUnusableTrialsAgain(t *testing.T) {
	calls := 0
	run := func(_ context.Context, v float64, trial int) (Trial, error) {
		calls++
		if calls%2 == 1 {
			return Trial{Unusable: true, Why: "the pause did not go in"}, nil
		}
		return Trial{Failed: v > 0}, nil
	}
	r, err := Search(context.Background(), Param{Name: "pause", From: 0, To: 1000 * ms}, run, Options{Grid: 2, Trials: 2, Resolution: 600 * ms})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Points {
		if p.Counted() != 2 || p.Unusable != 2 {
			t.Errorf("point %s: %d counted, %d unusable; want 2 and 2", p.Label, p.Counted(), p.Unusable)
		}
	}
	never := func(context.Context, float64, int) (Trial, error) {
		return Trial{Unusable: true, Why: "no client acquired"}, nil
	}
	_, err = Search(context.Background(), Param{Name: "pause", From: 0, To: 1000 * ms}, never, Options{Grid: 2, Trials: 2})
	if err == nil || !strings.Contains(err.Error(), "pause 0s: 4 runs tested nothing (no client acquired)") {
		t.Errorf("error %v: want the value and why its runs tested nothing", err)
	}
}

func TestSearchStopsAtItsBudget(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	run := func(_ context.Context, v float64, _ int) (Trial, error) {
		now = now.Add(time.Minute)
		return Trial{Failed: v >= 500*ms}, nil
	}
	r, err := Search(context.Background(), Param{Name: "pause", From: 0, To: 1000 * ms}, run,
		Options{Grid: 3, Trials: 2, Resolution: ms, Deadline: time.Unix(0, 0).Add(5 * time.Minute), Now: clock})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("error %v, want the budget's", err)
	}
	if r.Runs != 5 || !r.Found || r.Breaks != 500*ms || r.Holds != 0 {
		t.Errorf("%d runs, found %v at %v after %v: want 5 runs, the grid's bracket 0..500ms", r.Runs, r.Found, r.Breaks, r.Holds)
	}
}

func TestSearchRefusesAnEmptyRange(t *testing.T) {
	_, err := Search(context.Background(), Param{Name: "pause", From: 2000 * ms, To: 1000 * ms}, threshold(0, false), Options{})
	if err == nil || !strings.Contains(err.Error(), "2s..1s") {
		t.Errorf("error %v, want the empty range named", err)
	}
}

func TestSummaryOfASearchThatDecidedNothing(t *testing.T) {
	r := Result{Param: Param{Name: "pause"}}
	if got, want := r.Summary(), "nothing decided: no run at any pause finished"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// TestBreached says when a search broke the lock on the safe side of a
// reference by more than the tolerance, for a parameter that breaks high
// (a pause) and one that breaks low (a clock rate, in thousandths).
func TestBreached(t *testing.T) {
	pause := Param{Name: "pause", Kind: Duration}
	rate := Param{Name: "clock-rate", Kind: Factor, BreaksLow: true}
	for _, c := range []struct {
		name           string
		r              Result
		ref, tolerance float64
		want           bool
	}{
		{"nothing broke", Result{Param: pause, Reached: 500}, 1000, 50, false},
		{"broke beyond the bound", Result{Param: pause, Found: true, Breaks: 1100}, 1000, 50, false},
		{"broke within the tolerance below it", Result{Param: pause, Found: true, Breaks: 960}, 1000, 50, false},
		{"broke at the tolerance's edge", Result{Param: pause, Found: true, Breaks: 950}, 1000, 50, false},
		{"broke below it", Result{Param: pause, Found: true, Breaks: 900}, 1000, 50, true},
		{"a slow clock broke beyond the ratio", Result{Param: rate, Found: true, Breaks: 600}, 667, 10, false},
		{"a slow clock broke within the ratio", Result{Param: rate, Found: true, Breaks: 694}, 667, 10, true},
		{"a slow clock broke within the tolerance", Result{Param: rate, Found: true, Breaks: 675}, 667, 10, false},
	} {
		if got := c.r.Breached(c.ref, c.tolerance); got != c.want {
			t.Errorf("%s: Breached(%v, %v) = %v, want %v", c.name, c.ref, c.tolerance, got, c.want)
		}
	}
}
