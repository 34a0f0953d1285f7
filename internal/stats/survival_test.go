package stats

import (
	"math"
	"testing"
)

// near reports whether a and b agree to 4 decimals.
func near(a, b float64) bool { return math.Abs(a-b) < 5e-5 }

// sixMP is the remission times, in weeks, of the 6-MP group of Freireich
// et al. (1963); a remission still going at the end is censored.
func sixMP() []Observation {
	var obs []Observation
	for _, x := range []struct {
		t     float64
		event bool
	}{{6, true}, {6, true}, {6, true}, {6, false}, {7, true}, {9, false}, {10, true}, {10, false}, {11, false},
		{13, true}, {16, true}, {17, false}, {19, false}, {20, false}, {22, true}, {23, true}, {25, false},
		{32, false}, {32, false}, {34, false}, {35, false}} {
		obs = append(obs, Observation{x.t, x.event})
	}
	return obs
}

// TestKaplanMeierOfTheTextbookData: the remission times of the 6-MP
// group of Freireich et al. (1963), the classic example (Klein and
// Moeschberger, table 4.1): the estimate and Greenwood's standard error
// at each event time, the median and its log-log interval.
func TestKaplanMeierOfTheTextbookData(t *testing.T) {
	c := KaplanMeier(sixMP())
	want := []struct {
		t              float64
		atRisk, events int
		s, se, lo, hi  float64
	}{
		{6, 21, 3, 0.8571, 0.0764, 0.6197, 0.9516},
		{7, 17, 1, 0.8067, 0.0869, 0.5631, 0.9228},
		{10, 15, 1, 0.7529, 0.0963, 0.5032, 0.8894},
		{13, 12, 1, 0.6902, 0.1068, 0.4316, 0.8491},
		{16, 11, 1, 0.6275, 0.1141, 0.3675, 0.8049},
		{22, 7, 1, 0.5378, 0.1282, 0.2678, 0.7468},
		{23, 6, 1, 0.4482, 0.1346, 0.1881, 0.6801},
	}
	if len(c.Steps) != len(want) || c.Runs != 21 || c.Events != 9 || c.Exposure != 359 {
		t.Fatalf("%d steps, %d runs, %d events, exposure %v; want 7, 21, 9, 359", len(c.Steps), c.Runs, c.Events, c.Exposure)
	}
	g := 0.0
	for i, w := range want {
		st := c.Steps[i]
		g += float64(st.Events) / float64(st.AtRisk*(st.AtRisk-st.Events))
		se := st.Survival * math.Sqrt(g) // Greenwood's standard error
		if st.Time != w.t || st.AtRisk != w.atRisk || st.Events != w.events || !near(st.Survival, w.s) ||
			math.Abs(se-w.se) > 5e-5 || !near(st.Lo, w.lo) || !near(st.Hi, w.hi) {
			t.Errorf("step %d: %+v (se %.4f), want %+v", i, st, se, w)
		}
	}
	if c.Median != 23 || c.MedianLo != 13 || !math.IsInf(c.MedianHi, 1) {
		t.Errorf("median %v (%v–%v), want 23 (13–+Inf)", c.Median, c.MedianLo, c.MedianHi)
	}
	if s, lo, hi := c.SurvivalAt(12); !near(s, 0.7529) || !near(lo, 0.5032) || !near(hi, 0.8894) {
		t.Errorf("survival at 12: %v (%v–%v)", s, lo, hi)
	}
	if s, _, _ := c.SurvivalAt(5); s != 1 {
		t.Errorf("survival before the first event: %v", s)
	}
}

// TestKaplanMeierEdges: no run, runs that all ended clean, and runs that
// all broke the lock (where the last step's survival is 0 and its interval
// [0, 1], so the median's upper bound is not known).
func TestKaplanMeierEdges(t *testing.T) {
	if c := KaplanMeier(nil); len(c.Steps) != 0 || !math.IsInf(c.Median, 1) {
		t.Errorf("no runs: %+v", c)
	}
	clean := KaplanMeier([]Observation{{30, false}, {30, false}, {30, false}})
	if len(clean.Steps) != 0 || clean.Events != 0 || clean.Exposure != 90 || !math.IsInf(clean.Median, 1) {
		t.Errorf("clean runs: %+v", clean)
	}
	broken := KaplanMeier([]Observation{{1, true}, {2, true}, {3, true}, {4, true}})
	last := broken.Steps[len(broken.Steps)-1]
	if broken.Median != 2 || last.Survival != 0 || last.Lo != 0 || last.Hi != 1 || !math.IsInf(broken.MedianHi, 1) {
		t.Errorf("broken runs: median %v (%v–%v), last step %+v", broken.Median, broken.MedianLo, broken.MedianHi, last)
	}
}

// TestPoissonUpper95: the exact one-sided bounds of the tables: 3.00 for
// no event in a unit of exposure, 4.74 for one, 10.51 for five (here over
// two units).
func TestPoissonUpper95(t *testing.T) {
	for _, tt := range []struct {
		k        int
		exposure float64
		want     float64
	}{{0, 1, math.Log(20)}, {1, 1, 4.7439}, {5, 2, 10.5130 / 2}, {0, 0.5, 2 * math.Log(20)}} {
		if got := PoissonUpper95(tt.k, tt.exposure); math.Abs(got-tt.want) > 1e-3 {
			t.Errorf("PoissonUpper95(%d, %v) = %v, want %v", tt.k, tt.exposure, got, tt.want)
		}
	}
	if got := PoissonUpper95(3, 0); !math.IsInf(got, 1) {
		t.Errorf("no exposure: %v, want +Inf", got)
	}
	// Many events: the bound is finite, above the count, and close to the
	// normal approximation's.
	if got := PoissonUpper95(2000, 1); got < 2000 || got > 2000+1.645*math.Sqrt(2000)+3 {
		t.Errorf("PoissonUpper95(2000, 1) = %v", got)
	}
}

// TestLogRankOfTheTextbookData: the 6-MP group of Freireich et al. (1963)
// against its placebo group, every one of whose 21 remissions ended (Klein
// and Moeschberger, example 7.2): chi-square 16.79, p 4.2e-5, with 9
// relapses seen in the 6-MP group where 19.25 were expected.
func TestLogRankOfTheTextbookData(t *testing.T) {
	drug, placebo := sixMP(), []Observation(nil)
	for _, x := range []float64{1, 1, 2, 2, 3, 4, 4, 5, 5, 8, 8, 8, 8, 11, 11, 12, 12, 15, 17, 22, 23} {
		placebo = append(placebo, Observation{x, true})
	}
	r := LogRankTest(drug, placebo)
	if r.ObservedA != 9 || math.Abs(r.ExpectedA-19.25) > 0.005 || math.Abs(r.Chi2-16.79) > 0.005 || math.Abs(r.P-4.17e-5) > 1e-6 {
		t.Errorf("log-rank %+v; want 9 observed, 19.25 expected, chi-square 16.79, p 4.17e-5", r)
	}
	// The test is symmetric: the other order sees the placebo's excess.
	if s := LogRankTest(placebo, drug); s.ObservedA != 21 || math.Abs(s.Chi2-r.Chi2) > 1e-9 {
		t.Errorf("reversed: %+v", s)
	}
	// One sample against itself is no evidence; no events neither.
	if s := LogRankTest(drug, drug); s.Chi2 != 0 || s.P != 1 {
		t.Errorf("against itself: %+v", s)
	}
	clean := []Observation{{10, false}, {10, false}}
	if s := LogRankTest(clean, clean); s.P != 1 || s.ObservedA != 0 {
		t.Errorf("no events: %+v", s)
	}
}

func TestLogRankExact(t *testing.T) {
	fail := func(ts ...float64) []Observation {
		var out []Observation
		for _, x := range ts {
			out = append(out, Observation{Time: x, Event: true})
		}
		return out
	}
	cases := []struct {
		name     string
		a, b     []Observation
		lo, hi   float64
		ok       bool
		chiBelow float64 // the chi-square's p is below this, where it misleads
	}{
		// One early failure against five later ones: the earliest of six
		// by chance one time in six, which the chi-square calls p 0.025.
		{"one run against five", fail(0.1), fail(1, 2, 3, 4, 5), 1.0 / 6, 1.0 / 6, true, 0.05},
		// Five runs all failing before five others: one split in 252.
		{"five before five", fail(0.1, 0.2, 0.3, 0.4, 0.5), fail(5, 6, 7, 8, 9), 1.0 / 252, 1.0 / 252, true, 1},
		// The first sample failing later: nothing like an early failure.
		{"later", fail(5, 6, 7), fail(0.1, 0.2, 0.3), 0.9, 1, true, 1},
		{"empty", nil, fail(1), 1, 1, false, 1},
	}
	for _, c := range cases {
		p, ok := LogRankExact(c.a, c.b)
		if ok != c.ok || p < c.lo-1e-9 || p > c.hi+1e-9 {
			t.Errorf("%s: p %.4f ok %v, want p in [%.4f, %.4f] ok %v", c.name, p, ok, c.lo, c.hi, c.ok)
		}
		if c.chiBelow < 1 {
			if lr := LogRankTest(c.a, c.b); lr.P >= c.chiBelow {
				t.Errorf("%s: the chi-square's p %.3f, want below %.2f (the case it misjudges)", c.name, lr.P, c.chiBelow)
			}
		}
	}
	if _, ok := LogRankExact(fail(make([]float64, 15)...), fail(make([]float64, 15)...)); ok {
		t.Error("C(30, 15) splits enumerated: want ok false above MaxExactSplits")
	}
}
