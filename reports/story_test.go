package reports

import (
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// TestStory tells the story of hand-built histories: the faults that took
// effect before the anomaly was proven, then its explanation.
func TestStory(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	tok := func(n uint64) *uint64 { return &n }
	base := history.History{
		{Index: 0, Type: history.Invoke, Process: 0, F: "acquire", Time: ms(100), Value: history.Value{Lock: "l"}},
		{Index: 1, Type: history.OK, Process: 0, F: "acquire", Time: ms(110), Value: history.Value{Lock: "l", Token: tok(17)}},
		{Index: 2, Type: history.Invoke, Process: history.NemesisProcess, F: "pause-client", Time: ms(300)},
		{Index: 3, Type: history.OK, Process: history.NemesisProcess, F: "pause-client", Time: ms(310),
			Value: history.Value{Targets: []string{"p0"}, Duration: int64(1200 * time.Millisecond), Point: "before-write"}},
		{Index: 4, Type: history.Invoke, Process: history.NemesisProcess, F: "kill-node", Time: ms(400)},
		{Index: 5, Type: history.Fail, Process: history.NemesisProcess, F: "kill-node", Time: ms(410), Error: "not applied"},
		{Index: 6, Type: history.Invoke, Process: 1, F: "acquire", Time: ms(800), Value: history.Value{Lock: "l"}},
		{Index: 7, Type: history.OK, Process: 1, F: "acquire", Time: ms(820), Value: history.Value{Lock: "l", Token: tok(18)}},
		{Index: 8, Type: history.Invoke, Process: history.NemesisProcess, F: "resume-client", Time: ms(1510)},
		{Index: 9, Type: history.OK, Process: history.NemesisProcess, F: "resume-client", Time: ms(1515)},
		{Index: 10, Type: history.Invoke, Process: history.NemesisProcess, F: "kill-node", Time: ms(2000)},
		{Index: 11, Type: history.OK, Process: history.NemesisProcess, F: "kill-node", Time: ms(2010), Value: history.Value{Targets: []string{"n2"}, Duration: int64(time.Second)}},
	}
	a := checker.Anomaly{Kind: "overlapping-holds", Ops: []int{1, 7}, Explanation: "process 1 was granted token 18 of lock \"l\" at 0.820s while process 0 held token 17"}
	for _, tc := range []struct {
		name string
		h    history.History
		a    checker.Anomaly
		want string
	}{
		{"a pause, a failed kill and a kill after the proof", base, a,
			"p0 paused for 1.2s at 0.310s, at its before-write point; then process 1 was granted token 18 of lock \"l\" at 0.820s while process 0 held token 17."},
		{"no fault before the proof", base[:2], checker.Anomaly{Kind: "k", Ops: []int{1}, Explanation: "it broke"}, "it broke"},
		{"a node fault", append(base[:1:1], base[10], base[11]), checker.Anomaly{Kind: "k", Ops: []int{2}, Explanation: "it broke"},
			"kill-node hit n2 for 1s at 2.010s; then it broke."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Story(history.NewTable(tc.h), tc.a); got != tc.want {
				t.Errorf("story:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestShrunkReport: the report of a replay of a shrunk schedule says, at
// the top, what it was shrunk from, how often it failed again, and the
// story; other reports say nothing of it.
func TestShrunkReport(t *testing.T) {
	h := reportHistory()
	r := goldenResults(h)
	if strings.Contains(render(t, r, h), `class="shrunk"`) {
		t.Error("a run that was not shrunk is marked shrunk")
	}
	r.Run.Shrunk = &runstore.Shrunk{From: "store/x/20261127T100000", Search: "store/x.shrink/20261127T100500", Checker: "mutual-exclusion",
		Kind: "overlapping-holds", Before: runstore.ShrinkSize{Faults: 23, Time: "30s", Clients: 8, Locks: 1},
		After: runstore.ShrinkSize{Faults: 1, Time: "4s", Clients: 2, Locks: 1}, Replays: 61, Need: 2, OfReplays: 3, Reproduced: 3, Confirmations: 3,
		Story: "p1 paused for 1.2s at 0.310s; then it broke."}
	out := render(t, r, h)
	for _, want := range []string{
		"shrunk from store/x/20261127T100000: 23 → 1 faults, 30s → 4s, 8 → 2 clients, 61 replays.",
		"(mutual-exclusion: overlapping-holds) in 2 of 3 replays; after the search, this schedule failed so in 3 of 3 replays",
		`<p class="story">p1 paused for 1.2s at 0.310s; then it broke.</p>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if i, j := strings.Index(out, `class="shrunk"`), strings.Index(out, "<h2>Verdicts</h2>"); i < 0 || i > j {
		t.Error("the shrink is not said before the verdicts")
	}
}
