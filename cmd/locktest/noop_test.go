package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/testkit/gate"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// A fault defined in one file of the nemesis (noop.go, which registers the
// noop fault and nothing else names) reaches every reader of the fault
// registry: `locktest list`, a run's schedule, its history, its stats and
// the report's timeline. The checker's fault windows and the matrix's
// columns are shown by their packages' tests of the same fault.
func TestNoopFaultReachesEveryReader(t *testing.T) {
	gate.Need(t, "redis-server")
	stdout, stderr, code := locktest(t, "list")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	var line string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "noop ") {
			line = l
		}
	}
	if !strings.Contains(line, "[none]") || !strings.Contains(line, "noop-done") {
		t.Errorf("list's line of noop is %q, want its family and heal", line)
	}

	root := t.TempDir()
	// 5 s leases: with no real fault the run must be valid, and a loaded
	// machine (CI run 31) stalled a holder past the default 500 ms lease.
	stdout, stderr, code = locktest(t, "run", "--impl", "redis-set-nx-px", "--faults", "noop", "--time", "4s", "--ttl", "5s",
		"--interval", "500ms", "--window", "300ms", "--quiet-time", "500ms", "--store", root, "--name", "noop")
	if code != 0 {
		t.Fatalf("run --faults noop: exit %d: %s%s", code, stdout, stderr)
	}
	dir, r := storedRun(t, root, "noop")
	if r.Stats["faults_injected"] < 1 || len(r.Problems) > 0 {
		t.Errorf("noop run: %v faults injected, problems %q", r.Stats["faults_injected"], r.Problems)
	}
	h, err := history.ReadFile(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var injected, healed int
	for _, o := range h {
		switch {
		case o.IsNemesis() && o.Type == history.OK && o.F == "noop":
			injected++
		case o.IsNemesis() && o.Type == history.OK && o.F == "noop-done":
			healed++
		}
	}
	if injected == 0 || healed < injected {
		t.Errorf("history has %d noop injections and %d heals", injected, healed)
	}
	page, err := os.ReadFile(filepath.Join(dir, runstore.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `"f":"noop"`) {
		t.Errorf("the report's timeline has no noop window")
	}
}
