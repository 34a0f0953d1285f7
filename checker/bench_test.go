package checker

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
)

// benchSizes are the history lengths of the benchmarks: growth from one to
// the next shows in ns/histop (time per history op), which stays flat for
// linear work and grows with log n for a sort.
var benchSizes = []int{10_000, 100_000, 1_000_000}

var (
	benchMu    sync.Mutex
	benchCache = map[int]history.History{}
)

// benchHistory returns the generated valid history of n ops by 16
// processes, built once per size.
func benchHistory(n int) history.History {
	benchMu.Lock()
	defer benchMu.Unlock()
	if h, ok := benchCache[n]; ok {
		return h
	}
	h := genHistory(42, n, 16)
	benchCache[n] = h
	return h
}

// perOp reports the time per history op of the benchmark.
func perOp(b *testing.B, n int) {
	if b.N > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/histop")
	}
}

// BenchmarkReadFile decodes a stored history.jsonl of 10k, 100k and 1M ops
// by 16 processes, as `locktest check` does.
func BenchmarkReadFile(b *testing.B) {
	for _, n := range benchSizes {
		h := benchHistory(n)
		path := filepath.Join(b.TempDir(), "history.jsonl")
		w, err := history.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, op := range h {
			if err := w.Append(op); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got, err := history.ReadFile(path); err != nil || len(got) != len(h) {
					b.Fatalf("read %d ops, %v", len(got), err)
				}
			}
			perOp(b, len(h))
		})
	}
}

// BenchmarkCheckers runs each fast checker on generated valid histories of
// 10k, 100k and 1M ops by 16 processes.
func BenchmarkCheckers(b *testing.B) {
	for _, n := range benchSizes {
		h := benchHistory(n)
		for _, c := range All() {
			b.Run(fmt.Sprintf("ops=%d/%s", n, c.Name()), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if r := c.Check(context.Background(), h); r.Valid != Valid {
						b.Fatalf("%s: %s %v", c.Name(), r.Valid, r.Anomalies[:min(3, len(r.Anomalies))])
					}
				}
				perOp(b, len(h))
			})
		}
	}
}

// BenchmarkLinearizable runs the porcupine checkers, bounded by a 30 s
// timeout, on the same histories. The "valid" metric is 1 when porcupine
// finished and found them linearizable and 0 when it could not finish
// (unknown); an invalid verdict fails the benchmark.
func BenchmarkLinearizable(b *testing.B) {
	for _, n := range benchSizes {
		h := benchHistory(n)
		for _, m := range []Model{MutexModel, RegisterModel} {
			c := Linearizable(m, 30*time.Second)
			b.Run(fmt.Sprintf("ops=%d/%s", n, c.Name()), func(b *testing.B) {
				b.ReportAllocs()
				valid := 0.0
				for b.Loop() {
					r := c.Check(context.Background(), h)
					switch r.Valid {
					case Invalid:
						b.Fatalf("%s: %v", c.Name(), r.Anomalies[:min(3, len(r.Anomalies))])
					case Valid:
						valid = 1
					default:
						valid = 0
						b.Logf("%s on %d ops: %s", c.Name(), len(h), r.Error)
					}
				}
				b.ReportMetric(valid, "valid")
				perOp(b, len(h))
			})
		}
	}
}
