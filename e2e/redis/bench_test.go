package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/bareloop"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
	"github.com/locktest/locktest/workloads"
)

// BenchmarkDriverVsBare measures locktest's critical sections per second
// with redis-set-nx-px and no faults against its reference: the bare
// go-redis loop of testkit/bareloop making the same four round trips,
// one separate process per client, with the same retry policy. The two
// alternate, bare loop first, in five rounds per iteration, since the
// rate of a shared 2-core machine drifts; the metrics are the medians of
// the rounds, ratio being locktest's rate over the loop's.
func BenchmarkDriverVsBare(b *testing.B) {
	gate.Need(b, "redis-server")
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var bare, drv, ratio []float64
			for range b.N {
				for range 5 {
					cfg := testkit.Config(b, "redis-set-nx-px")
					cfg.Clients, cfg.Duration = clients, time.Minute
					br := bareRate(b, clients, 3*time.Second, cfg.WorkerBackoff())
					rate, err := run.Throughput(context.Background(), cfg, 6000)
					if err != nil {
						b.Fatal(err)
					}
					bare, drv, ratio = append(bare, br), append(drv, rate), append(ratio, rate/br)
				}
			}
			b.ReportMetric(stats.Percentile(drv, 50), "cs/s")
			b.ReportMetric(stats.Percentile(bare, 50), "bare-cs/s")
			b.ReportMetric(stats.Percentile(ratio, 50), "ratio")
		})
	}
}

// bareRate runs the bare loop in clients processes of this test binary
// against a fresh redis-server for d and returns their critical sections
// per second together.
func bareRate(tb testing.TB, clients int, d time.Duration, bo workloads.Backoff) float64 {
	return bareRateOn(tb, clients, 1, d, bo)
}

// bareRateOn is bareRate with the clients contending for locks locks, as
// locktest's workers do: each attempt picks one of them at random.
func bareRateOn(tb testing.TB, clients, locks int, d time.Duration, bo workloads.Backoff) float64 {
	tb.Helper()
	names := make([]string, locks)
	for i := range names {
		names[i] = fmt.Sprintf("lock-%d", i)
	}
	r, err := local.NewProcesses("redis", local.Options{Dir: tb.TempDir()})
	r = testcluster.Started(tb, r, err)
	var (
		mu       sync.Mutex
		sections int
		longest  time.Duration
		wg       sync.WaitGroup
		errs     []error
	)
	for i := range clients {
		cfg, _ := json.Marshal(bareloop.Config{Addr: r.Nodes()[0].Addr, Locks: names, TTL: time.Second, Duration: d, Backoff: bo, Seed: uint64(i + 1)})
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), testexe.BareEnv+"="+string(cfg))
		cmd.Stderr = os.Stderr
		wg.Go(func() {
			out, err := cmd.Output()
			var res bareloop.Result
			if err == nil {
				err = json.Unmarshal(out, &res)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			sections += res.Sections
			longest = max(longest, res.Elapsed)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		tb.Fatal(errs)
	}
	return float64(sections) / longest.Seconds()
}

// BenchmarkDriverMemory runs redis-set-nx-px with 4 clients and no faults
// for LOCKTEST_BENCH_SOAK (default 30s) and samples the driver's RSS and
// live heap every second while the workload runs. It reports both at a
// quarter of the workload and at its end, the ops recorded, the growth of
// the live heap per op between the two samples (flat memory shows as a
// growth near 0), and the peak RSS of the whole run, the check at the end
// included, whose verdict must be valid.
func BenchmarkDriverMemory(b *testing.B) {
	gate.Need(b, "redis-server")
	d := 30 * time.Second
	if s := os.Getenv("LOCKTEST_BENCH_SOAK"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			b.Fatalf("LOCKTEST_BENCH_SOAK: %v", err)
		}
	}
	for range b.N {
		cfg := testkit.Config(b, "redis-set-nx-px")
		cfg.Clients, cfg.Duration = 4, d
		type sample struct {
			at        time.Duration
			rss, heap uint64
		}
		var (
			mu      sync.Mutex
			samples []sample
		)
		start := time.Now()
		stop := make(chan struct{})
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				s := sample{time.Since(start), selfRSS(), ms.HeapAlloc}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}()
		out, err := run.Run(context.Background(), cfg)
		close(stop)
		if err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		var quarter, end sample
		for _, s := range samples {
			if s.at <= d/4 {
				quarter = s
			}
			if s.at <= d {
				end = s
			}
		}
		mu.Unlock()
		// The check at the end must have run, whatever the history's size.
		if out.Results.Valid != checker.Valid {
			b.Fatalf("verdict %s: %v", out.Results.Valid, out.Results.Problems)
		}
		ops := int(out.Results.Stats["ops"])
		b.ReportMetric(float64(ops), "ops")
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
			b.ReportMetric(float64(ru.Maxrss)/1024, "MB-peak-rss-with-check")
		}
		b.ReportMetric(float64(quarter.rss)/(1<<20), "MB-rss-at-1/4")
		b.ReportMetric(float64(end.rss)/(1<<20), "MB-rss-at-end")
		b.ReportMetric(float64(end.heap)/(1<<20), "MB-heap-at-end")
		// The ops of the last three quarters, about: the workload's rate
		// is steady.
		b.ReportMetric((float64(end.heap)-float64(quarter.heap))/(float64(ops)*3/4), "heap-B/op")
	}
}

// selfRSS returns this process's resident set size in bytes, from
// /proc/self/statm, or 0.
func selfRSS() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, rss uint64
	if _, err := fmt.Sscan(string(b), &size, &rss); err != nil {
		return 0
	}
	return rss * uint64(os.Getpagesize())
}

// BenchmarkFaultLatency runs redlock (5 nodes, each client on a host of
// its own) with each fault kind that applies to it, in a run of its own
// on a short interval, and reports from the nemesis ops of the history
// how long the fault took to go in (inject-ms) and its heal to take
// effect (heal-ms): invoke to completion, the median over the times it
// was injected. A fault the platform cannot apply is skipped, with why.
func BenchmarkFaultLatency(b *testing.B) {
	gate.Need(b, "redis-server")
	if err := netns.Check(); err != nil {
		b.Skip(err)
	}
	for _, fault := range []string{"isolate", "partition", "halves", "majorities-ring", "bridge", "client-isolate", "loss",
		"delay", "pause-node", "kill-node", "pause-client", "kill-client", "clock-bump", "clock-strobe"} {
		b.Run(fault, func(b *testing.B) {
			spec, _ := nemesis.Lookup(fault)
			var inject, heal []float64 // ms
			for range b.N {
				cfg := testkit.Config(b, "redlock")
				cfg.Clients, cfg.Duration = 2, 6*time.Second
				cfg.Faults, cfg.Interval = []string{fault}, 300*time.Millisecond
				cfg.FaultSettings = cfg.FaultSettings.With(nemesis.Window.Is(300*time.Millisecond), nemesis.Down.Is(300*time.Millisecond), nemesis.Pause.Is(300*time.Millisecond))
				if fault == "partition" {
					nemesis.Partition.Set(&cfg.FaultSettings, [][]string{{"n1", "n2", "c0"}, {"n3", "n4", "n5", "c1"}})
				}
				cfg.Expect = "invalid" // redlock under faults may well be; only the timing counts
				out, h := testkit.RunHistory(b, cfg)
				pair := h.Pair()
				for i, o := range h {
					if !o.IsNemesis() || o.Type != history.Invoke || pair[i] < 0 || h[pair[i]].Type != history.OK {
						continue
					}
					d := float64(h[pair[i]].Time-o.Time) / float64(time.Millisecond)
					if o.F == spec.Heal {
						heal = append(heal, d)
					} else {
						inject = append(inject, d)
					}
				}
				if len(inject) == 0 {
					b.Skipf("%s was never applied: %v", fault, out.Results.Problems)
				}
			}
			b.ReportMetric(stats.Percentile(inject, 50), "inject-ms")
			if len(heal) > 0 {
				b.ReportMetric(stats.Percentile(heal, 50), "heal-ms")
			}
		})
	}
}

// BenchmarkScaling runs redis-set-nx-px without faults for 10 s at 1, 4,
// 16 and 64 clients, on 1 lock and on 8, and reports critical sections
// and ops per second of the workload, and, as the machine's own limit,
// the critical sections per second of as many bare loops (bareRateOn,
// 5 s, right before) on as many locks.
func BenchmarkScaling(b *testing.B) {
	gate.Need(b, "redis-server")
	for _, locks := range []int{1, 8} {
		for _, clients := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("locks=%d/clients=%d", locks, clients), func(b *testing.B) {
				var cs, ops, bare float64
				for range b.N {
					cfg := testkit.Config(b, "redis-set-nx-px")
					cfg.Clients, cfg.Locks, cfg.Duration = clients, locks, 10*time.Second
					bare += bareRateOn(b, clients, locks, 5*time.Second, cfg.WorkerBackoff())
					out, err := run.Run(context.Background(), cfg)
					if err != nil {
						b.Fatal(err)
					}
					if out.Results.Valid != checker.Valid {
						b.Fatalf("verdict %s: %v", out.Results.Valid, out.Results.Problems)
					}
					h, err := out.History()
					if err != nil {
						b.Fatal(err)
					}
					span := h.ClientSpan().Seconds()
					cs += out.Results.Stats["critical_sections"] / span
					ops += float64(len(h)) / span
				}
				b.ReportMetric(cs/float64(b.N), "cs/s")
				b.ReportMetric(ops/float64(b.N), "ops/s")
				b.ReportMetric(bare/float64(b.N), "bare-cs/s")
			})
		}
	}
}
