package matrix

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testexe"
)

// BenchmarkMatrix makes a real matrix, as `locktest matrix` does with a
// measured pace, and reports what it cost: its wall time (ns/op), the runs
// it made, the runs its decided cells left out, the most runs at once, the
// CPU per run the pace measured, and the cluster starts it made and
// avoided (runs that took a kept cluster). LOCKTEST_BENCH_IMPLS (default
// redis-set-nx-px,etcd-lease-txn) and LOCKTEST_BENCH_SEEDS (default 1)
// choose the matrix; LOCKTEST_BENCH_PARALLEL fixes the runs at once
// instead. docs/performance.md has the figures.
//
//	go test ./matrix -run '^$' -bench Matrix -benchtime 1x
//	LOCKTEST_BENCH_SEEDS=5 go test ./matrix -run '^$' -bench Matrix -benchtime 1x -timeout 60m
func BenchmarkMatrix(b *testing.B) {
	gate.Need(b, "redis-server")
	o := DefaultOptions()
	o.Impls = strings.Split(envOr("LOCKTEST_BENCH_IMPLS", "redis-set-nx-px,etcd-lease-txn"), ",")
	o.Seeds, _ = strconv.Atoi(envOr("LOCKTEST_BENCH_SEEDS", "1"))
	o.Base = run.DefaultConfig()
	o.Base.WorkerCommand, o.Base.WorkerEnv = testexe.Worker()
	jobs, err := Plan(o)
	if err != nil {
		b.Fatal(err)
	}
	var made Made
	var pace Pace
	for b.Loop() {
		o.Base.StoreDir = b.TempDir()
		pace = Measured(0, nil, nil)
		if n, err := strconv.Atoi(os.Getenv("LOCKTEST_BENCH_PARALLEL")); err == nil {
			pace = Fixed(n)
		}
		if made, err = Run(context.Background(), o, jobs, pace, "", "go test -bench Matrix", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(made.Ran), "runs")
	b.ReportMetric(float64(made.Matrix.Header.Skipped), "runs-left-out")
	b.ReportMetric(float64(pace.Most()), "most-at-once")
	b.ReportMetric(float64(made.Matrix.Header.ClustersStarted), "cluster-starts")
	b.ReportMetric(float64(made.Matrix.Header.ClustersReused), "cluster-starts-avoided")
	if m, ok := pace.(*measured); ok {
		b.ReportMetric(m.CoresPerRun(), "cores/run")
	}
	b.ReportMetric(made.Matrix.Header.Elapsed.Round(time.Second).Seconds(), "s/matrix")
	b.Logf("%d runs, %s; %s", made.Ran, made.Matrix.Header.Elapsed, pace.Text())
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
