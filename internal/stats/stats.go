// Package stats holds the small statistics locktest reports over repeated
// runs: rates with confidence intervals and percentiles.
package stats

import (
	"math"
	"slices"
)

// Interval is a closed interval of proportions in [0, 1].
type Interval struct{ Lo, Hi float64 }

// z95 is the two-sided 95% quantile of the standard normal distribution.
const z95 = 1.959963984540054

// Wilson returns the 95% Wilson score interval of the proportion k/n. It
// stays inside [0, 1] and is meaningful for small n and for k = 0 or k = n,
// where the normal approximation is not. n = 0 gives [0, 1]: nothing is
// known.
func Wilson(k, n int) Interval {
	if n <= 0 {
		return Interval{0, 1}
	}
	k = min(max(k, 0), n)
	p, nf, z2 := float64(k)/float64(n), float64(n), z95*z95
	centre := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z95 / (1 + z2/nf) * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	lo, hi := math.Max(0, centre-half), math.Min(1, centre+half)
	if k == 0 {
		lo = 0
	}
	if k == n {
		hi = 1
	}
	return Interval{lo, hi}
}

// z95OneSided is the one-sided 95% quantile of the standard normal
// distribution.
const z95OneSided = 1.6448536269514722

// Upper95 returns the one-sided 95% Wilson upper bound of the proportion
// k/n: the rate below which the true rate lies with 95% confidence, the
// bound a claim "the rate is below X" needs. For k = 0 it is
// z²/(n+z²): about 12% at n = 20. n = 0 gives 1: nothing is known.
func Upper95(k, n int) float64 {
	if n <= 0 {
		return 1
	}
	k = min(max(k, 0), n)
	if k == n {
		return 1
	}
	p, nf, z2 := float64(k)/float64(n), float64(n), z95OneSided*z95OneSided
	centre := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z95OneSided / (1 + z2/nf) * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return math.Min(1, centre+half)
}

// SeedsToHold returns the fewest runs without a violation whose one-sided
// 95% upper bound (Upper95) is below maxRate; 0 for a maxRate not in (0, 1).
func SeedsToHold(maxRate float64) int {
	if maxRate <= 0 || maxRate >= 1 {
		return 0
	}
	n := 1
	for Upper95(0, n) >= maxRate {
		n++
	}
	return n
}

// DefaultMaxRate is the violation rate a safe claim must be shown to stay
// below, at 95% confidence, to be held (16 runs without a violation do it,
// SeedsToHold); a rate shown to lie above it (its interval's lower bound
// beyond it) is a failure that more runs will not turn into a hold.
const DefaultMaxRate = 0.15

// Percentile returns the q-th percentile (0 ≤ q ≤ 100) of xs by the
// nearest-rank method, or NaN for no values. xs is not modified.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(q / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
