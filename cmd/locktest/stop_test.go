package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// TestStopOnViolation: a run of gcStory's schedule with --stop-on-violation
// and 30 s to run stops soon after p0's stale write, and its verdict is the
// full check's (invalid, with the stale write); the same schedule against
// a fenced resource, which refuses the write, runs its whole time.
func TestStopOnViolation(t *testing.T) {
	gate.Need(t, "redis-server")
	t.Parallel()
	store := t.TempDir()
	dir, res := runStory(t, store, "stop", "--time", "30s", "--stop-on-violation", "--expect", "invalid")
	elapsed, err := time.ParseDuration(res.Run.Elapsed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Run.StoppedEarly, "stopped ") || elapsed >= 30*time.Second || res.Run.Interrupted {
		t.Errorf("stopped_early %q after %s (interrupted %v): want a stop before the 30 s", res.Run.StoppedEarly, elapsed, res.Run.Interrupted)
	}
	if kinds := kindsOf(res); !strings.Contains(kinds, "stale-write") {
		t.Errorf("anomalies %s, want the stale write", kinds)
	}
	if err := schemacheck.ValidateFile("results", filepath.Join(dir, runstore.ResultsFile)); err != nil {
		t.Error(err)
	}
	report, _ := os.ReadFile(filepath.Join(dir, runstore.ReportFile))
	if !strings.Contains(string(report), res.Run.StoppedEarly) {
		t.Error("the report does not say the run stopped at its first violation")
	}

	_, res = runStory(t, store, "fenced", "--resource", "fenced", "--stop-on-violation", "--expect", "valid")
	if elapsed, _ := time.ParseDuration(res.Run.Elapsed); res.Run.StoppedEarly != "" || elapsed < 11*time.Second {
		t.Errorf("fenced: stopped_early %q after %s, want the whole 11 s", res.Run.StoppedEarly, elapsed)
	}
}

// kindsOf lists the kinds of a result's anomalies.
func kindsOf(r runstore.Results) string {
	var ks []string
	for _, c := range r.Checkers {
		for _, a := range c.Anomalies {
			ks = append(ks, a.Kind)
		}
	}
	return strings.Join(ks, ",")
}
