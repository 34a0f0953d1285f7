package main

import (
	"encoding/xml"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

func TestMatrixBadFlagsExitTwoWithOneLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"matrix", "--seeds", "0"}, "--seeds must be at least 1, got 0"},
		{[]string{"matrix", "--faults", "gc-pause"}, `--faults: unknown fault class "gc-pause"`},
		{[]string{"matrix", "--impl", "no-such-lock"}, `--impl: unknown impl "no-such-lock"`},
		{[]string{"matrix", "--time", "1s"}, "--time must be at least 2s"},
		{[]string{"matrix", "--time", "soon"}, `invalid argument "soon" for "--time"`},
		{[]string{"matrix", "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		out, errOut, code := locktest(t, tt.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tt.args, code, errOut)
		}
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: stderr %q, want one line containing %q", tt.args, errOut, tt.want)
		}
		if out != "" {
			t.Errorf("%v: stdout %q, want nothing", tt.args, out)
		}
	}
}

// writeMatrixJSON writes m as a matrix.json into a new file and returns
// its path.
func writeMatrixJSON(t *testing.T, dir, name string, m reports.Matrix) string {
	t.Helper()
	m.SchemaVersion = reports.MatrixSchemaVersion
	path := filepath.Join(dir, name)
	if err := runstore.WriteJSON(path, m); err != nil {
		t.Fatal(err)
	}
	return path
}

// A cell made worse by hand in a copy of a baseline exits 1 against that
// baseline; the same matrix exits 0; a held cell that became inconclusive
// exits 3. Each says which cell on stdout.
func TestMatrixBaselineExitCodes(t *testing.T) {
	dir := t.TempDir()
	base := reports.Matrix{Header: reports.MatrixHeader{Seeds: 5, Command: "locktest matrix --seeds 5"},
		Columns: []reports.MatrixColumn{{Key: "mutex-partition", Title: "partition"}, {Key: "deadlock", Title: "deadlock"}},
		Rows: []reports.MatrixRow{{Impl: "etcd-mutex", Backend: "etcd", Nodes: 3, Cells: map[string]reports.MatrixCell{
			"mutex-partition": {Status: reports.StatusHeld, Value: "0/5 runs", Runs: 5, Conclusive: 5, Hi: 0.43},
			"deadlock":        {Status: reports.StatusRecovers, Value: "max 120 ms"},
		}}}}
	basePath := writeMatrixJSON(t, dir, "baseline.json", base)
	edit := func(name string, cell reports.MatrixCell) string {
		m := base
		m.Rows = []reports.MatrixRow{base.Rows[0]}
		m.Rows[0].Cells = maps.Clone(base.Rows[0].Cells)
		m.Rows[0].Cells["mutex-partition"] = cell
		return writeMatrixJSON(t, dir, name, m)
	}
	tests := []struct {
		name              string
		now               string
		code              int
		want              string
		failures, skipped int // of --junit's cases
	}{
		{"same", basePath, 0, "2 cells compared, 0 worse", 0, 0},
		{"worse", edit("worse.json", reports.MatrixCell{Status: reports.StatusViolated, Value: "2/5 runs", Runs: 5, Conclusive: 5, Violations: 2, Lo: 0.12, Hi: 0.77}),
			1, "worse: etcd-mutex mutex-partition: violated: 2/5 runs (was held: 0/5 runs)", 1, 0},
		{"lost", edit("lost.json", reports.MatrixCell{Status: reports.StatusInconclusive, Reason: "not root"}),
			3, "no longer shown: etcd-mutex mutex-partition", 0, 1},
	}
	// A survival regression: the same 8 of 8 runs broke, now at 0.5 to
	// 4 s where the baseline's broke at 9 to 16 s. The rates agree; the
	// log-rank test does not.
	broke := func(from, step float64) reports.MatrixCell {
		var obs []stats.Observation
		for i := range 8 {
			obs = append(obs, stats.Observation{Time: from + float64(i)*step, Event: true})
		}
		return reports.MatrixCell{Status: reports.StatusViolated, Value: "8/8 runs", Runs: 8, Conclusive: 8, Violations: 8, Lo: 0.68, Hi: 1,
			Survival: reports.NewSurvival(obs)}
	}
	lateBase := base
	lateBase.Rows = []reports.MatrixRow{base.Rows[0]}
	lateBase.Rows[0].Cells = maps.Clone(base.Rows[0].Cells)
	lateBase.Rows[0].Cells["mutex-partition"] = broke(9, 1)
	latePath := writeMatrixJSON(t, dir, "late.json", lateBase)
	out, errOut, code := locktest(t, "matrix", "--from", edit("early.json", broke(0.5, 0.5)), "--baseline", latePath)
	if code != 1 || !strings.Contains(out, "survival worse: time to failure: median 2.0 s") || !strings.Contains(out, "time to failure compared in 1 cells") {
		t.Errorf("survival regression: exit %d, stdout %q, stderr %q; want exit 1 and the survival named worse", code, out, errOut)
	}
	for _, tt := range tests {
		junit := filepath.Join(dir, tt.name+".xml")
		out, errOut, code := locktest(t, "matrix", "--from", tt.now, "--baseline", basePath, "--junit", junit)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.name, code, out, errOut, tt.code, tt.want)
		}
		var suite struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Skipped  int `xml:"skipped,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		}
		if b, err := os.ReadFile(junit); err != nil || xml.Unmarshal(b, &suite) != nil {
			t.Errorf("%s: --junit: %v", tt.name, err)
		} else if suite.Tests != 2 || suite.Failures != tt.failures || suite.Skipped != tt.skipped ||
			tt.failures > 0 && (suite.Cases[0].Name != "etcd-mutex mutex-partition" || suite.Cases[0].Failure == nil) {
			t.Errorf("%s: --junit: %+v; want 2 cases, %d failed (etcd-mutex mutex-partition), %d skipped", tt.name, suite, tt.failures, tt.skipped)
		}
		// What a held cell of 5 seeds is worth goes to stderr.
		if want := "matrix: at 5 seeds a cell that held may still break in up to 43% of runs (its 95% interval)"; !strings.Contains(errOut, want) {
			t.Errorf("%s: stderr %q lacks %q", tt.name, errOut, want)
		}
	}
	// A baseline that is a store's header alone cannot be compared with.
	hdr := filepath.Join(dir, "store")
	if err := os.MkdirAll(hdr, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := reports.WriteMatrixHeader(hdr, base.Header); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := locktest(t, "matrix", "--from", basePath, "--baseline", hdr); code != 2 || !strings.Contains(errOut, "holds no cells") {
		t.Errorf("header-only baseline: exit %d, %q", code, errOut)
	}
}

func TestVersionFlag(t *testing.T) {
	out, errOut, code := locktest(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "locktest version ") || strings.TrimSpace(strings.TrimPrefix(out, "locktest version ")) == "" {
		t.Errorf("--version: exit %d, %q %q", code, out, errOut)
	}
}

// TestMatrixJobsCommandsRun: the command line a matrix stores with each
// run (its results' command, the reproduction a reader copies) is one
// `locktest run` accepts, and describes the job's run: every class, the
// deadlock and perf runs, one-node and multi-node impls.
func TestMatrixJobsCommandsRun(t *testing.T) {
	o := matrix.DefaultOptions()
	o.Impls, o.Seeds = []string{"redis-set-nx-px", "redlock", "etcd-mutex", "mysql-get-lock", "nats-kv"}, 1
	// A deployment's settings: a cluster param only nats reads, which
	// only nats-kv's runs must carry.
	o.Base.ClusterParams = map[string]string{"sync": "always"}
	jobs, err := matrix.Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(jobs, func(j matrix.Job) bool { return j.Class == matrix.ClassClientPauseFenced }) {
		t.Fatal("no fenced client-pause job: the saved-by-fencing column's runs are not checked")
	}
	for _, j := range jobs {
		if j.Probe == matrix.ProbeReentrant {
			continue // a probe, not a run
		}
		line, ok := strings.CutPrefix(j.Config.Command, "locktest run ")
		if !ok {
			t.Fatalf("%s: command %q", j.Label(), j.Config.Command)
		}
		rf := &runFlags{cfg: run.DefaultConfig()}
		c := &cobra.Command{Use: "run"}
		rf.define(c)
		if err := c.ParseFlags(strings.Fields(line)); err != nil {
			t.Errorf("%s: %q: %v", j.Label(), line, err)
			continue
		}
		cfg, err := rf.config(c.Flags())
		if err != nil {
			t.Errorf("%s: locktest run refuses its command line %q: %v", j.Label(), line, err)
			continue
		}
		if cfg.Impl != j.Config.Impl || cfg.Clients != j.Config.Clients || cfg.TTL != j.Config.TTL || cfg.Duration != j.Config.Duration ||
			cfg.Seed != j.Config.Seed || !slices.Equal(cfg.Faults, j.Config.Faults) || cfg.Work != j.Config.Work || cfg.StopOnViolation != j.Config.StopOnViolation ||
			cfg.Mode != j.Config.Mode || !maps.Equal(cfg.ClusterParams, j.Config.ClusterParams) {
			t.Errorf("%s: its command line %q makes a different run", j.Label(), line)
		}
	}
}

// TestMatrixResourceGivenWhereItChangesNothing: --resource fenced given
// to a matrix whose impls grant no fencing token, or without the
// client-pause class, is refused; by default it is not.
func TestMatrixResourceGivenWhereItChangesNothing(t *testing.T) {
	o := matrix.DefaultOptions()
	o.Impls, o.Classes = []string{"redlock"}, []matrix.Class{matrix.ClassClientPause}
	if err := checkMatrixResource(o, false); err != nil {
		t.Errorf("the default: %v", err)
	}
	if err := checkMatrixResource(o, true); err == nil || !strings.Contains(err.Error(), "none of its impls grants fencing tokens") {
		t.Errorf("redlock only: %v", err)
	}
	o.Impls = []string{"redlock", "redis-set-nx-px"}
	if err := checkMatrixResource(o, true); err != nil {
		t.Errorf("with a fenced impl: %v", err)
	}
	o.Classes = []matrix.Class{matrix.ClassNone}
	if err := checkMatrixResource(o, true); err == nil || !strings.Contains(err.Error(), "client-pause") {
		t.Errorf("without client-pause: %v", err)
	}
}
