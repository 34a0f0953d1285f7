package scenarios

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testexe"
)

// The test binary doubles as the worker and etcd node programs.
func TestMain(m *testing.M) { testexe.Main(m) }

// TestDebateSmoke runs the violation scenario of claims 1, 2 and 7 of the
// built-in catalogue — the GC pause on Redis, Redlock's clock jump under a
// partition, and etcd's lease under a pause — each over up to three seeds
// until it shows its violation, and asserts that each reproduced.
func TestDebateSmoke(t *testing.T) {
	gate.Need(t, "redis-server")
	if err := netns.Check(); err != nil {
		t.Skipf("claim 2 needs network namespaces: %v", err)
	}
	all := Builtin()
	picked, err := Select(all, []string{"redis-gc-pause", "redlock-clock-jump", "etcd-pause"})
	if err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	base := run.DefaultConfig()
	base.StoreDir = store
	base.WorkerCommand, base.WorkerEnv = testexe.Worker()
	base.NodeCommand, base.NodeEnv = testexe.Node()
	for _, s := range picked {
		t.Run(s.Name, func(t *testing.T) {
			start := time.Now()
			res, err := Run(context.Background(), s, Options{Base: base, Seeds: []int64{1, 2, 3}, UntilReproduced: true})
			if err != nil {
				t.Fatal(err)
			}
			row := Score(s, res, store, DefaultMaxRate)
			for _, r := range res {
				t.Logf("seed %d: %q %s kinds %v first %.1fs", r.Seed, r.Outcome, r.Reason, r.Kinds, r.FirstViolation)
			}
			if row.Verdict != reports.Reproduced {
				t.Fatalf("%s: %s (%s); violations %s", s.Name, row.Verdict, row.Reason, row.RateText())
			}
			if _, err := os.Stat(filepath.Join(store, row.Report)); err != nil {
				t.Errorf("the linked report of a failing run is missing: %v", err)
			}
			if row.FirstViolation <= 0 {
				t.Errorf("first violation at %v s", row.FirstViolation)
			}
			t.Logf("%s reproduced: %s in %v", s.Name, row.RateText(), time.Since(start).Round(time.Second))
		})
	}
}
