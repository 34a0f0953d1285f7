package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

func TestIndexCommand(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "overlap", "20250101T000000")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runstore.HistoryFile), []byte(goodHistory), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, code := locktest(t, "check", dir); code != 1 {
		t.Fatalf("check: exit %d, want 1", code)
	}
	out, stderr, code := locktest(t, "index", root)
	if code != 0 || !strings.Contains(out, filepath.Join(root, reports.IndexFile)) {
		t.Fatalf("index: exit %d, out %q, stderr %q", code, out, stderr)
	}
	b, err := os.ReadFile(filepath.Join(root, reports.IndexFile))
	if err != nil || !strings.Contains(string(b), `<a href="overlap/20250101T000000/report.html">`) {
		t.Fatalf("index.html lacks the run: %v", err)
	}
	if _, stderr, code := locktest(t, "index", filepath.Join(root, "nope")); code != 2 || !strings.Contains(stderr, "no such folder") {
		t.Errorf("index of a missing store: exit %d, stderr %q", code, stderr)
	}
}
