package scenarios

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktest/locktest/reports"
)

// fakeRuns replaces the run of a scenario with outcome(name, seed) for the
// test, and reports the most runs that were ever under way at once.
func fakeRuns(t *testing.T, outcome func(name string, seed int64) string) *atomic.Int32 {
	t.Helper()
	var now, most atomic.Int32
	prev := runScenario
	t.Cleanup(func() { runScenario = prev })
	runScenario = func(ctx context.Context, s Scenario, seed int64, opt Options) (RunResult, error) {
		n := now.Add(1)
		defer now.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		// Long enough for the others to start. A run cancelled before it
		// ends returns the context's error and no result, as a real run
		// does; one that ended returns its result, even if the context was
		// cancelled since (by another run, or by its own outcome).
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return RunResult{}, ctx.Err()
		}
		r := RunResult{Seed: seed, Outcome: outcome(s.Name, seed), FirstViolation: -1, Seconds: 1,
			Dir: fmt.Sprintf("/st/%s/%d", s.Name, seed), Command: fmt.Sprintf("%s --seed %d", s.Name, seed)}
		switch r.Outcome {
		case ExpectViolation:
			r.FirstViolation, r.Kinds = float64(seed), map[string]int{"stale-write": 1}
		case "":
			r.Reason = "not root"
		}
		return r, nil
	}
	return &most
}

func seedsOf(rs []RunResult) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Seed)
	}
	return out
}

func seedList(n int) []int64 {
	var s []int64
	for i := 1; i <= n; i++ {
		s = append(s, int64(i))
	}
	return s
}

var (
	violating = Scenario{Name: "viol", Claim: 1, Expect: ExpectViolation, Predictions: map[string]string{"kleppmann": "violation"}, Settings: map[string]string{"impl": "redlock"}}
	holding   = Scenario{Name: "safe", Claim: 2, Expect: ExpectSafe, Predictions: map[string]string{"antirez": "safe"}, Settings: map[string]string{"impl": "etcd-mutex"}}
)

// every3rd violates on seeds 3, 6, 9, ... of the violation scenario.
func every3rd(name string, seed int64) string {
	if name == violating.Name && seed%3 == 0 {
		return ExpectViolation
	}
	return ExpectSafe
}

func TestRunAllRunsEverySeedInParallel(t *testing.T) {
	most := fakeRuns(t, every3rd)
	var calls int
	left := -1
	res, err := RunAll(context.Background(), []Scenario{violating, holding}, Options{Seeds: seedList(6), Parallel: 3,
		Progress: func(s Scenario, r RunResult, l int) {
			calls++
			if left >= 0 && l > left {
				t.Errorf("runs left grew from %d to %d", left, l)
			}
			left = l
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]int64{seedList(6), seedList(6)} {
		if got := seedsOf(res[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("scenario %d ran seeds %v, want %v in order", i, got, want)
		}
	}
	if calls != 12 || left != 0 {
		t.Errorf("progress called %d times, last with %d left; want 12 and 0", calls, left)
	}
	if m := most.Load(); m != 3 {
		t.Errorf("at most %d runs at once, want 3 (--parallel 3)", m)
	}
}

func TestRunAllSequentialByDefault(t *testing.T) {
	most := fakeRuns(t, every3rd)
	if _, err := RunAll(context.Background(), []Scenario{violating, holding}, Options{Seeds: seedList(3)}); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d runs at once without Parallel", m)
	}
}

func TestRunAllStops(t *testing.T) {
	fakeRuns(t, every3rd)
	// Until reproduced: the violation scenario stops at seed 3; the safe
	// one runs every seed.
	res, err := RunAll(context.Background(), []Scenario{violating, holding}, Options{Seeds: seedList(10), UntilReproduced: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := seedsOf(res[0]); !reflect.DeepEqual(got, seedList(3)) {
		t.Errorf("until reproduced ran %v", got)
	}
	if len(res[1]) != 10 {
		t.Errorf("the safe scenario ran %d seeds, want 10", len(res[1]))
	}
	// Until the interval is narrower than 0.5: 0 violations in n runs
	// gives a two-sided 95% interval of width 3.84/(n+3.84), below 0.5
	// from n = 4.
	res, err = RunAll(context.Background(), []Scenario{holding}, Options{Seeds: seedList(40), CIWidth: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0]) != 4 {
		t.Errorf("--until-ci-width 0.5 ran %d seeds, want 4", len(res[0]))
	}
}

func TestRunAllShardsSplitTheRuns(t *testing.T) {
	fakeRuns(t, every3rd)
	scs := []Scenario{violating, holding}
	all, err := RunAll(context.Background(), scs, Options{Seeds: seedList(5)})
	if err != nil {
		t.Fatal(err)
	}
	var boards []reports.Scoreboard
	seen := map[string]int{}
	for shard := 1; shard <= 3; shard++ {
		part, err := RunAll(context.Background(), scs, Options{Seeds: seedList(5), Shard: shard, Shards: 3, Parallel: 2})
		if err != nil {
			t.Fatal(err)
		}
		b := reports.Scoreboard{SchemaVersion: reports.ScoreboardSchemaVersion, Seeds: 5, Shard: fmt.Sprintf("%d/3", shard)}
		for i, s := range scs {
			for _, r := range part[i] {
				seen[fmt.Sprint(s.Name, r.Seed)]++
			}
			if len(part[i]) > 0 {
				b.Rows = append(b.Rows, Score(s, part[i], "/out", DefaultMaxRate))
			}
		}
		boards = append(boards, b)
	}
	if len(seen) != 10 {
		t.Errorf("the shards made %d distinct runs, want 10", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("run %s made by %d shards", k, n)
		}
	}
	merged, err := Merge(boards, "/out", DefaultMaxRate)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range scs {
		want := Score(s, all[i], "/out", DefaultMaxRate)
		if !reflect.DeepEqual(merged.Rows[i], want) {
			t.Errorf("merged row %s:\n%+v\nwant the unsharded\n%+v", s.Name, merged.Rows[i], want)
		}
	}
	// A shard given twice, a missing shard, or shards of other seeds are
	// refused; so is a seed in two boards that are not shards.
	other := boards[2]
	other.Seeds = 6
	unsharded := boards[0]
	unsharded.Shard = ""
	for name, bs := range map[string][]reports.Scoreboard{
		"twice":        {boards[0], boards[0], boards[1], boards[2]},
		"missing":      {boards[0], boards[2]},
		"other seeds":  {boards[0], boards[1], other},
		"same seed":    {unsharded, unsharded},
		"other counts": {boards[0], boards[1], {Shard: "3/4", Seeds: 5}},
	} {
		if _, err := Merge(bs, "/out", DefaultMaxRate); err == nil {
			t.Errorf("%s: merged without an error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestRunAllStopsOnCancel(t *testing.T) {
	var mu sync.Mutex
	ran := 0
	ctx, cancel := context.WithCancel(context.Background())
	fakeRuns(t, func(string, int64) string {
		mu.Lock()
		defer mu.Unlock()
		if ran++; ran == 2 {
			cancel()
		}
		return ExpectSafe
	})
	res, err := RunAll(ctx, []Scenario{holding}, Options{Seeds: seedList(50), Parallel: 2})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if n := len(res[0]); n == 0 || n > 4 {
		t.Errorf("%d runs made after a cancel at the second; want the few under way", n)
	}
}
