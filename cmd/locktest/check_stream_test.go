package main

import (
	"strings"
	"testing"
)

// TestCheckStreamRefusesWhatCannotStream: `check --stream` of a history of
// session locks says why it cannot be streamed, as bad usage (exit 2).
// (run.TestRecheckStreamDecidesAsTheWholeHistory holds the stream's
// verdicts to the whole history's.)
func TestCheckStreamRefusesWhatCannotStream(t *testing.T) {
	dir := writeRun(t, `{"index":0,"type":"invoke","process":0,"f":"acquire","time":10,"value":{"lock":"l"}}
{"index":1,"type":"ok","process":0,"f":"acquire","time":20,"value":{"lock":"l"}}
`)
	if _, stderr, code := locktest(t, "check", "--stream", dir); code != 2 || !strings.Contains(stderr, "--stream: ") ||
		!strings.Contains(stderr, "cannot be checked as a stream") || !strings.Contains(stderr, "not leases") {
		t.Errorf("check --stream of session locks: exit %d, %s", code, stderr)
	}
}
