package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/testkit/genhist"
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
	h := genhist.Valid(42, n, 16)
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
		if err := history.WriteFile(path, h); err != nil {
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
					if r := c.Check(context.Background(), history.NewTable(h)); r.Valid != Valid {
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
					r := c.Check(context.Background(), history.NewTable(h))
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

// genBlocking returns a valid history of about n ops of a blocking session
// lock (no valid_until), one lock taken in turn by procs processes, as
// pg-advisory or mysql-get-lock make it under contention: every process
// that is not holding the lock has an acquire waiting, so that no moment
// comes at which every op has completed; a holder reads and writes the
// resource in its critical section. Every 500th grant's acquire was
// invoked, timed out (info) and retried first, and every 5000th holder is
// killed in its critical section (kill-client) and its lock freed.
func genBlocking(seed uint64, n, procs int) history.History {
	rng := rand.New(rand.NewPCG(seed, 0xb10c))
	h := make(history.History, 0, n+64)
	t := int64(1_000_000)
	tick := func() int64 { t += 1 + rng.Int64N(200_000); return t }
	add := func(typ history.Type, p int, f string, v history.Value, e string) {
		h = append(h, history.Op{Index: len(h), Type: typ, Process: p, F: f, Time: tick(), Value: v, Error: e})
	}
	x := history.Value{Lock: "x"}
	var queue []int // waiting processes, in the order they will be granted
	next := procs
	for p := range procs {
		add(history.Invoke, p, history.Acquire, x, "")
		queue = append(queue, p)
	}
	counter := int64(0)
	for k := 0; len(h) < n; k++ {
		p := queue[0]
		queue = queue[1:]
		if k%500 == 499 {
			add(history.Info, p, history.Acquire, x, "context deadline exceeded")
			add(history.Invoke, p, history.Acquire, x, "")
		}
		add(history.OK, p, history.Acquire, x, "")
		add(history.Invoke, p, history.Read, x, "")
		add(history.OK, p, history.Read, history.Value{Lock: "x", N: history.Num(counter)}, "")
		counter++
		add(history.Invoke, p, history.Write, history.Value{Lock: "x", N: history.Num(counter)}, "")
		add(history.OK, p, history.Write, history.Value{Lock: "x", N: history.Num(counter)}, "")
		if k%5000 == 4999 {
			add(history.Invoke, history.NemesisProcess, "kill-client", history.Value{}, "")
			add(history.OK, history.NemesisProcess, "kill-client", history.Value{Targets: []string{fmt.Sprintf("p%d", p)}}, "")
			p, next = next, next+1 // its replacement
		} else {
			add(history.Invoke, p, history.Release, x, "")
			add(history.OK, p, history.Release, x, "")
		}
		add(history.Invoke, p, history.Acquire, x, "")
		queue = append(queue, p)
	}
	return h
}

// BenchmarkLinearizableBlocking runs the porcupine checkers on generated
// blocking-session-lock histories (genBlocking) of 10k, 100k and 1M ops by
// 32 processes, where an acquire is always waiting, so that the windows
// are cut at the holders the history proves. The "windows" metric is
// their number; "valid" is 1 when the verdict is valid.
func BenchmarkLinearizableBlocking(b *testing.B) {
	for _, n := range benchSizes {
		h := genBlocking(7, n, 32)
		for _, m := range []Model{MutexModel, RegisterModel} {
			c := Linearizable(m, 30*time.Second)
			b.Run(fmt.Sprintf("ops=%d/%s", n, c.Name()), func(b *testing.B) {
				b.ReportAllocs()
				var r Result
				for b.Loop() {
					r = c.Check(context.Background(), history.NewTable(h))
					if r.Valid == Invalid {
						b.Fatalf("%s: %v", c.Name(), r.Anomalies)
					}
				}
				valid := 0.0
				if r.Valid == Valid {
					valid = 1
				} else {
					b.Logf("%s on %d ops: %s", c.Name(), len(h), r.Error)
				}
				b.ReportMetric(valid, "valid")
				b.ReportMetric(r.Stats["windows"], "windows")
				perOp(b, len(h))
			})
		}
	}
}

// BenchmarkStreams feeds the generated valid histories of 10k, 100k and 1M
// ops by 16 processes, in order, to each streaming checker and to the
// three together through one reorder buffer (Streams, as a
// --stop-on-violation run's watch does): ns/histop is what the watch
// spends on each recorded op.
func BenchmarkStreams(b *testing.B) {
	streams := map[string]func() []Stream{
		"mutex":    func() []Stream { return []Stream{NewStreamMutex()} },
		"resource": func() []Stream { return []Stream{NewStreamResource("none")} },
		"fencing":  func() []Stream { return []Stream{NewStreamFencing()} },
		"all":      func() []Stream { return []Stream{NewStreamMutex(), NewStreamResource("none"), NewStreamFencing()} },
	}
	for _, n := range benchSizes {
		h := benchHistory(n)
		for _, name := range []string{"mutex", "resource", "fencing", "all"} {
			b.Run(fmt.Sprintf("ops=%d/%s", n, name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					ss := streams[name]()
					m := NewStreams(ss...)
					for p := range 16 {
						m.Expect(p)
					}
					for _, op := range h {
						m.Add(op)
					}
					m.Finish()
					for _, s := range ss {
						if r := s.Finish(); r.Valid != Valid {
							b.Fatalf("%s: %s %v", r.Checker, r.Valid, r.Anomalies[:min(3, len(r.Anomalies))])
						}
					}
				}
				perOp(b, len(h))
			})
		}
	}
}
