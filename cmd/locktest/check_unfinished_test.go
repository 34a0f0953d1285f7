package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/runstore"
)

// cleanPrefix is a history prefix with no violation: one hold, released.
const cleanPrefix = `{"index":0,"type":"invoke","process":0,"f":"acquire","time":10,"value":{"lock":"l"}}
{"index":1,"type":"ok","process":0,"f":"acquire","time":20,"value":{"lock":"l","token":1,"lock_value":"a","valid_until":1000}}
{"index":2,"type":"invoke","process":0,"f":"release","time":30,"value":{"lock":"l","lock_value":"a"}}
{"index":3,"type":"ok","process":0,"f":"release","time":40,"value":{"lock":"l","lock_value":"a","removed":"a"}}
`

// TestCheckOfAnUnfinishedRunReadsNoAnomalies checks a run whose driver was
// killed before it checked (its results.json still says the run did not
// finish, and its checkers' results, which may be large, are not even
// JSON here): the check of its clean history prefix exits 3 (unknown) and
// says the run did not finish. (run.TestRecheckOfAnUnfinishedRunIsNeverValid
// holds the verdicts and problems a first and a second check store.)
func TestCheckOfAnUnfinishedRunReadsNoAnomalies(t *testing.T) {
	dir := writeRun(t, cleanPrefix)
	text := `{"run":{"name":"killed","resource_mode":"none","expect":"valid"},"valid":"unknown","problems":["` +
		runstore.Unfinished + `"],"checkers":[{{{`
	if err := os.WriteFile(filepath.Join(dir, runstore.ResultsFile), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := locktest(t, "check", dir); code != 3 || !strings.Contains(stdout, "did not finish") {
		t.Fatalf("exit %d, want 3\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}
