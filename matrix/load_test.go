package matrix

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

func TestParseJobName(t *testing.T) {
	tests := []struct {
		name  string
		impl  string
		probe Probe
		class Class
		ok    bool
	}{
		{"matrix-redis-set-nx-px-client-pause", "redis-set-nx-px", ProbeSafety, ClassClientPause, true},
		{"matrix-redis-set-nx-px-none", "redis-set-nx-px", ProbeSafety, ClassNone, true},
		{"matrix-redlock-3-perf-1", "redlock-3", ProbePerf1, ClassNone, true},
		{"matrix-redlock-kill-restart", "redlock", ProbeSafety, ClassKillRestart, true},
		{"matrix-zk-lock-reentrancy", "zk-lock", ProbeReentrant, ClassNone, true},
		{"matrix-etcd-mutex-deadlock", "etcd-mutex", ProbeDeadlock, ClassNone, true},
		{"redis-set-nx-px-pause-client-none", "", "", "", false},
		{"matrix-kazoo-client-pause", "kazoo", ProbeSafety, ClassClientPause, true}, // an external client's row
		// The fenced client-pause runs of the saved-by-fencing column.
		{"matrix-redis-set-nx-px-client-pause-fenced", "redis-set-nx-px", ProbeSafety, ClassClientPauseFenced, true},
		{"matrix-kazoo-client-pause-fenced", "kazoo", ProbeSafety, ClassClientPauseFenced, true},
		{"matrix-tooz-redis-deadlock", "tooz-redis", ProbeDeadlock, ClassNone, true},
		{"matrix-none", "", "", "", false},
		{"matrix-redis-set-nx-px-meteor", "", "", "", false},
	}
	for _, tt := range tests {
		impl, p, c, ok := parseJobName(tt.name)
		if impl != tt.impl || p != tt.probe || c != tt.class || ok != tt.ok {
			t.Errorf("%s: %q %q %q %v, want %q %q %q %v", tt.name, impl, p, c, ok, tt.impl, tt.probe, tt.class, tt.ok)
		}
	}
}

// storeRun writes a stored run of h with results r into root/name/stamp.
func storeRun(t *testing.T, root, name, stamp string, r runstore.Results, h history.History) string {
	t.Helper()
	dir := filepath.Join(root, name, stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := runstore.WriteResults(dir, r); err != nil {
		t.Fatal(err)
	}
	if err := history.WriteFile(filepath.Join(dir, runstore.HistoryFile), h); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadAggregatesAStoredMatrixAgain(t *testing.T) {
	root := t.TempDir()
	run := func(seed int64, faults []string, cs ...checker.Result) runstore.Results {
		return runstore.Results{Run: runstore.RunInfo{Impl: "redis-set-nx-px", Seed: seed, TTL: "500ms", Duration: "8s", Clients: 5, Faults: faults,
			Started: "2026-11-22T03:00:00Z", Elapsed: "9.5s", Version: "v1 abc"}, Checkers: cs, Stats: map[string]float64{"faults_injected": 1}}
	}
	h := (&hist{}).acquire(0, 0, 1, history.OK).release(0, 2, 3).acquire(1, 1000, 1002, history.OK).h
	stale := checker.Result{Checker: "resource", Valid: checker.Invalid, Anomalies: []checker.Anomaly{{Kind: "stale-write"}}}
	// An older run of the same job and seed, which the newer one replaces.
	storeRun(t, root, "matrix-redis-set-nx-px-client-pause", "20261122T030000", run(1, []string{"pause-client"}, allValid()...), h)
	newer := storeRun(t, root, "matrix-redis-set-nx-px-client-pause", "20261122T040000",
		run(1, []string{"pause-client"}, valid("mutual-exclusion"), stale, valid("fencing-tokens")), h)
	storeRun(t, root, "matrix-redis-set-nx-px-none", "20261122T030001", run(1, nil, allValid()...), h)
	storeRun(t, root, "run-of-someone-else", "20261122T030002", run(1, nil, allValid()...), h)
	probeDir := filepath.Join(root, "matrix-redis-set-nx-px-reentrancy", "20261122T030003.000")
	if err := os.MkdirAll(probeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeProbe(probeDir, Reentrancy{Status: "no", Value: "no", Reason: "measured: refused"}); err != nil {
		t.Fatal(err)
	}

	rs, classes, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || len(classes) != 2 || classes[0] != ClassNone || classes[1] != ClassClientPause {
		t.Fatalf("%d results, classes %v; want 3 and [none client-pause]", len(rs), classes)
	}
	m := Aggregate(StoredHeader(rs), classes, rs)
	cells := m.Rows[0].Cells
	if c := cells[SafetyColumn(ClassClientPause)]; c.Text() != "violated: 1/1 runs" || len(c.Links) != 1 || c.Links[0].Report != filepath.Join(newer, runstore.ReportFile) {
		t.Errorf("client-pause cell %+v: want the newer run's violation", c)
	}
	if c := cells[SafetyColumn(ClassNone)]; c.Text() != "held: 0/1 runs" {
		t.Errorf("none cell %+v", c)
	}
	if c := cells[ColRate8]; c.Text() != "2/s" {
		t.Errorf("8-client rate %+v: want the history's 2 acquires over 1.002 s", c)
	}
	if c := cells[ColReentrant]; c.Text() != "no" || c.Reason != "measured: refused" {
		t.Errorf("reentrant %+v", c)
	}
	if h := m.Header; h.Commit != "v1 abc" || h.Seeds != 1 || h.Duration.String() != "8s" || h.Date.Format("15:04") != "03:00" || h.Elapsed != 10*time.Second {
		t.Errorf("header %+v", h)
	}
	if _, _, err := Load(t.TempDir()); err == nil {
		t.Errorf("an empty store loaded without error")
	}
}

// TestLoadKeepsTheFencedColumn: a stored matrix with fenced client-pause
// runs is aggregated again with its saved-by-fencing column, from the
// runs' folders (matrix-<impl>-client-pause-fenced), and no mutex column
// of the variant.
func TestLoadKeepsTheFencedColumn(t *testing.T) {
	root := t.TempDir()
	run := func(mode string, cs ...checker.Result) runstore.Results {
		return runstore.Results{Run: runstore.RunInfo{Impl: "redis-set-nx-px", Seed: 1, TTL: "500ms", Duration: "8s", Clients: 5, Faults: []string{"pause-client"},
			Mode: mode, Started: "2026-11-22T03:00:00Z", Elapsed: "9.5s", Version: "v1 abc"}, Checkers: cs, Stats: map[string]float64{"faults_injected": 1}}
	}
	h := (&hist{}).acquire(0, 0, 1, history.OK).release(0, 2, 3).acquire(1, 1000, 1002, history.OK).h
	stale := checker.Result{Checker: "resource", Valid: checker.Invalid, Anomalies: []checker.Anomaly{{Kind: "stale-write"}}}
	saved := checker.Result{Checker: "resource", Valid: checker.Valid, Stats: map[string]float64{"saved_by_fencing": 1}}
	storeRun(t, root, "matrix-redis-set-nx-px-client-pause", "20261122T030000", run("none", valid("mutual-exclusion"), stale, valid("fencing-tokens")), h)
	storeRun(t, root, "matrix-redis-set-nx-px-client-pause-fenced", "20261122T030001", run("fenced", valid("mutual-exclusion"), saved, valid("fencing-tokens")), h)
	rs, classes, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(classes, ClassClientPauseFenced) {
		t.Fatalf("classes %v: no fenced variant", classes)
	}
	m := Aggregate(StoredHeader(rs), classes, rs)
	for _, c := range m.Columns {
		if c.Key == SafetyColumn(ClassClientPauseFenced) {
			t.Errorf("a mutex column of the fenced variant: %+v", c)
		}
	}
	cells := m.Rows[0].Cells
	if c := cells[ColFenced]; c.Text() != "saved: 0/1 runs lost an update (the lock broke in 1/1)" || len(c.Links) != 1 {
		t.Errorf("saved-by-fencing cell %+v", c)
	}
	if c := cells[SafetyColumn(ClassClientPause)]; c.Text() != "violated: 1/1 runs" {
		t.Errorf("client-pause cell %+v", c)
	}
}
