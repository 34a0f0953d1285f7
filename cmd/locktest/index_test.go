package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/shrink"
)

// storeShrink stores, in root, a shrink of the run in from that shrank it
// to one replay, c001, which failed the same way, and returns the search's
// folder. Its log is the shrink package's own type, as a search writes
// it.
func storeShrink(t *testing.T, root, from string) string {
	t.Helper()
	dir := filepath.Join(root, "overlap.shrink", "20250102T000000")
	replay := filepath.Join(dir, "candidates", "c001", "20250102T000001")
	for _, d := range []string{replay} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(replay, runstore.HistoryFile), []byte(goodHistory), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := locktest(t, "check", replay); code != 1 {
		t.Fatalf("check: exit %d %s", code, stderr)
	}
	// The replay ran with --expect invalid, as every candidate does.
	res, err := runstore.ReadResults(replay)
	if err != nil {
		t.Fatal(err)
	}
	res.Run.Expect, res.Run.Name = "invalid", "c001"
	if err := runstore.WriteResults(replay, res); err != nil {
		t.Fatal(err)
	}
	size := runstore.ShrinkSize{Faults: 1, Time: "2s", Clients: 2, Locks: 1}
	log := shrink.Log{SchemaVersion: 1, From: from, Anomaly: shrink.Target{Checker: "mutual-exclusion", Kind: "overlapping-holds"}, Need: 1, Replays: 1,
		Grace: "1s", Budget: "30m0s", Started: "2025-01-02T00:00:00Z", Elapsed: "5s", Before: size, After: size, Smallest: "c001", ReplaysRun: 1,
		Steps: []shrink.StepLog{{Step: shrink.Step{ID: "c001", Change: "no faults", Trials: []shrink.Trial{{Run: replay, Verdict: "INVALID", Failed: true}}, Accepted: true},
			Size: size, Schedule: filepath.Join(dir, "candidates", "c001.json")}},
		Confirmations: []shrink.Trial{}}
	if err := runstore.WriteJSON(filepath.Join(dir, shrink.LogFile), log); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestIndexCommand: locktest index rewrites the store's index and every
// shrink's page, and says where; a shrink whose log cannot be read is a
// warning, and the index lists it with its error; a store that does not
// exist is bad input.
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
	search := storeShrink(t, root, dir)
	out, stderr, code := locktest(t, "index", root)
	if code != 0 || !strings.Contains(out, filepath.Join(root, reports.IndexFile)) || !strings.Contains(out, "shrink: "+filepath.Join(search, reports.ShrinkHTMLFile)) {
		t.Fatalf("index: exit %d, out %q, stderr %q", code, out, stderr)
	}
	b, err := os.ReadFile(filepath.Join(root, reports.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<a href="overlap/20250101T000000/report.html">`, `<a href="overlap.shrink/20250102T000000/shrink.html">`,
		"<strong>1 run</strong>", "The 1 trials of margin searches and shrinks are listed under their search",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	page, err := os.ReadFile(filepath.Join(search, reports.ShrinkHTMLFile))
	if err != nil || !strings.Contains(string(page), `href="candidates/c001/20250102T000001/report.html"`) || !strings.Contains(string(page), `href="../../overlap/20250101T000000/report.html"`) {
		t.Errorf("shrink.html does not link the replay and the stored run (%v)", err)
	}

	if err := os.WriteFile(filepath.Join(search, shrink.LogFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = locktest(t, "index", root)
	if code != 0 || !strings.Contains(stderr, "warning: ") || !strings.Contains(stderr, "shrink.json") || strings.Contains(out, "shrink: ") {
		t.Errorf("index over a broken shrink.json: exit %d, out %q, stderr %q; want 0 and a warning", code, out, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(root, reports.IndexFile)); !strings.Contains(string(b), "unreadable: overlap.shrink/20250102T000000/shrink.json") {
		t.Errorf("index.html does not list the broken shrink.json with its error")
	}

	if _, stderr, code := locktest(t, "index", filepath.Join(root, "nope")); code != 2 || !strings.Contains(stderr, "no such folder") {
		t.Errorf("index of a missing store: exit %d, stderr %q", code, stderr)
	}
}

// TestShrinkWritesItsPage: what a shrink does when it ends, however it
// ends: its page and the store's index, saying where; nothing of a search
// that has not written its log.
func TestShrinkWritesItsPage(t *testing.T) {
	root := t.TempDir()
	search := storeShrink(t, root, filepath.Join(root, "gone", "1"))
	var out bytes.Buffer
	writeShrinkPage(&out, search, root)
	if want := "page: " + filepath.Join(search, reports.ShrinkHTMLFile) + "\n"; out.String() != want {
		t.Errorf("said %q, want %q", out.String(), want)
	}
	for _, f := range []string{filepath.Join(search, reports.ShrinkHTMLFile), filepath.Join(root, reports.IndexFile)} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	out.Reset()
	empty := filepath.Join(root, "x.shrink", "20250103T000000")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	writeShrinkPage(&out, empty, root)
	if out.Len() != 0 {
		t.Errorf("a search without its log: said %q, want nothing", out.String())
	}
	if _, err := os.Stat(filepath.Join(empty, reports.ShrinkHTMLFile)); err == nil {
		t.Error("a page was written for a search without its log")
	}
}
