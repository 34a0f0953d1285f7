package matrix

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
	"github.com/locktest/locktest/testkit/testexe"
)

// The test binary doubles as the worker program, as in run's tests.
func TestMain(m *testing.M) { testexe.Main(m) }

// TestTinyMatrix runs a real matrix of one impl against a real
// redis-server: the fault classes none and client-pause, one seed, 11 s
// runs, and checks every cell of the row. The leases last 2 s, not the
// default 500 ms (10 s in the fault-free run): with the CI's other
// packages and stress-ng on both cores, a holder of a 500 ms lease, and
// later one of a 2 s lease, was descheduled past it in the fault-free run,
// a real violation that the row's "held" must not depend on. The client-pause run's pause of 4 leases (8 s) still fits in its
// fault phase: the first fault comes within the 1 s interval, and the
// phase ends 1 s before the run.
func TestTinyMatrix(t *testing.T) {
	gate.Need(t, "redis-server")
	o := DefaultOptions()
	o.Impls, o.Classes, o.Seeds, o.Duration = []string{"redis-set-nx-px"}, []Class{ClassNone, ClassClientPause}, 1, 11*time.Second
	o.TTL = 2 * time.Second
	o.Base = run.DefaultConfig()
	o.Base.StoreDir = t.TempDir()
	o.Base.WorkerCommand, o.Base.WorkerEnv = testexe.Worker()
	jobs, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	// The fault-free run's leases last 10 s: in CI run 29 (stress-ng and
	// the other packages on both cores, load 10) a holder of a 2 s lease
	// was descheduled past it with no fault at all, a real violation that
	// the row's "held" must not depend on.
	for i, j := range jobs {
		if j.Probe == ProbeSafety && j.Class == ClassNone {
			jobs[i].Config.TTL = 10 * time.Second
		}
	}
	ctx := context.Background()
	var finished int
	// Two at a time: the timing runs (perf-1, perf-8) still run alone.
	results, _, err := Execute(ctx, jobs, Fixed(2), func(i int, r Result) {
		finished = i
		t.Logf("[%d/%d] %s: %s", i, len(jobs), r.Job.Label(), r.Safety.Reason)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 7 || finished != 7 {
		t.Fatalf("%d results, %d progress calls, want 7 (perf-1, perf-8, none, client-pause, client-pause-fenced, deadlock, reentrancy)", len(results), finished)
	}
	for _, r := range results {
		if r.Err != "" {
			t.Fatalf("%s did not run: %s", r.Job.Label(), r.Err)
		}
	}
	// The pause's violation needs a client to be stopped while it holds
	// the lock; like run's tests, give it up to three seeds. So does the
	// fenced run's broken lock, which its store must then save the
	// resource from.
	retry := func(class Class, done func(Result) bool) {
		for seed := int64(2); seed <= 3; seed++ {
			i := slices.IndexFunc(results, func(r Result) bool { return r.Job.Class == class })
			if done(results[i]) {
				break
			}
			t.Logf("seed %d of %s was not what the test needs (%s); trying seed %d", results[i].Job.Seed, class, results[i].Safety.Reason, seed)
			j := results[i].Job
			j.Seed, j.Config.Seed = seed, seed
			again, _, err := Execute(ctx, []Job{j}, Fixed(1), nil)
			if err != nil {
				t.Fatal(err)
			}
			results[i] = again[0]
		}
	}
	retry(ClassClientPauseFenced, func(r Result) bool { return r.Safety.Conclusive })
	for seed := int64(2); seed <= 3; seed++ {
		i := slices.IndexFunc(results, func(r Result) bool { return r.Job.Class == ClassClientPause })
		if results[i].Safety.Violated {
			break
		}
		t.Logf("seed %d showed no violation under client-pause (%s); trying seed %d", results[i].Job.Seed, results[i].Safety.Reason, seed)
		j := results[i].Job
		j.Seed, j.Config.Seed = seed, seed
		again, _, err := Execute(ctx, []Job{j}, Fixed(1), nil)
		if err != nil {
			t.Fatal(err)
		}
		results[i] = again[0]
	}

	m := Aggregate(reports.MatrixHeader{Date: time.Now(), Seeds: 1, Duration: o.Duration}, o.ColumnClasses(), results)
	if len(m.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(m.Rows))
	}
	// Its matrix.json is what docs/schemas says, and compared with itself
	// nothing got worse.
	jsonDir := t.TempDir()
	if err := reports.WriteMatrix(jsonDir, m); err != nil {
		t.Fatal(err)
	}
	if err := schemacheck.ValidateFile("matrix", filepath.Join(jsonDir, reports.MatrixHeaderFile)); err != nil {
		t.Error(err)
	}
	if back, err := reports.ReadMatrix(jsonDir); err != nil || len(back.Rows) != 1 {
		t.Errorf("matrix.json read back: %v, %d rows", err, len(back.Rows))
	} else if c := Compare(back, m); len(c.Worse)+len(c.Lost) > 0 || c.Compared < 10 {
		t.Errorf("the matrix against its own matrix.json: %+v", c)
	}
	cells := m.Rows[0].Cells
	ms := regexp.MustCompile(`^[0-9.]+ / [0-9.]+ ms$`)
	rate := regexp.MustCompile(`^[1-9][0-9]*/s$`)
	tests := []struct {
		col    string
		status string
		value  *regexp.Regexp
		reason string
	}{
		{SafetyColumn(ClassNone), reports.StatusHeld, regexp.MustCompile(`^0/1 runs$`), "no violation in 1 run(s)"},
		{SafetyColumn(ClassClientPause), reports.StatusViolated, regexp.MustCompile(`^1/1 runs$`), "violation rate 1/1 runs"},
		{ColLatency1, reports.StatusMeasured, ms, "p50 and p99 of"},
		{ColLatency8, reports.StatusMeasured, ms, "p50 and p99 of"},
		{ColRate1, reports.StatusMeasured, rate, ""},
		{ColRate8, reports.StatusMeasured, rate, ""},
		{ColDeadlock, reports.StatusRecovers, regexp.MustCompile(`^max [0-9.]+ ms$`), "after "},
		{ColNodeLoss, reports.StatusNA, regexp.MustCompile(`^$`), "a one-node backend"},
		// The same pause with a fenced store: the lock broke (the paused
		// holder wrote after a newer holder was granted it), and the store
		// rejected its write.
		{ColFenced, reports.StatusHeld, regexp.MustCompile(`^saved: 0/1 runs lost an update \(the lock broke in 1/1\)$`), "saved by fencing: the lock broke"},
		{ColFencing, reports.StatusYes, regexp.MustCompile(`^yes: Redis INCR`), ""},
		{ColReentrant, reports.StatusNo, regexp.MustCompile(`^no$`), "measured: the holder's second acquire of the lock did not get it"},
		{ColBlocking, reports.StatusNo, regexp.MustCompile(`^no$`), "fails at once"},
	}
	for _, tt := range tests {
		c, ok := cells[tt.col]
		if !ok {
			t.Errorf("no %s cell", tt.col)
			continue
		}
		if c.Status != tt.status || !tt.value.MatchString(c.Value) || !strings.HasPrefix(c.Reason, tt.reason) {
			t.Errorf("%s: %s %q %q, want %s %v %q…", tt.col, c.Status, c.Value, c.Reason, tt.status, tt.value, tt.reason)
		}
		for _, l := range c.Links {
			if _, err := os.Stat(l.Report); err != nil {
				t.Errorf("%s links to %s: %v", tt.col, l.Report, err)
			}
		}
	}
	pause := results[slices.IndexFunc(results, func(r Result) bool { return r.Job.Class == ClassClientPause })]
	if pause.Safety.Faults < 1 || pause.Results.Run.Mode != "none" {
		t.Errorf("the pause run applied %d faults in resource mode %q", pause.Safety.Faults, pause.Results.Run.Mode)
	}
	fenced := results[slices.IndexFunc(results, func(r Result) bool { return r.Job.Class == ClassClientPauseFenced })]
	if fenced.Safety.Faults < 1 || fenced.Results.Run.Mode != "fenced" || fenced.Fenced == nil || fenced.Fenced.Rejected < 1 {
		t.Errorf("the fenced pause run applied %d faults in resource mode %q, rejected %+v", fenced.Safety.Faults, fenced.Results.Run.Mode, fenced.Fenced)
	}
	perf := results[0]
	if perf.Job.Probe != ProbePerf1 || perf.Results.Run.Clients != 1 || !(perf.P50 > 0 && perf.P50 <= perf.P99) {
		t.Errorf("perf-1 run: %s, %d clients, p50 %v p99 %v", perf.Job.Label(), perf.Results.Run.Clients, perf.P50, perf.P99)
	}

	out := filepath.Join(o.Base.StoreDir, "pages")
	if err := reports.WriteMatrix(out, m); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, reports.MatrixMDFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| `redis-set-nx-px` | held: 0/1 runs | violated: 1/1 runs | saved: 0/1 runs lost an update (the lock broke in 1/1) |") {
		t.Errorf("matrix.md does not show the row:\n%s", md)
	}
}
