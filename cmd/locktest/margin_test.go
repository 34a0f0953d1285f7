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
	"github.com/locktest/locktest/internal/gate"
	"github.com/locktest/locktest/internal/schemacheck"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
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
func TestMarginFindsThePauseBoundary(t *testing.T) {
	gate.Need(t, "redis-server")
	for attempt := 1; ; attempt++ {
		root := t.TempDir()
		stdout, stderr, code := locktest(t, "margin", "--impl", "redis-set-nx-px", "--faults", "pause-client", "--pause-point", "after-acquire",
			"--vary", "pause=800ms..1200ms", "--ttl", "1s", "--grid", "3", "--trials", "2", "--resolution", "50ms", "--at", "500ms",
			"--time", "3s", "--clients", "2", "--backoff", "uniform", "--retry", "5ms", "--store", root)
		if code != 0 {
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
		stalled, lag, spread := marginStalls(t, filepath.Dir(files[0]), m)
		missed := checkMargin(m, stdout)
		if missed == "" {
			t.Logf("%s; stated bound %s", m.Summary, m.Bound.Label)
			return
		}
		if attempt == 2 || stalled < 100*time.Millisecond && lag < 25*time.Millisecond && spread < 25*time.Millisecond {
			t.Fatalf("%s (longest stall %v, longest lag from a resume to the holder's write %v, longest gap from an acquire to its pause %v past the median)\n%s",
				missed, stalled, lag, spread, stdout)
		}
		t.Logf("%s, while the machine stalled for up to %v, a resumed holder took up to %v to write and a pause came up to %v later after its acquire than the median: searching again",
			missed, stalled, lag, spread)
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

// marginStalls is the longest machine stall of the search's runs, the
// longest time a resumed holder took to send its write, and how much
// longer than the median the longest time from an acquire to its pause
// was; it checks that each run injected its value's pinned fault and
// nothing else, and that every trial that failed is explained by its own
// pause: the pause and its trial's time from the acquire to it outlast
// the 1 s TTL, less 50 ms.
//
// The stated bound counts the median time from the acquire to the pause,
// not the holder's time from its resume to its write, which is a few
// milliseconds on an idle machine: under stress-ng (at 0f6bb8c) a 950 ms
// pause broke the 1 s lease whose bound was 976 ms, the holder's write
// coming late; and at 7e6c887 an 850 ms pause broke it, its trial's pause
// coming late after the acquire where the median was 26 ms. A search
// whose resumed holders took 25 ms or more, or one of whose pauses came
// 25 ms or more later than the median, is searched again, once.
func marginStalls(t *testing.T, dir string, m reports.Margin) (stall, lag, spread time.Duration) {
	t.Helper()
	var longest time.Duration
	var gaps []time.Duration
	for _, p := range m.Points {
		for _, r := range p.Runs {
			res, err := runstore.ReadResults(filepath.Join(dir, r.Run))
			if err != nil {
				t.Fatal(err)
			}
			longest = max(longest, res.Run.LongestStall())
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
			if pauses != 1 {
				t.Errorf("run %s of %s injected %d pauses, want the one pinned", r.Run, p.Label, pauses)
			}
			lag = max(lag, resumeLag(h))
			gap := pauseGap(h)
			gaps = append(gaps, gap)
			if pause, _ := time.ParseDuration(p.Label); r.Failed && pause+gap < time.Second-50*time.Millisecond {
				t.Errorf("run %s failed with a pause of %v %v after its acquire, which a 1s lease outlasts", r.Run, pause, gap)
			}
		}
	}
	slices.Sort(gaps)
	if len(gaps) > 0 {
		spread = gaps[len(gaps)-1] - gaps[len(gaps)/2]
	}
	return longest, lag, spread
}

// pauseGap is the time in h from the paused client's last granted
// acquire to its pause (0 without a pause).
func pauseGap(h history.History) time.Duration {
	granted := map[string]int64{}
	for _, o := range h {
		switch {
		case o.F == history.Acquire && o.Type == history.OK:
			granted["p"+strconv.Itoa(o.Process)] = o.Time
		case o.IsNemesis() && o.F == "pause-client" && o.Type == history.OK && len(o.Value.Targets) > 0:
			if at, ok := granted[o.Value.Targets[0]]; ok {
				return time.Duration(o.Time - at)
			}
		}
	}
	return 0
}

// resumeLag is the longest time in h from a client's resume to the
// invocation of that client's next write.
func resumeLag(h history.History) time.Duration {
	var most time.Duration
	for i, o := range h {
		if !o.IsNemesis() || o.F != "resume-client" || o.Type != history.OK || len(o.Value.Targets) == 0 {
			continue
		}
		for _, w := range h[i+1:] {
			if w.F == "write" && w.Type == history.Invoke && "p"+strconv.Itoa(w.Process) == o.Value.Targets[0] {
				most = max(most, time.Duration(w.Time-o.Time))
				break
			}
		}
	}
	return most
}
