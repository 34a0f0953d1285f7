package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/shrink"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// failingRun stores goodHistory's overlap, checked, with a schedule.json
// of one pause when withSchedule, and returns its folder.
func failingRun(t *testing.T, withSchedule bool) string {
	t.Helper()
	dir := writeRun(t, goodHistory)
	if _, stderr, code := locktest(t, "check", dir); code != 1 {
		t.Fatalf("check: exit %d %s", code, stderr)
	}
	if withSchedule {
		p := nemesis.Plan{SchemaVersion: nemesis.PlanSchemaVersion, Seed: 1, Workload: map[string]string{"impl": "redis-set-nx-px", "time": "2s", "clients": "2", "locks": "1", "ttl": "1ms"},
			Faults: []nemesis.PlannedFault{{At: 10, Fault: "pause-client", Settings: map[string]string{"pause": "1s"}, Lasts: time.Second}}}
		if err := runstore.WriteJSON(filepath.Join(dir, runstore.ScheduleFile), p); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestShrinkRefusesWhatItCannotShrink: a run that did not fail, one with
// no schedule.json, and an anomaly the run lacks are each one line and
// exit 2, and leave nothing in the store.
func TestShrinkRefusesWhatItCannotShrink(t *testing.T) {
	valid := writeRun(t, strings.Join(strings.SplitAfter(goodHistory, "\n")[:2], ""))
	if _, stderr, code := locktest(t, "check", valid); code != 0 {
		t.Fatalf("check: exit %d %s", code, stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no such run", []string{"shrink", "NODIR"}, "shrink NODIR: open NODIR/results.json: no such file or directory"},
		{"a valid run", []string{"shrink", valid}, "the run did not fail (verdict valid): nothing to shrink"},
		{"no schedule", []string{"shrink", failingRun(t, false)}, "no schedule.json (the run was stored before locktest wrote schedules): nothing to replay"},
		{"an anomaly it lacks", []string{"shrink", failingRun(t, true), "--anomaly", "stale-write"}, "--anomaly stale-write: the run has none (it has: mutual-exclusion:overlapping-holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := t.TempDir()
			args := append(tc.args, "--store", store)
			stdout, stderr, code := locktest(t, args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line with %q", code, stderr, tc.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
			if ents, _ := os.ReadDir(store); len(ents) != 0 {
				t.Errorf("the store holds %d entries, want none", len(ents))
			}
		})
	}
}

// gcStory is a schedule of three faults against a single Redis lock of
// four clients, of which one breaks it: the first worker to get to its
// write paused there for 6s, three TTLs, while the others take the lock
// (they would have to be kept off the CPU for 4s to miss it). The TTL is
// 2s: with 300ms, and then with 1s, stress-ng's scheduler alone made
// stale writes in fault-free runs (a holder kept off the CPU past its
// lease), and a search of one replay a candidate took them for the story.
// Pinned to one worker, the pause could wait seconds for it under the
// exponential backoff, and a loaded machine made it miss the run. The
// noop and the 50ms pause change nothing. The run lasts 11s, its faults'
// window 10s: with 6s, a suite run under stress-ng put the pause in
// seconds late, its window's end cut the stored run's pause short, and no
// replay of that schedule broke the lock again.
const gcStory = `{
  "schema_version": 1,
  "seed": 1,
  "workload": {"impl": "redis-set-nx-px", "clients": "4", "locks": "1", "ttl": "2s", "time": "11s", "quiet-time": "1s",
    "resource": "none", "work": "5ms", "net": "loopback"},
  "faults": [
    {"at": "200ms", "fault": "noop", "settings": {"window": "300ms"}, "lasts": "300ms"},
    {"at": "700ms", "fault": "pause-client", "settings": {"pause": "6s", "pause-point": "before-write"}, "lasts": "6s"},
    {"at": "7400ms", "fault": "pause-client", "settings": {"pause": "50ms", "pause-point": "before-write"}, "pins": ["p1"], "lasts": "50ms"}
  ]
}
`

// storyArgs writes gcStory into store and returns the command line that
// runs it there under name.
func storyArgs(t *testing.T, store, name string) []string {
	t.Helper()
	story := filepath.Join(store, "story.json")
	if err := os.WriteFile(story, []byte(gcStory), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"run", "--schedule", story, "--store", store, "--name", name}
}

// runStory stores a run of gcStory named name in store, with args added
// to its command line, and returns its folder and results; the command
// must exit 0 (as expected).
func runStory(t *testing.T, store, name string, args ...string) (string, runstore.Results) {
	t.Helper()
	args = append(storyArgs(t, store, name), args...)
	if out, stderr, code := locktest(t, args...); code != 0 {
		t.Fatalf("locktest %s: exit %d %s\n%s", strings.Join(args, " "), code, stderr, out)
	}
	return storedRun(t, store, name)
}

// failingStory stores a run of gcStory named "gc" that told the story:
// its long pause went in whole, and the run failed as it should
// (--expect invalid). It returns its store and folder. The long pause
// breaks the lock nearly every time; under stress-ng a run once did not
// (it applied two of its faults, and was valid), and another froze until
// the pause no longer fitted and broke the lock without it, so up to
// three runs are tried, each in a store of its own, and each logs its
// faults: when each went in, how long it lasted and whom it hit. A
// failing test keeps its stores.
func failingStory(t *testing.T) (store, dir string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		store = t.TempDir()
		testkit.KeepFailedStore(t, store)
		args := append(storyArgs(t, store, "gc"), "--expect", "invalid")
		out, stderr, code := locktest(t, args...)
		dirs, _ := filepath.Glob(filepath.Join(store, "gc", "2*"))
		paused := false // the long pause went in, whole
		if len(dirs) == 1 {
			if p, err := run.ReadSchedule(filepath.Join(dirs[0], runstore.ScheduleFile)); err == nil {
				for _, f := range p.Faults {
					t.Logf("run %d: %s at %v lasting %v, hit %v", attempt, f.Fault, f.At, f.Lasts, f.Hit)
					paused = paused || f.Fault == "pause-client" && f.Lasts >= 6*time.Second
				}
			}
		}
		if code == 0 && len(dirs) == 1 && paused {
			return store, dirs[0]
		}
		if attempt == 3 || code != 0 && code != 1 {
			t.Fatalf("locktest %s: exit %d, the long pause applied: %v; %s\n%s", strings.Join(args, " "), code, paused, stderr, out)
		}
		// Under stress-ng a run once froze for 3.5s: its noop took that
		// long to go in, the long pause would then have outlasted the
		// fault phase and was left out, and a holder kept off the CPU
		// past its lease broke the lock without it: a failing run, but
		// not the story's.
		t.Logf("run %d did not tell the story (exit %d, the long pause applied: %v): %s", attempt, code, paused, stderr)
	}
}

// TestShrinkFindsThePause shrinks a failing run of gcStory against a real
// Redis: the search drops the faults that do not matter and keeps the
// long pause, the replay of its result fails the same way, and the report of
// that replay says what it was shrunk from.
func TestShrinkFindsThePause(t *testing.T) {
	gate.Need(t, "redis-server")
	t.Parallel() // its runs are its own: a store, a Redis and workers of its own
	store, dir := failingStory(t)
	// One replay a candidate keeps the test short; the 2-of-3 rule is the
	// shrink package's to test. The pause fails nearly every time, so a
	// replay that does not leaves the result one fault larger at most. The
	// budget lets ddmin's four replays in, one at a time, on a loaded
	// machine; spent sooner, the first replay's cut leaves two faults
	// already (the 50ms pause came after the violation).
	out, stderr, code := locktest(t, "shrink", dir, "--store", store, "--replays", "1", "--need", "1", "--confirm", "1", "--budget", "45s")
	t.Logf("%s", out)
	if code != 0 {
		t.Fatalf("shrink: exit %d %s", code, stderr)
	}
	searches, _ := filepath.Glob(filepath.Join(store, "gc.shrink", "2*"))
	if len(searches) != 1 {
		t.Fatalf("search folders %v, want one", searches)
	}
	plan, err := run.ReadSchedule(filepath.Join(searches[0], shrink.ScheduleFile))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	long := false
	for _, f := range plan.Faults {
		kept = append(kept, f.Fault+"@"+f.At.String())
		// The long pause went in at 700ms, or later on a loaded machine.
		long = long || f.Fault == "pause-client" && f.At >= 700*time.Millisecond && f.At < 9*time.Second
	}
	if len(plan.Faults) > 2 || !long {
		t.Errorf("smallest schedule keeps %v, want the long pause (at 700ms) and at most one other", kept)
	}
	var log shrink.Log
	if err := runstore.ReadJSON(filepath.Join(searches[0], shrink.LogFile), &log); err != nil {
		t.Fatal(err)
	}
	if err := schemacheck.ValidateFile("shrink", filepath.Join(searches[0], shrink.LogFile)); err != nil {
		t.Error(err)
	}
	if len(log.Steps) == 0 || log.Smallest == "" || len(log.Confirmations) != 1 || !log.Confirmations[0].Failed {
		t.Errorf("shrink.json: %d steps, smallest %q, confirmations %+v", len(log.Steps), log.Smallest, log.Confirmations)
	}
	for _, st := range log.Steps {
		for _, tr := range st.Trials {
			if _, err := os.Stat(filepath.Join(tr.Run, runstore.HistoryFile)); err != nil {
				t.Errorf("%s: its replay is not kept: %v", st.ID, err)
			}
		}
	}
	confirmed, res := storedRun(t, store, "gc-shrunk")
	if s := res.Run.Shrunk; s == nil || s.From != dir || s.After.Faults != len(plan.Faults) || s.Reproduced != 1 || s.Story == "" {
		t.Errorf("the confirmation run's results say %+v", res.Run.Shrunk)
	}
	// A replay that failed the same way watched for that violation while
	// it ran (it stops a grace after it, unless its time, cut to end soon
	// after the violation, ran out first).
	if !strings.Contains(res.Run.StoppedEarly, "stale-write") {
		t.Errorf("the confirmation run: stopped_early %q, want its stale write confirmed while it ran", res.Run.StoppedEarly)
	}
	if err := schemacheck.ValidateFile("results", filepath.Join(confirmed, runstore.ResultsFile)); err != nil {
		t.Error(err)
	}
	report, err := os.ReadFile(filepath.Join(confirmed, runstore.ReportFile))
	if err != nil || !strings.Contains(string(report), "shrunk from "+dir) {
		t.Errorf("the report does not say what it was shrunk from (%v)", err)
	}
	for _, want := range []string{"smallest: ", "confirmed: failed the same way in 1 of 1 replays", "paused for ", "replay: locktest run --schedule " + searches[0]} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestShrinkInterrupted: Ctrl-C in the middle of a search stops the
// replay under way (nothing it started outlives it), keeps the search so
// far in shrink.json, and exits 3.
func TestShrinkInterrupted(t *testing.T) {
	gate.Need(t, "redis-server")
	t.Parallel()
	store, dir := failingStory(t)
	cmd, out := startLocktest(t, "shrink", dir, "--store", store)
	// Wait for a replay's node and workers.
	var kids []int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if kids = children(cmd.Process.Pid); len(kids) >= 3 {
			break
		}
	}
	if len(kids) < 3 {
		cmd.Process.Kill()
		t.Fatalf("no replay started: %d children; %s", len(kids), out.String())
	}
	stopLocktest(t, cmd, out, syscall.SIGINT)
	if code := cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(out.String(), "shrink interrupted") {
		t.Errorf("exit %d, want 3 saying it was interrupted: %s", code, out.String())
	}
	for _, k := range kids {
		if alive(k) {
			t.Errorf("process %d outlived the search", k)
		}
	}
	searches, _ := filepath.Glob(filepath.Join(store, "gc.shrink", "2*", shrink.LogFile))
	if len(searches) != 1 {
		t.Fatalf("shrink.json files %v, want one", searches)
	}
	var log shrink.Log
	if err := runstore.ReadJSON(searches[0], &log); err != nil || !log.Interrupted {
		t.Errorf("shrink.json: interrupted %v (%v)", log.Interrupted, err)
	}
}

// TestShrinkGateFailsWhenTheBugNoLongerReproduces stands for a fix: the
// stored failing run's schedule is made harmless (its pauses cut to 10 ms,
// far inside the 2 s lease), so that no replay can fail the same way.
// With no budget for candidates, shrink replays the run's own schedule to
// confirm it, and must exit 1 saying the bug no longer reproduces, with
// shrink.json written where --json says.
func TestShrinkGateFailsWhenTheBugNoLongerReproduces(t *testing.T) {
	gate.Need(t, "redis-server")
	t.Parallel()
	store, dir := failingStory(t)
	path := filepath.Join(dir, runstore.ScheduleFile)
	plan, err := run.ReadSchedule(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range plan.Faults {
		if f.Fault == "pause-client" {
			plan.Faults[i].Settings["pause"], plan.Faults[i].Lasts = "10ms", 10*time.Millisecond
		}
	}
	if err := runstore.WriteJSON(path, plan); err != nil {
		t.Fatal(err)
	}
	jsonOut := filepath.Join(t.TempDir(), "shrink.json")
	// Two confirmations, both needed: a replay that a stall of the loaded
	// machine breaks on its own (it has happened, see failingStory) does
	// not make the harmless schedule count as the bug.
	out, stderr, code := locktest(t, "shrink", dir, "--store", store, "--replays", "2", "--need", "2", "--confirm", "2", "--budget", "1ns", "--json", jsonOut)
	if code != 1 || !strings.Contains(stderr, "the bug no longer reproduces: no candidate failed the same way, and the run's own schedule did in only ") {
		t.Fatalf("exit %d, want 1 saying the bug no longer reproduces\nstdout:\n%sstderr:\n%s", code, out, stderr)
	}
	var log shrink.Log
	if err := runstore.ReadJSON(jsonOut, &log); err != nil {
		t.Fatal(err)
	}
	if len(log.Confirmations) != 2 || log.Smallest != "" {
		t.Errorf("--json shrink.json: smallest %q, confirmations %+v; want the run's own schedule, replayed twice", log.Smallest, log.Confirmations)
	}
}
