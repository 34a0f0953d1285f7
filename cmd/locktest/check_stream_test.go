package main

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/genhist"
)

// TestCheckStreamDecidesAsTheWholeHistory: `check --stream` of a history
// of 250,000 ops of leases, valid and with overlaps, decides as `check`,
// which holds it: the same exit, verdicts and stats in results.json. Its
// report draws the first ops and says so. A history of session locks
// cannot be streamed, and --stream says why (exit 2).
func TestCheckStreamDecidesAsTheWholeHistory(t *testing.T) {
	for _, tt := range []struct {
		name  string
		every int
		code  int
	}{{"valid", 0, 0}, {"overlapping", 5000, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := history.WriteFile(filepath.Join(dir, runstore.HistoryFile), genhist.Overlapping(1, 250_000, 8, tt.every)); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := locktest(t, "check", dir)
			want, err := runstore.ReadResults(dir)
			if code != tt.code || err != nil {
				t.Fatalf("check: exit %d, %v, %s", code, err, stderr)
			}
			out, stderr, code := locktest(t, "check", "--stream", dir)
			got, err := runstore.ReadResults(dir)
			if code != tt.code || err != nil || !strings.Contains(out, "checking them as a stream") {
				t.Fatalf("check --stream: exit %d, %v, %s%s", code, err, out, stderr)
			}
			if got.Valid != want.Valid || !maps.Equal(got.Stats, want.Stats) || len(got.Checkers) != len(want.Checkers) {
				t.Fatalf("stream: %s %v (%d checkers); whole: %s %v (%d checkers)", got.Valid, got.Stats, len(got.Checkers), want.Valid, want.Stats, len(want.Checkers))
			}
			for i, g := range got.Checkers {
				w := want.Checkers[i]
				if g.Checker != w.Checker || g.Valid != w.Valid || !maps.Equal(g.Stats, w.Stats) || len(g.Anomalies) == 0 != (len(w.Anomalies) == 0) {
					t.Errorf("%s: %s, %d anomalies, %v; whole %s: %s, %d anomalies, %v", g.Checker, g.Valid, len(g.Anomalies), g.Stats,
						w.Checker, w.Valid, len(w.Anomalies), w.Stats)
				}
			}
			b, err := os.ReadFile(filepath.Join(dir, runstore.ReportFile))
			if err != nil || !strings.Contains(string(b), "This history has 250") || !strings.Contains(string(b), "show its first 200000") {
				t.Errorf("the report does not say it draws the first ops: %v", err)
			}
		})
	}
	dir := writeRun(t, `{"index":0,"type":"invoke","process":0,"f":"acquire","time":10,"value":{"lock":"l"}}
{"index":1,"type":"ok","process":0,"f":"acquire","time":20,"value":{"lock":"l"}}
`)
	if _, stderr, code := locktest(t, "check", "--stream", dir); code != 2 || !strings.Contains(stderr, "cannot be checked as a stream") || !strings.Contains(stderr, "not leases") {
		t.Errorf("check --stream of session locks: exit %d, %s", code, stderr)
	}
}
