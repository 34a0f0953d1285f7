package stats

import (
	"math"
	"testing"
)

func TestWilson(t *testing.T) {
	// Reference values from the closed form (e.g. R's prop.test without
	// continuity correction, or any Wilson calculator), to 4 places.
	tests := []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 0, 0, 1},
		{0, 5, 0, 0.4345},
		{5, 5, 0.5655, 1},
		{1, 10, 0.0179, 0.4042},
		{5, 10, 0.2366, 0.7634},
		{50, 100, 0.4038, 0.5962},
		{3, 3, 0.4385, 1},
		{12, 2, 0.3424, 1}, // k is clamped to n
	}
	for _, tt := range tests {
		got := Wilson(tt.k, tt.n)
		if math.Abs(got.Lo-tt.lo) > 5e-5 || math.Abs(got.Hi-tt.hi) > 5e-5 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", tt.k, tt.n, got.Lo, got.Hi, tt.lo, tt.hi)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	tests := []struct{ q, want float64 }{{0, 1}, {20, 1}, {50, 3}, {99, 5}, {100, 5}}
	for _, tt := range tests {
		if got := Percentile(xs, tt.q); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if xs[0] != 5 {
		t.Error("Percentile sorted its input")
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("Percentile of nothing is not NaN")
	}
}

func TestUpper95(t *testing.T) {
	tests := []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 0, 1, 1},
		{0, 3, 0.47, 0.48},    // 2.706/(3+2.706)
		{0, 20, 0.119, 0.120}, // 2.706/(20+2.706)
		{5, 5, 1, 1},
		{1, 20, 0.19, 0.21},
	}
	for _, tt := range tests {
		if u := Upper95(tt.k, tt.n); u < tt.lo || u > tt.hi {
			t.Errorf("Upper95(%d, %d) = %v, want in [%v, %v]", tt.k, tt.n, u, tt.lo, tt.hi)
		}
		if w := Wilson(tt.k, tt.n); tt.n > 0 && tt.k < tt.n && Upper95(tt.k, tt.n) >= w.Hi {
			t.Errorf("the one-sided bound of %d/%d is not below the two-sided %v", tt.k, tt.n, w.Hi)
		}
	}
	for _, tt := range []struct {
		rate float64
		n    int
	}{{0.15, 16}, {0.10, 25}, {0.5, 3}, {0, 0}, {1, 0}} {
		if n := SeedsToHold(tt.rate); n != tt.n {
			t.Errorf("SeedsToHold(%v) = %d, want %d", tt.rate, n, tt.n)
		}
	}
}
