package reports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/runstore"
)

// storeRun writes a stored run under root/rel with the given start and
// verdict, and a report when report is set.
func storeRun(t *testing.T, root, rel, started string, valid checker.Verdict, report bool) {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runstore.Results{Run: runstore.RunInfo{Name: filepath.Dir(rel), Impl: "redis-set-nx-px", Faults: []string{"pause-client"}, Mode: "fenced",
		Started: started, Expect: "valid"}, Valid: valid,
		Checkers: []checker.Result{{Checker: "mutual-exclusion", Valid: valid, Anomalies: []checker.Anomaly{}}},
		Stats:    map[string]float64{"ops": 42}}
	if valid == checker.Invalid {
		r.Checkers[0].Anomalies = []checker.Anomaly{{Kind: "overlapping-holds"}, {Kind: "overlapping-holds"}}
	}
	if err := runstore.WriteResults(dir, r); err != nil {
		t.Fatal(err)
	}
	if report {
		if err := os.WriteFile(filepath.Join(dir, runstore.ReportFile), []byte("<html>"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteIndex(t *testing.T) {
	root := t.TempDir()
	storeRun(t, root, "a/20250101T000000", "2025-01-01T00:00:00Z", checker.Valid, true)
	storeRun(t, root, "b/20250301T000000", "2025-03-01T00:00:00Z", checker.Invalid, true)
	storeRun(t, root, "a/20250201T000000", "2025-02-01T00:00:00Z", checker.Unknown, false)
	// A scenario's latest link is not a second copy of its run.
	if err := os.Symlink("20250101T000000", filepath.Join(root, "a", "latest")); err != nil {
		t.Fatal(err)
	}
	// A broken results.json is listed with its error.
	if err := os.MkdirAll(filepath.Join(root, "c", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "c", "x", runstore.ResultsFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteIndex(root); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	// Newest first, each once.
	order := []string{`<a href="b/20250301T000000/report.html">`, `a/20250201T000000 (no report)`, `<a href="a/20250101T000000/report.html">`}
	last := -1
	for _, s := range order {
		i := strings.Index(out, s)
		if i < 0 {
			t.Fatalf("index lacks %q", s)
		}
		if i < last {
			t.Errorf("%q is not in newest-first order", s)
		}
		last = i
		if strings.Count(out, s) != 1 {
			t.Errorf("%q is listed %d times", s, strings.Count(out, s))
		}
	}
	if strings.Contains(out, "latest") {
		t.Error("index lists the latest link")
	}
	for _, want := range []string{
		"4 runs in", "1 valid</span>", "1 invalid</span>", "1 unknown</span>",
		`<td class="v-false">invalid</td>`, "mutual-exclusion invalid", `<td class="num">2</td>`,
		"c/x</td><td colspan=\"8\">results.json unreadable:",
		"<strong>not as expected</strong> (valid)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("index lacks %q", want)
		}
	}
	if err := WriteIndex(filepath.Join(root, "missing")); err == nil || !strings.Contains(err.Error(), "no such folder") {
		t.Errorf("index of a missing store: %v", err)
	}
}
