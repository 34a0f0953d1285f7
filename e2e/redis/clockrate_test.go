package redis_test

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls/golib"
	redisimpl "github.com/locktest/locktest/impls/redis"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/workloads"
)

// TestClockRateClientSlowsOneWorkersClock runs worker p0's Go runtime
// clock at a quarter of the real rate for a window (clock-rate-client,
// pinned to p0). Each critical section waits --work between its read and
// its write, measured by the worker's own clock (a sleep): while p0's
// clock is slow, its sections last about four times as long in real time
// (the history's clock, which no fault moves), and p1's, at the real
// rate, do not; before and after the window, p0's are as p1's. The run
// builds its workers over the patched runtime (clusters/clockrate) once,
// and caches them: locktest's worker program with the impls of the run's
// package alone (impls/redis), whose build info names no library of
// another impl family.
func TestClockRateClientSlowsOneWorkersClock(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := testkit.Config(t, "redis-set-nx-px")
	cfg.Mode, cfg.Clients, cfg.Duration, cfg.Interval = workloads.ModeFenced, 2, 8*time.Second, 500*time.Millisecond
	cfg.Work, cfg.WorkMin = 40*time.Millisecond, 40*time.Millisecond
	cfg.Faults, cfg.Targets = []string{"clock-rate-client"}, map[string][]string{"clock-rate-client": {"p0"}}
	cfg.FaultSettings = cfg.FaultSettings.With(nemesis.Window.Is(4*time.Second), nemesis.ClockRate.Is(0.25))
	out, h := testkit.MustRun(t, cfg)
	if out.Results.Valid != checker.Valid {
		t.Fatalf("verdict %s: %v", out.Results.Valid, out.Results.Problems)
	}
	driver, err := os.ReadFile(filepath.Join(out.Dir, "logs", "driver.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg="workers with a clock that can run at a rate" program=(\S+)`).FindSubmatch(driver)
	if m == nil {
		t.Fatalf("the driver's log names no worker built with a clock that can run at a rate")
	}
	info, err := buildinfo.ReadFile(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != golib.Locktest+"/cmd/locktest-worker" {
		t.Errorf("the workers are %s, want locktest's worker program", info.Path)
	}
	mods := map[string]bool{}
	for _, d := range info.Deps {
		mods[d.Path] = true
	}
	if !mods[redisimpl.GoRedisModule] {
		t.Errorf("the workers' build info does not name %s, the impl's library", redisimpl.GoRedisModule)
	}
	for _, other := range []string{"k8s.io/client-go", "github.com/go-redsync/redsync/v4", "github.com/redis/rueidis"} {
		if mods[other] {
			t.Errorf("the workers hold %s, a library of another impl family: they were built with every impl", other)
		}
	}
	var from, to int64
	for _, o := range h {
		switch {
		case o.F == "clock-rate-client" && o.Type == history.OK && from == 0:
			if !slices.Equal(o.Value.Targets, []string{"p0×0.25"}) {
				t.Fatalf("the fault hit %v, want p0×0.25", o.Value.Targets)
			}
			from = o.Time
		case o.F == "clock-unrate-client" && o.Type == history.Invoke && from > 0 && to == 0:
			to = o.Time
		}
	}
	if from == 0 || to == 0 {
		t.Fatalf("no injection and heal of clock-rate-client in the history (%s)", strings.Join(testkit.NemesisSeq(h), " "))
	}
	in, outside := sections(h, from, to)
	t.Logf("median critical section: p0 %v in the window, %v outside; p1 %v in the window", in[0], outside[0], in[1])
	// 40 ms by a clock at a quarter of the rate is 160 ms of real time.
	if in[0] < 140*time.Millisecond {
		t.Errorf("p0's sections in the window took %v (median), want about 160 ms: its clock did not run slow", in[0])
	}
	for name, d := range map[string]time.Duration{"p1's in the window": in[1], "p0's outside it": outside[0]} {
		if d > 110*time.Millisecond {
			t.Errorf("%s took %v (median), want about 40 ms: only p0's clock runs slow, and only in the window", name, d)
		}
	}
}

// sections returns, per process (0 and 1), the median real time from a
// critical section's read to its write among the sections wholly inside
// [from, to] and those wholly outside it.
func sections(h history.History, from, to int64) (in, outside [2]time.Duration) {
	var ins, outs [2][]time.Duration
	read := map[int]int64{}
	for _, o := range h {
		if o.Process < 0 || o.Process > 1 {
			continue
		}
		switch {
		case o.F == history.Read && o.Type == history.OK:
			read[o.Process] = o.Time
		case o.F == history.Write && o.Type == history.Invoke && read[o.Process] > 0:
			r, w := read[o.Process], o.Time
			d := time.Duration(w - r)
			if r >= from && w <= to {
				ins[o.Process] = append(ins[o.Process], d)
			} else if w < from || r > to {
				outs[o.Process] = append(outs[o.Process], d)
			}
			read[o.Process] = 0
		}
	}
	for p := range 2 {
		in[p], outside[p] = median(ins[p]), median(outs[p])
	}
	return in, outside
}

// median is the middle of ds, 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
