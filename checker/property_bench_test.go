package checker

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
)

// peakHeap runs f and reports the most heap its objects took above what
// they took before it, in MB ("peak-MB"), sampled every 200 µs.
func peakHeap(b *testing.B, f func()) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	peak := base
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, read())
			}
		}
	}()
	f()
	close(done)
	<-sampled
	peak = max(peak, read())
	b.ReportMetric(float64(peak-base)/1e6, "peak-MB")
}

// BenchmarkProperty checks each property on one generated valid history
// of 1M ops by 16 processes (genhist.Valid), held in a history.Table
// built before the clock starts, as Decide holds it: "check" is the
// property's Checker alone; "stream" is mutual exclusion's streaming twin
// fed the table's ops (streamTable); "all" runs the four checkers of All
// side by side (Run), sharing what they share. time/op, B/op, allocs/op
// and peak-MB (the most heap above what the table takes, garbage not yet
// collected included) compare them.
func BenchmarkProperty(b *testing.B) {
	n := 1_000_000
	h := history.NewTable(benchHistory(n))
	runs := []struct {
		name string
		run  func() []Result
	}{
		{"all", func() []Result { return Run(context.Background(), h, All()...) }},
		{"mutual-exclusion/stream", func() []Result {
			r, _ := streamTable(context.Background(), h, "mutual-exclusion", NewStreamMutex())
			return []Result{r}
		}},
	}
	for _, c := range All() {
		runs = append(runs, struct {
			name string
			run  func() []Result
		}{c.Name() + "/check", func() []Result { return []Result{c.Check(context.Background(), h)} }})
	}
	for _, r := range runs {
		b.Run(fmt.Sprintf("ops=%d/%s", n, r.name), func(b *testing.B) {
			b.ReportAllocs()
			peakHeap(b, func() {
				for b.Loop() {
					for _, res := range r.run() {
						if res.Valid != Valid {
							b.Fatalf("%s: %s %v", res.Checker, res.Valid, res.Anomalies[:min(3, len(res.Anomalies))])
						}
					}
				}
			})
			perOp(b, n)
		})
	}
}
