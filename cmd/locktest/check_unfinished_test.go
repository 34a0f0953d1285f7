package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/runstore"
)

// cleanPrefix is a history prefix with no violation: one hold, released.
const cleanPrefix = `{"index":0,"type":"invoke","process":0,"f":"acquire","time":10,"value":{"lock":"l"}}
{"index":1,"type":"ok","process":0,"f":"acquire","time":20,"value":{"lock":"l","token":1,"lock_value":"a","valid_until":1000}}
{"index":2,"type":"invoke","process":0,"f":"release","time":30,"value":{"lock":"l","lock_value":"a"}}
{"index":3,"type":"ok","process":0,"f":"release","time":40,"value":{"lock":"l","lock_value":"a","removed":"a"}}
`

// TestCheckOfAnUnfinishedRunIsNeverValid checks a run whose driver was
// killed before it checked: its results.json still says the run did not
// finish, as the driver writes it at the start. The check of its history
// prefix exits 3 (unknown) when the prefix is clean and 1 (invalid) when
// it holds a violation, and says the run did not finish; a run whose
// results are those of a finished run exits 0.
// (run.TestRecheckOfAnUnfinishedRunIsNeverValid holds the verdicts and
// problems a first and a second check store.)
func TestCheckOfAnUnfinishedRunIsNeverValid(t *testing.T) {
	for _, tt := range []struct {
		name, history string
		unfinished    bool
		code          int
	}{
		{"clean prefix", cleanPrefix, true, 3},
		{"prefix with an overlap", goodHistory, true, 1},
		{"finished clean run", cleanPrefix, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeRun(t, tt.history)
			res := runstore.Results{Run: runstore.RunInfo{Name: "killed", Impl: "redis-set-nx-px", Mode: "none", Expect: "valid"},
				Valid: checker.Unknown}
			if tt.unfinished {
				res.Problems = []string{runstore.Unfinished}
			}
			if err := runstore.WriteResults(dir, res); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := locktest(t, "check", dir)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tt.code, stdout, stderr)
			}
			if tt.unfinished != strings.Contains(stdout, "did not finish") {
				t.Errorf("stdout says the run did not finish: %v, want %v: %s", !tt.unfinished, tt.unfinished, stdout)
			}
		})
	}
}

// TestCheckOfAnUnfinishedRunReadsNoAnomalies checks that the problems of a
// results.json are read without its checkers' results, which may be large:
// here they are not even JSON.
func TestCheckOfAnUnfinishedRunReadsNoAnomalies(t *testing.T) {
	dir := writeRun(t, cleanPrefix)
	text := `{"run":{"name":"killed","resource_mode":"none","expect":"valid"},"valid":"unknown","problems":["` +
		runstore.Unfinished + `"],"checkers":[{{{`
	if err := os.WriteFile(filepath.Join(dir, runstore.ResultsFile), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := locktest(t, "check", dir); code != 3 {
		t.Fatalf("exit %d, want 3\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}
