package matrix

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// safetyRun is a hand-built safety run of class c, seed seed: violated,
// held, or, with na, a run whose faults did not apply.
func safetyRun(c Class, seed int64, violated, na bool) Result {
	r := Result{Job: Job{Impl: "redis-set-nx-px", Probe: ProbeSafety, Class: c, Seed: seed}, Dir: fmt.Sprintf("/s/%s/%d", c, seed)}
	switch {
	case na:
		r.Safety = Safety{NA: true, Reason: "fault clock-bump: fault unavailable: not applicable"}
	case violated:
		r.Safety = Safety{Conclusive: true, Violated: true, Faults: 2, Kinds: map[string]int{checker.KindStaleWrite: 1}}
	default:
		r.Safety = Safety{Conclusive: true, Faults: 2}
	}
	return r
}

func TestDecided(t *testing.T) {
	v := func(seed int64) Result { return safetyRun(ClassClientPause, seed, true, false) }
	h := func(seed int64) Result { return safetyRun(ClassClientPause, seed, false, false) }
	na := func(seed int64) Result { return safetyRun(ClassClock, seed, false, true) }
	failed := Result{Job: Job{Impl: "redis-set-nx-px", Probe: ProbeSafety, Class: ClassClientPause, Seed: 1}, Err: "redis-server: not found"}
	stuck := Result{Job: Job{Impl: "redis-set-nx-px", Probe: ProbeDeadlock, Seed: 1, Config: matrixConfig(500 * time.Millisecond)},
		Dir: "/s/d/1", Recoveries: []Recovery{{Process: 2, Lock: "lock-0", Observed: 5 * time.Second, After: -1}}}
	recovered := Result{Job: Job{Impl: "redis-set-nx-px", Probe: ProbeDeadlock, Seed: 1, Config: matrixConfig(500 * time.Millisecond)},
		Dir: "/s/d/1", Recoveries: []Recovery{{Process: 2, Lock: "lock-0", Observed: 5 * time.Second, After: 600 * time.Millisecond}}}
	for _, tc := range []struct {
		name    string
		p       Probe
		rs      []Result
		decided bool
		why     string
	}{
		{"no run yet", ProbeSafety, nil, false, ""},
		{"1 of 1 violated", ProbeSafety, []Result{v(1)}, true, "1 violation in 1 run put the rate at 21% or more"},
		{"1 of 2", ProbeSafety, []Result{h(1), v(2)}, false, ""},
		{"2 of 2", ProbeSafety, []Result{v(1), v(2)}, true, "2 violations in 2 runs"},
		{"1 of 3", ProbeSafety, []Result{h(1), h(2), v(3)}, false, ""},
		{"2 of 3", ProbeSafety, []Result{h(1), v(2), v(3)}, true, "2 violations in 3 runs"},
		{"2 of 4", ProbeSafety, []Result{h(1), v(2), h(3), v(4)}, true, "2 violations in 4 runs"},
		{"2 of 5", ProbeSafety, []Result{h(1), v(2), h(3), v(4), h(5)}, false, ""},
		{"held 0 of 5", ProbeSafety, []Result{h(1), h(2), h(3), h(4), h(5)}, false, ""},
		{"n/a", ProbeSafety, []Result{na(1)}, true, "n/a, which every seed would repeat: fault clock-bump: fault unavailable: not applicable"},
		{"n/a beside a conclusive run", ProbeSafety, []Result{na(1), h(2)}, false, ""},
		{"a run that did not start", ProbeSafety, []Result{failed}, false, ""},
		{"a stuck lock", ProbeDeadlock, []Result{stuck}, true, "a lock stayed stuck after its holder died"},
		{"a recovery", ProbeDeadlock, []Result{recovered}, false, ""},
		{"perf-1 is not sampled", ProbePerf1, []Result{v(1)}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := Decided(tc.p, tc.rs)
			if ok != tc.decided || !strings.Contains(why, tc.why) {
				t.Errorf("Decided = %v, %q; want %v, containing %q", ok, why, tc.decided, tc.why)
			}
		})
	}
}

// outcome is what a fake run of a cell shows at each seed.
type outcome map[cellKey][]bool // violated, by seed - 1

func plannedJobs(seeds int) []Job {
	var jobs []Job
	jobs = append(jobs, Job{Impl: "a", Probe: ProbePerf1, Class: ClassNone, Seed: 1})
	for s := int64(1); s <= int64(seeds); s++ {
		for _, c := range []Class{ClassNone, ClassClientPause, ClassNodePause, ClassClock} {
			jobs = append(jobs, Job{Impl: "a", Probe: ProbeSafety, Class: c, Seed: s})
		}
	}
	for s := int64(1); s <= int64(seeds); s++ {
		for _, c := range []Class{ClassNone, ClassClientPause, ClassNodePause, ClassClock} {
			jobs = append(jobs, Job{Impl: "b", Probe: ProbeSafety, Class: c, Seed: s})
		}
	}
	return jobs
}

// fakeRunner returns a run function whose runs show what o says, sleep a
// random few milliseconds (so that runs finish in a different order at
// each parallelism) and check Execute's promises as they go: no seed of a
// cell starts before the earlier seeds of the cell finished, and a timed
// run runs alone.
func fakeRunner(t *testing.T, o outcome, seed uint64) (func(context.Context, Job) Result, func() (most int)) {
	var mu sync.Mutex
	finished := map[cellKey]int64{} // the highest seed finished
	running, most, timedRunning := 0, 0, false
	rng := rand.New(rand.NewPCG(seed, seed))
	return func(_ context.Context, j Job) Result {
			mu.Lock()
			if j.Seed > 1 && finished[keyOf(j)] != j.Seed-1 {
				t.Errorf("%s started before seed %d of its cell finished", j.Label(), j.Seed-1)
			}
			running++
			most = max(most, running)
			if timedRunning || j.Timed() && running > 1 {
				t.Errorf("%s ran beside a timed run", j.Label())
			}
			timedRunning = timedRunning || j.Timed()
			d := time.Duration(rng.IntN(4)) * time.Millisecond
			mu.Unlock()
			time.Sleep(d)
			mu.Lock()
			defer mu.Unlock()
			running--
			if j.Timed() {
				timedRunning = false
			}
			finished[keyOf(j)] = j.Seed
			if j.Probe != ProbeSafety {
				return Result{Job: j}
			}
			byseed := o[keyOf(j)]
			violated := len(byseed) >= int(j.Seed) && byseed[j.Seed-1]
			r := safetyRun(j.Class, j.Seed, violated, j.Class == ClassClock && j.Impl == "b")
			r.Job = j
			return r
		}, func() int {
			mu.Lock()
			defer mu.Unlock()
			return most
		}
}

// TestExecuteStopsDecidedCells runs a matrix of fake runs at 1, 3 and 6
// at once: a cell stops at the seed that decides it, the same runs are
// made at every parallelism, and the runs skipped are counted.
func TestExecuteStopsDecidedCells(t *testing.T) {
	key := func(impl string, c Class) cellKey { return cellKey{impl, ProbeSafety, c} }
	o := outcome{
		key("a", ClassClientPause): {true, true, true, true, true}, // decided at seed 1
		key("a", ClassNodePause):   {false, true, true},            // decided at seed 3 (2 of 3)
		key("b", ClassClientPause): {false, false, true, false},    // 1 of 5: never decided
	}
	// b's clock runs are n/a: decided at seed 1. Everything else holds.
	want := map[string]int64{ // the last seed each cell ran
		"a none": 5, "a client-pause": 1, "a node-pause": 3, "a clock": 5,
		"b none": 5, "b client-pause": 5, "b node-pause": 5, "b clock": 1,
	}
	var first []string
	for _, par := range []int{1, 3, 6} {
		t.Run(fmt.Sprintf("%d at once", par), func(t *testing.T) {
			jobs := plannedJobs(5)
			runOne, most := fakeRunner(t, o, uint64(par))
			results, skipped, err := execute(context.Background(), jobs, Fixed(par), runOne, nil)
			if err != nil {
				t.Fatal(err)
			}
			last := map[string]int64{}
			var made []string
			for _, r := range results {
				made = append(made, r.Job.Label())
				if r.Job.Probe == ProbeSafety {
					k := r.Job.Impl + " " + string(r.Job.Class)
					last[k] = max(last[k], r.Job.Seed)
				}
			}
			for k, s := range want {
				if last[k] != s {
					t.Errorf("%s ran up to seed %d, want %d", k, last[k], s)
				}
			}
			if wantSkipped := len(jobs) - len(results); skipped != wantSkipped || skipped != 4+2+4 {
				t.Errorf("skipped %d, want %d (4 + 2 + 4)", skipped, wantSkipped)
			}
			if first == nil {
				first = made
			} else if !slices.Equal(made, first) {
				t.Errorf("runs made at %d at once differ from those at 1:\n%v\n%v", par, made, first)
			}
			if par > 1 && most() < 2 {
				t.Errorf("at most %d ran at once with --parallel %d", most(), par)
			}
			if most() > par {
				t.Errorf("%d ran at once, above --parallel %d", most(), par)
			}
		})
	}
}

// TestExecuteStartsTheSlowestRowsFirst: once the timed runs have run, the
// row whose timed runs took longest starts first, though it comes last in
// the plan, and the results stay in plan order.
func TestExecuteStartsTheSlowestRowsFirst(t *testing.T) {
	var jobs []Job
	for _, impl := range []string{"a", "b"} {
		jobs = append(jobs, Job{Impl: impl, Probe: ProbePerf1, Class: ClassNone, Seed: 1}, Job{Impl: impl, Probe: ProbePerf8, Class: ClassNone, Seed: 1})
	}
	for _, impl := range []string{"a", "b"} {
		for s := int64(1); s <= 2; s++ {
			for _, c := range []Class{ClassNone, ClassClientPause} {
				jobs = append(jobs, Job{Impl: impl, Probe: ProbeSafety, Class: c, Seed: s})
			}
		}
	}
	var mu sync.Mutex
	var started []string
	runOne := func(_ context.Context, j Job) Result {
		mu.Lock()
		started = append(started, j.Label())
		mu.Unlock()
		if j.Timed() && j.Impl == "b" {
			// b's timed runs take longest: 1 s each against a's
			// none, a margin far beyond the longest stall a loaded
			// machine was seen to give a run (about 400 ms).
			time.Sleep(time.Second)
		}
		return Result{Job: j}
	}
	results, _, err := execute(context.Background(), jobs, Fixed(1), runOne, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, i := range []int{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7} {
		want = append(want, jobs[i].Label())
	}
	if !slices.Equal(started, want) {
		t.Errorf("started in the order\n%v\nwant b's untimed jobs before a's:\n%v", started, want)
	}
	for i, r := range results {
		if r.Job.Label() != jobs[i].Label() {
			t.Errorf("result %d is %s, want %s: the results are in plan order", i, r.Job.Label(), jobs[i].Label())
		}
	}
}

// TestAggregateSaysWhereACellStopped: a cell the rule stopped says after
// how many seeds and why, a cell that ran every seed says nothing, and the
// 8-client timings come from the timed run (seed 1) alone.
func TestAggregateSaysWhereACellStopped(t *testing.T) {
	rs := []Result{
		safetyRun(ClassClientPause, 1, true, false),
		safetyRun(ClassNodePause, 1, false, false), safetyRun(ClassNodePause, 2, false, false),
	}
	none1 := safetyRun(ClassNone, 1, false, false)
	none1.P50, none1.P99, none1.Acquired, none1.Throughput = 1, 2, 100, 50
	none2 := safetyRun(ClassNone, 2, false, false)
	none2.P50, none2.P99, none2.Acquired, none2.Throughput = 9, 90, 10, 5 // beside other runs: not a timing
	rs = append(rs, none1, none2)
	m := Aggregate(reports.MatrixHeader{Seeds: 2}, []Class{ClassNone, ClassClientPause, ClassNodePause}, rs)
	cells := m.Rows[0].Cells
	if c := cells[SafetyColumn(ClassClientPause)]; !strings.HasPrefix(c.Stopped, "stopped after 1 of 2 seeds: 1 violation in 1 run") || !strings.Contains(c.Reason, c.Stopped) {
		t.Errorf("client-pause: stopped %q, reason %q", c.Stopped, c.Reason)
	}
	if c := cells[SafetyColumn(ClassNodePause)]; c.Stopped != "" {
		t.Errorf("node-pause ran both seeds, but says %q", c.Stopped)
	}
	if c := cells[ColRate8]; c.Value != "50/s" {
		t.Errorf("8-client rate %q, want 50/s, seed 1's alone", c.Value)
	}
}

// TestMeasuredPace: the measured pace starts at the cores, grows while a
// core's worth stays idle with every allowed run going, shrinks at once
// when a run stalled, and says what it measured.
func TestMeasuredPace(t *testing.T) {
	var cpu, idle time.Duration
	clock := time.Unix(0, 0)
	m := measuredAt(2, func() time.Duration { return cpu }, func() time.Duration { return idle }, func() time.Time { return clock })
	if m.Limit() != 2 {
		t.Fatalf("starts at %d, want the 2 cores", m.Limit())
	}
	run := Result{Job: Job{Probe: ProbeSafety, Class: ClassClientPause, Seed: 2}, Elapsed: 8 * time.Second}
	step := func(d, cpuUsed, idleCores time.Duration, running int, r Result) {
		clock = clock.Add(d)
		cpu += cpuUsed
		idle += time.Duration(float64(d) * float64(idleCores))
		m.Finished(r, running)
	}
	// 6 s with both runs going and a core idle: one more.
	step(6*time.Second, 8*time.Second, 0, 1, run) // marks a saturated span
	step(6*time.Second, 8*time.Second, 1, 1, run) // 1 core idle over it
	if m.Limit() != 3 {
		t.Fatalf("limit %d after a saturated span with a core idle, want 3", m.Limit())
	}
	// A span where fewer ran than allowed says nothing.
	step(6*time.Second, 8*time.Second, 1, 0, run)
	step(6*time.Second, 8*time.Second, 1, 0, run)
	if m.Limit() != 3 {
		t.Fatalf("limit %d after spans below the limit, want 3", m.Limit())
	}
	stalled := run
	stalled.Results.Run.Stalls = &runstore.Stalls{Longest: "300ms"}
	step(time.Second, 8*time.Second, 0, 2, stalled)
	if m.Limit() != 2 {
		t.Fatalf("limit %d after a stall, want 2", m.Limit())
	}
	txt := m.Text()
	if !strings.Contains(txt, "2 to 3 at once, measured on 2 cores: 1.00 cores per run") || !strings.Contains(txt, "1 runs saw the machine stall") {
		t.Errorf("Text = %q", txt)
	}
	for range 20 { // never below 1
		step(time.Second, 0, 0, 0, stalled)
	}
	if m.Limit() != 1 {
		t.Errorf("limit %d after many stalls, want 1", m.Limit())
	}
}

// TestMeasuredPaceGrowsOnPromptRuns: with no CPU idle, a span of runs
// whose timers came on time adds a run, and one late run in a span holds
// the limit.
func TestMeasuredPaceGrowsOnPromptRuns(t *testing.T) {
	var cpu, idle time.Duration
	clock := time.Unix(0, 0)
	m := measuredAt(2, func() time.Duration { return cpu }, func() time.Duration { return idle }, func() time.Time { return clock })
	withP99 := func(p string) Result {
		r := Result{Job: Job{Probe: ProbeSafety, Class: ClassNodePause, Seed: 2, Config: matrixConfig(500 * time.Millisecond)}, Elapsed: 8 * time.Second}
		r.Results.Run.Stalls = &runstore.Stalls{Longest: "0s", P99: p}
		return r
	}
	step := func(r Result) {
		clock = clock.Add(6 * time.Second)
		m.Finished(r, 1)
	}
	step(withP99("10ms"))
	step(withP99("20ms"))
	if m.Limit() != 3 {
		t.Fatalf("limit %d after a saturated span of prompt runs, want 3", m.Limit())
	}
	clock = clock.Add(6 * time.Second)
	m.Finished(withP99("5ms"), 2) // a span at 3 begins, every run going
	clock = clock.Add(3 * time.Second)
	m.Finished(withP99("50ms"), 2) // late: 50 ms of a 500 ms lease
	clock = clock.Add(3 * time.Second)
	m.Finished(withP99("5ms"), 2)
	if m.Limit() != 3 {
		t.Errorf("limit %d after a span with a late run, want 3", m.Limit())
	}
	clock = clock.Add(6 * time.Second)
	m.Finished(withP99("5ms"), 2) // a span of prompt runs alone
	if m.Limit() != 4 {
		t.Errorf("limit %d after a span of prompt runs, want 4", m.Limit())
	}
	timed := withP99("250ms")
	timed.Job = Job{Probe: ProbePerf1, Seed: 1}
	m.Finished(timed, 0)
	if m.Limit() != 4 {
		t.Errorf("a timed run, alone, changed the limit to %d", m.Limit())
	}
	// Crowded: late by over 50 ms of a 500 ms lease at its p99, having
	// run its whole time at 4 at once: one fewer. A run that started
	// before that change, beside more runs than now, takes nothing more.
	clock = clock.Add(9 * time.Second)
	m.Finished(withP99("100ms"), 3)
	if m.Limit() != 3 {
		t.Errorf("limit %d after a crowded run, want 3", m.Limit())
	}
	clock = clock.Add(time.Second)
	m.Finished(withP99("250ms"), 2)
	if m.Limit() != 3 {
		t.Errorf("limit %d after a crowded run that started at 4, want 3 still", m.Limit())
	}
	clock = clock.Add(9 * time.Second)
	m.Finished(withP99("250ms"), 2)
	if m.Limit() != 2 || !strings.Contains(m.Text(), "2 runs were late by over a 10th of their lease") {
		t.Errorf("limit %d after a crowded run at 3, want 2; text %q", m.Limit(), m.Text())
	}
}

func TestCheckMachine(t *testing.T) {
	quiet := func(time.Duration) time.Duration { return 0 }
	busy := func(time.Duration) time.Duration { return 400 * time.Millisecond }
	if err := CheckMachine(500*time.Millisecond, quiet); err != nil {
		t.Errorf("a quiet machine: %v", err)
	}
	err := CheckMachine(500*time.Millisecond, busy)
	if err == nil || !strings.Contains(err.Error(), "waited 400ms for the CPU") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a machine that stalled 400 ms against 500ms leases: %v, want one line saying so", err)
	}
	if err := CheckMachine(2*time.Second, busy); err != nil {
		t.Errorf("400 ms against 2 s leases is no reason to refuse: %v", err)
	}
}

// matrixConfig is a run config with the lease ttl.
func matrixConfig(ttl time.Duration) run.Config {
	c := run.DefaultConfig()
	c.TTL = ttl
	return c
}
