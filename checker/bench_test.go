package checker

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkCheckers runs each checker on generated valid histories of 10k,
// 100k and 1M ops by 16 processes.
func BenchmarkCheckers(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		h := genHistory(42, n, 16)
		for _, c := range All() {
			b.Run(fmt.Sprintf("ops=%d/%s", n, c.Name()), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if r := c.Check(context.Background(), h); r.Valid != Valid {
						b.Fatalf("%s: %s %v", c.Name(), r.Valid, r.Anomalies[:min(3, len(r.Anomalies))])
					}
				}
			})
		}
	}
}
