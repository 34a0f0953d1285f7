package stats

import (
	"cmp"
	"math"
	"slices"
)

// Observation is one run as survival analysis sees it: its time to the
// first violation (Event true), or the time it ran clean, after which it
// is censored (Event false).
type Observation struct {
	Time  float64
	Event bool
}

// Step is one step of a Kaplan–Meier curve: at Time, Events of the AtRisk
// runs still unbroken failed, and the survival fell to Survival, with the
// pointwise 95% interval [Lo, Hi] (log-log transform, Greenwood's
// variance).
type Step struct {
	Time     float64
	AtRisk   int
	Events   int
	Survival float64
	Lo, Hi   float64
}

// Curve is a Kaplan–Meier estimate of the time a lock survives under a
// set of faults, from runs that broke it and runs that ended clean.
type Curve struct {
	// Steps are the curve's steps, one per distinct time of an event, in
	// time order; before the first, the survival is 1.
	Steps []Step
	// Runs and Events count the observations and those that broke it.
	Runs, Events int
	// Exposure is the time observed, summed over the runs.
	Exposure float64
	// Median is the median time to failure, the first time the survival
	// is at most 1/2, with its 95% interval [MedianLo, MedianHi]
	// (Brookmeyer–Crowley: where the pointwise interval's bounds reach
	// 1/2). Each is +Inf when the curve (or that bound) never reaches 1/2:
	// more than half the runs outlived what was observed.
	Median, MedianLo, MedianHi float64
}

// KaplanMeier estimates the survival curve of obs. At a time where runs
// both failed and were censored, the failures count first: a censored run
// was at risk of them. No observation gives a curve with no step and an
// infinite median.
func KaplanMeier(obs []Observation) Curve {
	c := Curve{Runs: len(obs), Median: math.Inf(1), MedianLo: math.Inf(1), MedianHi: math.Inf(1)}
	sorted := slices.Clone(obs)
	slices.SortStableFunc(sorted, func(a, b Observation) int {
		if d := cmp.Compare(a.Time, b.Time); d != 0 {
			return d
		}
		switch { // events before censorings at one time
		case a.Event && !b.Event:
			return -1
		case !a.Event && b.Event:
			return 1
		}
		return 0
	})
	s, greenwood := 1.0, 0.0
	atRisk := len(sorted)
	for i := 0; i < len(sorted); {
		t := sorted[i].Time
		events, leaving := 0, 0
		for i < len(sorted) && sorted[i].Time == t {
			if sorted[i].Event {
				events++
			}
			c.Exposure += max(sorted[i].Time, 0)
			leaving++
			i++
		}
		if events > 0 {
			s *= 1 - float64(events)/float64(atRisk)
			if atRisk > events {
				greenwood += float64(events) / float64(atRisk*(atRisk-events))
			} else {
				greenwood = math.Inf(1)
			}
			lo, hi := logLog(s, greenwood)
			c.Steps = append(c.Steps, Step{Time: t, AtRisk: atRisk, Events: events, Survival: s, Lo: lo, Hi: hi})
			c.Events += events
		}
		atRisk -= leaving
	}
	c.Median = firstAtMost(c.Steps, func(st Step) float64 { return st.Survival })
	c.MedianLo = firstAtMost(c.Steps, func(st Step) float64 { return st.Lo })
	c.MedianHi = firstAtMost(c.Steps, func(st Step) float64 { return st.Hi })
	return c
}

// logLog is the 95% interval of a survival s whose Greenwood sum is g, on
// the log(-log) scale, which keeps it inside [0, 1]. Where every run at
// risk broke (s is 0, Greenwood's variance does not exist) nothing bounds
// it: the interval is [0, 1], so that a single run's failure time is not
// taken for a tight interval of the median.
func logLog(s, g float64) (lo, hi float64) {
	switch {
	case s <= 0 || math.IsInf(g, 1):
		return 0, 1
	case s >= 1:
		return 1, 1
	}
	se := math.Sqrt(g) / math.Abs(math.Log(s))
	return math.Pow(s, math.Exp(z95*se)), math.Pow(s, math.Exp(-z95*se))
}

// firstAtMost returns the time of the first step whose value is at most
// 1/2, or +Inf.
func firstAtMost(steps []Step, value func(Step) float64) float64 {
	for _, st := range steps {
		if value(st) <= 0.5 {
			return st.Time
		}
	}
	return math.Inf(1)
}

// SurvivalAt returns the curve's survival just after time t, with its
// interval: 1 before the first step.
func (c Curve) SurvivalAt(t float64) (s, lo, hi float64) {
	s, lo, hi = 1, 1, 1
	for _, st := range c.Steps {
		if st.Time > t {
			break
		}
		s, lo, hi = st.Survival, st.Lo, st.Hi
	}
	return s, lo, hi
}

// PoissonUpper95 returns the one-sided 95% upper bound of the rate of
// events of which k were seen in an exposure (a time: run-hours, say),
// exact for a Poisson process: the rate at which seeing k or fewer has a
// 5% chance. For k = 0 it is ln(20)/exposure, about 3/exposure: no
// violation in 60 run-minutes bounds the rate below 3.0 per hour. An
// exposure that is not positive gives +Inf: nothing is known.
func PoissonUpper95(k int, exposure float64) float64 {
	if exposure <= 0 || math.IsNaN(exposure) {
		return math.Inf(1)
	}
	k = max(k, 0)
	// P(X <= k; mu) falls as mu grows: find mu where it is 0.05.
	cdf := func(mu float64) float64 {
		sum := 0.0
		for i := range k + 1 {
			lg, _ := math.Lgamma(float64(i) + 1)
			sum += math.Exp(float64(i)*math.Log(mu) - mu - lg)
		}
		return sum
	}
	lo, hi := 0.0, float64(k)+10
	for cdf(hi) > 0.05 {
		hi *= 2
	}
	for range 200 {
		mid := (lo + hi) / 2
		if cdf(mid) > 0.05 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi / exposure
}

// LogRank is the log-rank test of two samples of survival times: whether
// they come from one survival curve.
type LogRank struct {
	// ObservedA counts the events of the first sample, and ExpectedA how
	// many it would have had if both samples failed at one rate (each
	// event shared out by the runs at risk at its time). ObservedA above
	// ExpectedA says the first sample failed sooner.
	ObservedA, ExpectedA float64
	// Chi2 is the test's statistic (chi-square, one degree of freedom),
	// and P its two-sided p-value: 1 when no event was seen, or no time
	// had runs of both samples at risk.
	Chi2, P float64
}

// LogRankTest compares samples a and b with the log-rank test (Mantel's
// form, with the hypergeometric variance, which handles ties). A censored
// run is at risk at its own time, as in KaplanMeier.
func LogRankTest(a, b []Observation) LogRank {
	type obs struct {
		Observation
		inA bool
	}
	var all []obs
	for _, o := range a {
		all = append(all, obs{o, true})
	}
	for _, o := range b {
		all = append(all, obs{o, false})
	}
	slices.SortStableFunc(all, func(x, y obs) int { return cmp.Compare(x.Time, y.Time) })
	r := LogRank{P: 1}
	atA, atB := len(a), len(b)
	variance := 0.0
	for i := 0; i < len(all); {
		t := all[i].Time
		dA, d, leaveA, leaveB := 0, 0, 0, 0
		for i < len(all) && all[i].Time == t {
			if all[i].Event {
				d++
				if all[i].inA {
					dA++
				}
			}
			if all[i].inA {
				leaveA++
			} else {
				leaveB++
			}
			i++
		}
		if n := atA + atB; d > 0 && n > 0 {
			nf, df := float64(n), float64(d)
			r.ObservedA += float64(dA)
			r.ExpectedA += df * float64(atA) / nf
			if n > 1 {
				variance += float64(atA) * float64(atB) * df * (nf - df) / (nf * nf * (nf - 1))
			}
		}
		atA -= leaveA
		atB -= leaveB
	}
	if variance > 0 {
		diff := r.ObservedA - r.ExpectedA
		r.Chi2 = diff * diff / variance
		r.P = math.Erfc(math.Sqrt(r.Chi2 / 2))
	}
	return r
}

// MaxExactSplits bounds the ways of splitting the pooled runs that
// LogRankExact enumerates: C(10, 5) is 252, C(20, 10) 184,756.
const MaxExactSplits = 200_000

// LogRankExact is the one-sided permutation form of the log-rank test,
// for samples too small for the chi-square its p-value leans on: of every
// way of choosing len(a) of the pooled runs as the first sample, the
// share whose events exceed their expectation (ObservedA − ExpectedA) at
// least as much as a's do. It is the chance that a would look as early
// to fail as it does if both samples came from one curve. A sample of 1
// run against 5 can reach no lower p than 1/6, however early its one
// failure, where the chi-square says 0.025. ok is false, and p 1, when
// there are more than MaxExactSplits ways or either sample is empty.
func LogRankExact(a, b []Observation) (p float64, ok bool) {
	n, k := len(a)+len(b), len(a)
	if k == 0 || len(b) == 0 || binomial(n, k) > MaxExactSplits {
		return 1, false
	}
	pool := append(slices.Clone(a), b...)
	excess := func(r LogRank) float64 { return r.ObservedA - r.ExpectedA }
	seen := excess(LogRankTest(a, b))
	const tolerance = 1e-9
	var atLeast, all int
	pick := make([]int, k)
	for i := range pick {
		pick[i] = i
	}
	inA := make([]bool, n)
	for {
		clear(inA)
		for _, i := range pick {
			inA[i] = true
		}
		var sa, sb []Observation
		for i, o := range pool {
			if inA[i] {
				sa = append(sa, o)
			} else {
				sb = append(sb, o)
			}
		}
		all++
		if excess(LogRankTest(sa, sb)) >= seen-tolerance {
			atLeast++
		}
		// The next k-subset of 0..n-1 in lexicographic order.
		i := k - 1
		for i >= 0 && pick[i] == n-k+i {
			i--
		}
		if i < 0 {
			break
		}
		pick[i]++
		for j := i + 1; j < k; j++ {
			pick[j] = pick[j-1] + 1
		}
	}
	return float64(atLeast) / float64(all), true
}

// binomial is n choose k, capped just above MaxExactSplits.
func binomial(n, k int) int {
	k = min(k, n-k)
	c := 1
	for i := 1; i <= k; i++ {
		c = c * (n - k + i) / i
		if c > MaxExactSplits {
			return MaxExactSplits + 1
		}
	}
	return c
}
