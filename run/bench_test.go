package run

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/internal/bareloop"
	"github.com/locktest/locktest/internal/testexe"
	"github.com/locktest/locktest/workloads"
)

// BenchmarkDriverVsBare measures locktest's critical sections per second
// with redis-set-nx-px and no faults against its reference, measured in
// the same benchmark right before: the bare go-redis loop of
// internal/bareloop making the same four round trips, one separate
// process per client, with the same retry policy. The ratio metric is
// locktest's rate over the loop's.
func BenchmarkDriverVsBare(b *testing.B) {
	needRedis(b)
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var bare, drv float64
			for range b.N {
				cfg := testConfig(b, "redis-set-nx-px")
				cfg.Clients, cfg.Duration = clients, time.Minute
				bare += bareRate(b, clients, 3*time.Second, cfg.backoff())
				rate, err := Throughput(context.Background(), cfg, 4000)
				if err != nil {
					b.Fatal(err)
				}
				drv += rate
			}
			b.ReportMetric(drv/float64(b.N), "cs/s")
			b.ReportMetric(bare/float64(b.N), "bare-cs/s")
			b.ReportMetric(drv/bare, "ratio")
		})
	}
}

// bareRate runs the bare loop in clients processes of this test binary
// against a fresh redis-server for d and returns their critical sections
// per second together.
func bareRate(tb testing.TB, clients int, d time.Duration, bo workloads.Backoff) float64 {
	tb.Helper()
	r, err := local.NewRedis(local.RedisOptions{Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	defer r.Stop(ctx)
	var (
		mu       sync.Mutex
		sections int
		longest  time.Duration
		wg       sync.WaitGroup
		errs     []error
	)
	for i := range clients {
		cfg, _ := json.Marshal(bareloop.Config{Addr: r.Nodes()[0].Addr, Lock: "lock-0", TTL: time.Second, Duration: d, Backoff: bo, Seed: uint64(i + 1)})
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
