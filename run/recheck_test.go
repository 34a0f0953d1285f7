package run

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/genhist"
)

// golden returns a run folder that holds, as its history, the checker's
// golden history file (checker/testdata) and nothing else.
func golden(t *testing.T, file string) string {
	t.Helper()
	h, err := history.ReadFile(filepath.Join("..", "checker", "testdata", file))
	dir := t.TempDir()
	if err == nil {
		err = history.WriteFile(filepath.Join(dir, runstore.HistoryFile), h)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRecheckStreamDecidesAsTheWholeHistory: the check of a history of
// 250,000 ops of leases, valid and with overlaps, as a stream decides as
// the check that holds it: the same verdicts and stats in results.json.
// Its report draws the first ops and says so. A history of session locks
// cannot be streamed, and the check says why.
func TestRecheckStreamDecidesAsTheWholeHistory(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		every int
	}{{"valid", 0}, {"overlapping", 5000}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := history.WriteFile(filepath.Join(dir, runstore.HistoryFile), genhist.Overlapping(1, 250_000, 8, tt.every)); err != nil {
				t.Fatal(err)
			}
			_, want, err := Recheck(ctx, dir, false, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var said strings.Builder
			_, got, err := Recheck(ctx, dir, true, &said)
			if err != nil || !strings.Contains(said.String(), "checking them as a stream") {
				t.Fatalf("stream: %v, %s", err, said.String())
			}
			if stored, err := runstore.ReadResults(dir); err != nil || stored.Valid != got.Valid {
				t.Fatalf("results.json: %v, %v; the check %v", stored.Valid, err, got.Valid)
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
	dir := golden(t, "lost-update.jsonl") // session locks
	var ns NotStreamable
	if _, _, err := Recheck(ctx, dir, true, io.Discard); !errors.As(err, &ns) || !strings.Contains(err.Error(), "not leases") {
		t.Errorf("stream of session locks: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, runstore.ResultsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused check wrote results.json: %v", err)
	}
}

// TestRecheckOfAnUnfinishedRunIsNeverValid checks a run whose driver was
// killed before it checked: its results.json still says the run did not
// finish, as the driver writes it at the start. The check of its history
// prefix is unknown when the prefix is clean and invalid when it holds a
// violation, never valid; a second check says the same, and a run whose
// results are those of a finished run is still valid. The problems of
// results.json are read without its checkers' results, which may be
// large, or, here, not even JSON.
func TestRecheckOfAnUnfinishedRunIsNeverValid(t *testing.T) {
	for _, tt := range []struct {
		name, history string
		unfinished    bool
		verdict       checker.Verdict
	}{
		{"clean prefix", "clean.jsonl", true, checker.Unknown},
		{"prefix with an overlap", "overlapping-holders.jsonl", true, checker.Invalid},
		{"finished clean run", "clean.jsonl", false, checker.Valid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := golden(t, tt.history)
			res := runstore.Results{Run: runstore.RunInfo{Name: "killed", Impl: "redis-set-nx-px", Mode: "none", Expect: "valid"},
				Valid: checker.Unknown}
			if tt.unfinished {
				res.Problems = []string{runstore.Unfinished}
			}
			if err := runstore.WriteResults(dir, res); err != nil {
				t.Fatal(err)
			}
			for i := range 2 { // a second check finds the problem in what the first wrote
				if _, _, err := Recheck(context.Background(), dir, false, io.Discard); err != nil {
					t.Fatalf("check %d: %v", i+1, err)
				}
				r, err := runstore.ReadResults(dir)
				if err != nil || r.Valid != tt.verdict {
					t.Fatalf("check %d: results.json says %q (%v), want %q", i+1, r.Valid, err, tt.verdict)
				}
				said := slices.Contains(r.Problems, runstore.UnfinishedChecked)
				if said != tt.unfinished || slices.Contains(r.Problems, runstore.Unfinished) ||
					strings.Count(strings.Join(r.Run.Errors, "\n"), runstore.UnfinishedChecked) != map[bool]int{true: 1}[tt.unfinished] {
					t.Fatalf("check %d: problems %q, run errors %q", i+1, r.Problems, r.Run.Errors)
				}
			}
		})
	}
	t.Run("checkers not read", func(t *testing.T) {
		dir := golden(t, "clean.jsonl")
		text := `{"run":{"name":"killed","resource_mode":"none","expect":"valid"},"valid":"unknown","problems":["` +
			runstore.Unfinished + `"],"checkers":[{{{`
		if err := os.WriteFile(filepath.Join(dir, runstore.ResultsFile), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, res, err := Recheck(context.Background(), dir, false, io.Discard); err != nil || res.Valid != checker.Unknown {
			t.Fatalf("%v, %v; want unknown", res.Valid, err)
		}
	})
}
