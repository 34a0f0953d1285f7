package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
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
func TestMarginFindsThePauseBoundary(t *testing.T) {
	gate.Need(t, "redis-server")
	for attempt := 1; ; attempt++ {
		root := t.TempDir()
		stdout, stderr, code := locktest(t, "margin", "--impl", "redis-set-nx-px", "--faults", "pause-client", "--pause-point", "after-acquire",
			"--vary", "pause=800ms..1200ms", "--ttl", "1s", "--grid", "3", "--trials", "2", "--resolution", "50ms", "--at", "500ms",
			"--time", "3s", "--clients", "2", "--store", root)
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
		stalled := marginStalls(t, filepath.Dir(files[0]), m)
		missed := checkMargin(m, stdout)
		if missed == "" {
			t.Logf("%s; stated bound %s", m.Summary, m.Bound.Label)
			return
		}
		if attempt == 2 || stalled < 100*time.Millisecond {
			t.Fatalf("%s\n%s", missed, stdout)
		}
		t.Logf("%s, while the machine stalled for up to %v: searching again", missed, stalled)
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
// checks that each run injected its value's pinned fault and nothing else.
func marginStalls(t *testing.T, dir string, m reports.Margin) time.Duration {
	t.Helper()
	var longest time.Duration
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
		}
	}
	return longest
}
