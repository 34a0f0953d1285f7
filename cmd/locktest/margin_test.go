package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// TestMarginFindsThePauseBoundary searches the pause that breaks
// redis-set-nx-px with a 1 s TTL, a client paused right after its acquire:
// the boundary must lie within 50 ms of the TTL less the time from the
// acquire to the pause, which the search measures and states as the
// lock's own bound. Every run injects the one pinned fault of its value's
// schedule file. A search during which the machine stalled for 100 ms or
// more (a stall lengthens a pause as the lock sees it) is run again, once.
//
// The other client retries every 5 ms at most (--backoff uniform): a
// violation needs it to acquire between the lease's end and the woken
// holder's write, and with the default exponential backoff, whose wait
// grows to 100 ms while the lock is held, a pause 30 ms past the bound
// held in 2 of 2 trials about one time in five (at 04e138c: a boundary
// 53 ms past the bound), whatever the load.
//
// Each client thinks up to 2 ms between critical sections. Without it the
// two clients made 10,000 ops a second; beside the loaded suite (at
// 8e8b0cf) the driver fell behind, their event rings filled, and a
// worker's report of its pause point waited behind a second of ops on its
// stdout: the worker that reached the point first, holding the lock, was
// not the one picked and stayed at its point until the other reached
// its own, an unplanned pause of 1.05 s that broke the lease (the test
// caught it: the failed trial's hold was not its pause's).
func TestMarginFindsThePauseBoundary(t *testing.T) {
	gate.Need(t, "redis-server")
	for attempt := 1; ; attempt++ {
		root := t.TempDir()
		testkit.KeepFailedStore(t, root)
		stdout, stderr, code := locktest(t, "margin", "--impl", "redis-set-nx-px", "--faults", "pause-client", "--pause-point", "after-acquire",
			"--vary", "pause=800ms..1200ms", "--ttl", "1s", "--grid", "3", "--trials", "2", "--resolution", "50ms", "--at", "500ms",
			"--time", "3s", "--clients", "2", "--backoff", "uniform", "--retry", "5ms", "--think", "2ms", "--store", root)
		if code != 0 && code != 1 {
			t.Fatalf("exit %d: %s%s", code, stdout, stderr)
		}
		files, _ := filepath.Glob(filepath.Join(root, "*.margin", "2*", reports.MarginFile))
		if len(files) != 1 {
			t.Fatalf("margin.json files %v, want one", files)
		}
		if err := schemacheck.ValidateFile("margin", files[0]); err != nil {
			t.Error(err)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		var m reports.Margin
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		stalled, spread := marginStalls(t, filepath.Dir(files[0]), m)
		missed := checkMargin(m, stdout)
		// The gate is the stated bound: exit 1 says the lock broke more
		// than the resolution below it, which only a stretched pause
		// explains here.
		if failed := m.Gate != nil && m.Gate.Failed; failed != (code == 1) {
			t.Fatalf("exit %d with gate %+v", code, m.Gate)
		} else if failed && missed == "" {
			missed = "the gate failed: " + m.Gate.Why
		}
		if m.Gate == nil || m.Gate.Source != "stated bound" {
			t.Errorf("gate %+v, want the stated bound", m.Gate)
		}
		if missed == "" {
			t.Logf("%s; stated bound %s", m.Summary, m.Bound.Label)
			return
		}
		if stalled < 100*time.Millisecond && spread < 25*time.Millisecond {
			t.Fatalf("%s (longest stall %v; a hold outlasted its pause by up to %v more than the median)\n%s", missed, stalled, spread, stdout)
		}
		if attempt == 2 {
			// Beside the whole suite under stress-ng (at 7ff04d5) the
			// nemesis's 900 ms wait ended 89 ms late in one trial and a
			// resume took 149 ms in another: the pauses as applied were
			// not the values searched, twice in a row. Every failed trial
			// was still explained by its own hold (checked above); the
			// boundary cannot be compared with the bound on such a
			// machine.
			t.Logf("%s, while the machine stalled for up to %v and a hold outlasted its pause by up to %v more than the median, in both searches: the boundary is not compared on this machine; every failed trial was explained by its own hold",
				missed, stalled, spread)
			return
		}
		t.Logf("%s, while the machine stalled for up to %v and a hold outlasted its pause by up to %v more than the median: searching again", missed, stalled, spread)
	}
}

// checkMargin says what m and the command's output miss of the pause
// boundary, "" when nothing.
func checkMargin(m reports.Margin, stdout string) string {
	switch {
	case !m.Found || m.Holds == "" || m.Bound == nil:
		return "no bracket or no stated bound: " + m.Summary
	case !strings.Contains(stdout, m.Summary) || !strings.Contains(stdout, "stated bound: "+m.Bound.Label):
		return "the output does not give the summary and the stated bound"
	}
	holds, _ := time.ParseDuration(m.Holds)
	breaks, _ := time.ParseDuration(m.Breaks)
	boundary, _ := time.ParseDuration(m.Boundary)
	bound := time.Duration(m.Bound.Value)
	switch {
	case breaks-holds > 50*time.Millisecond || holds >= breaks:
		return "the bracket " + m.Holds + ".." + m.Breaks + " is not 50ms or narrower"
	case bound > time.Second || bound < 900*time.Millisecond:
		return "stated bound " + m.Bound.Label + ": want the 1s TTL less a few milliseconds"
	case math.Abs(float64(boundary-bound)) > float64(50*time.Millisecond):
		return "boundary " + m.Boundary + " is more than 50ms from the stated bound " + m.Bound.Label
	}
	return ""
}

// marginStalls is the longest machine stall of the search's runs, and
// how much more than the median the paused holder's hold outlasted its
// pause in any run; it checks that each run injected its value's pinned
// fault and nothing else, and that every trial that failed is explained
// by its own hold: from the paused holder's acquire (its invocation) to
// its write after the resume, at least the 1 s TTL less 50 ms.
//
// The stated bound counts the median time from an acquire to its pause;
// a hold also takes the holder's time from the end of the pause to its
// write (SIGCONT, the release from the pause point, the write's send),
// a few milliseconds on an idle machine. Under stress-ng either can take
// tens of milliseconds in one trial and not another: a 950 ms pause
// broke the 1 s lease whose bound was 976 ms (at 0f6bb8c), and an 800 ms
// pause broke one whose bound was 967 ms (at 9f7d237), its pause coming
// 21 ms after the acquire (the rest of that hold was not kept). A
// search in which some hold outlasted its pause by 25 ms or more beyond
// the median, or the machine stalled, is searched again, once; when the
// second search is stretched so too, its boundary is not compared.
func marginStalls(t *testing.T, dir string, m reports.Margin) (stall, spread time.Duration) {
	t.Helper()
	var extras []time.Duration
	for _, p := range m.Points {
		pause, _ := time.ParseDuration(p.Label)
		for _, r := range p.Runs {
			res, err := runstore.ReadResults(filepath.Join(dir, r.Run))
			if err != nil {
				t.Fatal(err)
			}
			// The machine's stalls: its timer's, its disk's (a sync of
			// 1.2 s under stress-ng at f388691 made the other client's
			// write stale with no pause, and held the pause's injection
			// until the fault phase cut it short).
			runStall := testkit.Stalled(res)
			stall = max(stall, runStall)
			h, err := history.ReadFile(filepath.Join(dir, r.Run, runstore.HistoryFile))
			if err != nil {
				t.Fatal(err)
			}
			pauses := 0
			for _, o := range h {
				if o.IsNemesis() && o.Type == history.OK && o.F != "resume-client" {
					if o.F != "pause-client" || time.Duration(o.Value.Duration).String() != p.Label {
						t.Errorf("run %s of %s injected %s %v", r.Run, p.Label, o.F, time.Duration(o.Value.Duration))
					}
					pauses++
				}
			}
			if pauses == 0 && r.Unusable && strings.Contains(r.Why, "faults went in") {
				// Not counted, and run again: the pinned pause could not
				// go in, and the history says so (beside the whole suite
				// and a matrix, at load 28, neither client reached its
				// pause point within the fault's wait: "not applied: p0,p1
				// did not reach after-acquire").
				t.Logf("run %s of %s was run again: %s", r.Run, p.Label, r.Why)
				continue
			}
			if pauses != 1 {
				t.Errorf("run %s of %s injected %d pauses, want the one pinned", r.Run, p.Label, pauses)
			}
			// The pause as applied, from the pause's ok to the resume's
			// ok, is recorded, and is never shorter than the one planned,
			// unless the machine stalled or the run broke (a pause that
			// went in late is cut short by the fault phase's end, which
			// the search reports as off the plan when the run held).
			applied, err := time.ParseDuration(r.Applied)
			if err != nil {
				t.Errorf("run %s of %s records no pause applied (%q)", r.Run, p.Label, r.Applied)
			}
			if r.Unusable {
				// Not counted, and run again: a pause that went in late
				// and was cut short (under stress-ng at 08f6f6f, 196ms of
				// 800ms), which the search must have said.
				if r.Failed || applied >= pause || !strings.Contains(r.Why, "applied as") {
					t.Errorf("run %s of %s is unusable (%q) with its pause applied as %v, failed %v: want only a held run whose pause was cut short", r.Run, p.Label, r.Why, applied, r.Failed)
				}
				t.Logf("run %s of %s was run again: %s", r.Run, p.Label, r.Why)
				continue
			}
			if runStall >= 100*time.Millisecond {
				t.Logf("run %s of %s: the machine stalled for %v (pause applied %v, failed %v): its hold is not checked", r.Run, p.Label, runStall, applied, r.Failed)
				continue
			}
			// A run that broke with its pause cut short still broke, and
			// the search counts it (margin.cutShort runs again only a held
			// one): beside the loaded suite (at 1c52121) a 1.2s pause went
			// in as 998ms and broke the 1s lease. Its hold must still
			// explain the failure, but it is not its planned pause's, so
			// it stays out of the spread.
			cut := applied < pause && r.Failed
			if cut {
				t.Logf("run %s of %s broke with its pause cut short to %s: counted", r.Run, p.Label, r.Applied)
			} else if applied < pause {
				t.Errorf("run %s of %s records the pause applied as %q, want at least %v", r.Run, p.Label, r.Applied, pause)
			}
			held, ok := pausedHold(h)
			if !ok {
				continue
			}
			if !cut {
				extras = append(extras, held-pause)
			}
			if r.Failed && held < time.Second-50*time.Millisecond {
				t.Errorf("run %s failed with a pause of %v (applied %s) in a hold of %v from the acquire to the write, which a 1s lease outlasts", r.Run, pause, r.Applied, held)
			}
		}
	}
	slices.Sort(extras)
	if len(extras) > 0 {
		spread = extras[len(extras)-1] - extras[len(extras)/2]
	}
	return stall, spread
}

// pausedHold is, in h, the time from the invocation of the paused
// client's last granted acquire before its pause (the lease cannot start
// before the request was sent; under load its answer can be recorded
// long after the server granted it) to the invocation of its first write
// after its resume; false when h lacks one of them.
func pausedHold(h history.History) (time.Duration, bool) {
	invoked, granted := map[string]int64{}, map[string]int64{}
	var who string
	var from int64
	resumed := false
	for _, o := range h {
		switch {
		case o.F == history.Acquire && o.Type == history.Invoke && who == "":
			invoked["p"+strconv.Itoa(o.Process)] = o.Time
		case o.F == history.Acquire && o.Type == history.OK && who == "":
			granted["p"+strconv.Itoa(o.Process)] = invoked["p"+strconv.Itoa(o.Process)]
		case o.IsNemesis() && o.F == "pause-client" && o.Type == history.OK && len(o.Value.Targets) > 0 && who == "":
			at, ok := granted[o.Value.Targets[0]]
			if !ok {
				return 0, false
			}
			who, from = o.Value.Targets[0], at
		case o.IsNemesis() && o.F == "resume-client" && o.Type == history.OK && who != "":
			resumed = true
		case resumed && o.F == "write" && o.Type == history.Invoke && "p"+strconv.Itoa(o.Process) == who:
			return time.Duration(o.Time - from), true
		}
	}
	return 0, false
}

// TestMarginGateFailsOnItsSafeSide searches pauses that all break a 1 s
// lease, against a gate of 3 s that says the lock must hold up to there:
// the search must exit 1, say why on stdout and in margin.json, and keep
// its progress on stderr. The search is a plan file's, as a team keeps it.
func TestMarginGateFailsOnItsSafeSide(t *testing.T) {
	gate.Need(t, "redis-server")
	root := t.TempDir()
	testkit.KeepFailedStore(t, root)
	jsonOut := filepath.Join(root, "m.json")
	plan := writePlan(t, t.TempDir(), `impls: [redis-set-nx-px]
faults: [pause-client]
run: {ttl: 1s, time: 3s, clients: 2, backoff: uniform, retry: 5ms, think: 2ms}
margin: {vary: pause=1500ms..2s, grid: 2, trials: 1, at: 500ms}
gates: {margin: 3s}
`)
	stdout, stderr, code := locktest(t, "margin", "--plan", plan, "--store", root, "--json", jsonOut, "-q=false")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the gate failed)\nstdout:\n%sstderr:\n%s", code, stdout, stderr)
	}
	var m reports.Margin
	b, err := os.ReadFile(jsonOut)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	if g := m.Gate; g == nil || !g.Failed || g.Source != "--gate" || g.Label != "3s" || g.Tolerance != "50ms" {
		t.Errorf("gate %+v, want --gate 3s within 50ms, failed", m.Gate)
	}
	if want := "gate: --gate 3s (within 50ms): FAILED: it broke at pause 1.5s, below the --gate 3s by more than 50ms"; !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout)
	}
	if strings.Contains(stdout, "grid ") || !strings.Contains(stderr, "grid ") {
		t.Errorf("progress lines belong on stderr\nstdout:\n%sstderr:\n%s", stdout, stderr)
	}
}
