package reports

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/internal/stats"
)

// sampleTrackBoard is a scoreboard of three bugs: one reproduced on its
// bad version and held on its fixed one, one reproduced with no fixed
// version run, and one out of reach.
func sampleTrackBoard() Scoreboard {
	b := sampleBoard()
	b.Command = "locktest debate --scenarios scenarios/bugs.yaml --seeds 10"
	b.Bugs = []Bug{
		{ID: "etcd-22082", Title: "a retried Unlock deletes a newer lock of the same session", URL: "https://github.com/etcd-io/etcd/issues/22082",
			Reported: "2026-07-10", System: "etcd client/v3 concurrency.Mutex", Bad: "v3.7.3", Fixed: "PR #22115 in the adapter",
			Trigger: "a delete whose reply is lost | then retried", Story: "c0's retried release deleted c0's newer key and c1 took the lock."},
		{ID: "curator-696", Title: "LeaderLatch gives two leaders", URL: "https://issues.apache.org/jira/browse/CURATOR-696",
			Reported: "2023-10-01", System: "Apache Curator", Bad: "5.4.0 (Debian)", Fixed: "5.7.0, not installable here (no Maven Central)",
			Trigger: "a reconnect racing a node deletion"},
		{ID: "etcd-20418", Title: "stale reads after a process pause", URL: "https://github.com/etcd-io/etcd/issues/20418",
			Reported: "2025-08-01", System: "etcd server", Bad: "3.4.23", Fixed: "3.4.38", Trigger: "a pause of the leader",
			OutOfReach: "no lock observes a stale read: every lock write is a transaction"},
	}
	b.Rows = []ScoreRow{
		{Name: "etcd-22082-released", Bug: "etcd-22082", Expect: "violation", Runs: 10, Conclusive: 10, Violations: 7, Rate: 0.7, Lo: 0.3968, Hi: 0.8922,
			FirstViolation: 4.2, Verdict: Reproduced, Survival: NewSurvival([]stats.Observation{{Time: 4.2, Event: true}, {Time: 6.1, Event: true}, {Time: 20}})},
		{Name: "etcd-22082-fixed", Bug: "etcd-22082", Expect: "safe", Runs: 10, Conclusive: 10, Upper: 0.2589, FirstViolation: -1, Verdict: NotRefuted},
		{Name: "curator-696-leader-latch", Bug: "curator-696", Expect: "violation", Runs: 10, Conclusive: 10, Violations: 2, Rate: 0.2, Lo: 0.0567, Hi: 0.5098,
			FirstViolation: 12.5, Verdict: Reproduced, Survival: NewSurvival([]stats.Observation{{Time: 12.5, Event: true}})},
		{Name: "redis-gc-pause", Expect: "violation", Runs: 1, Conclusive: 1, Violations: 1, Verdict: Reproduced},
	}
	return b
}

func TestTrackRecordMarkdownGolden(t *testing.T) {
	md := RenderTrackRecordMarkdown(sampleTrackBoard())
	compareFile(t, filepath.Join("testdata", "track-record.md.golden"), md)
	if strings.Contains(string(md), "redis-gc-pause") {
		t.Error("the track record shows a scenario that names no bug")
	}
}

func TestTrackRecordVerdict(t *testing.T) {
	bug := Bug{ID: "x"}
	bad := ScoreRow{Expect: "violation", Verdict: Reproduced}
	for _, tc := range []struct {
		name string
		bug  Bug
		rows []ScoreRow
		want string
	}{
		{"reproduced and held", bug, []ScoreRow{bad, {Expect: "safe", Conclusive: 10, Verdict: NotRefuted}}, "reproduced, fix held"},
		{"fixed version violated too", bug, []ScoreRow{bad, {Expect: "safe", Conclusive: 10, Violations: 1, Verdict: Refuted}}, "reproduced, fix not held"},
		{"fixed version not run long enough", bug, []ScoreRow{bad, {Expect: "safe", Conclusive: 9, Verdict: NotRefuted}}, "reproduced, fix not held"},
		{"no fixed version", bug, []ScoreRow{bad}, "reproduced, not fixed here"},
		{"bad version held", bug, []ScoreRow{{Expect: "violation", Verdict: NotReproduced}}, "not reproduced"},
		{"out of reach", Bug{ID: "x", OutOfReach: "why"}, nil, "out of reach"},
	} {
		if got := TrackRecordVerdict(tc.bug, tc.rows); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBugCheck(t *testing.T) {
	ok := Bug{ID: "etcd-22082", Title: "t", URL: "u", Reported: "2026-01-01", System: "s", Bad: "b", Fixed: "f", Trigger: "t"}
	if err := ok.Check(); err != nil {
		t.Fatalf("a complete bug: %v", err)
	}
	for name, mutate := range map[string]func(*Bug){
		"no url":           func(b *Bug) { b.URL = "" },
		"no trigger":       func(b *Bug) { b.Trigger = " " },
		"upper-case id":    func(b *Bug) { b.ID = "ETCD-1" },
		"empty id part":    func(b *Bug) { b.ID = "etcd--1" },
		"no fixed, no why": func(b *Bug) { b.Fixed = "" },
		"no bad version":   func(b *Bug) { b.Bad = "" },
		"id with a slash":  func(b *Bug) { b.ID = "etcd/1" },
		"no reported date": func(b *Bug) { b.Reported = "" },
		"no system named":  func(b *Bug) { b.System = "" },
		"no title to read": func(b *Bug) { b.Title = "" },
	} {
		b := ok
		mutate(&b)
		if b.Check() == nil {
			t.Errorf("%s: Check accepted %+v", name, b)
		}
	}
}
