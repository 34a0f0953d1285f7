package scenarios

import (
	"bytes"
	"testing"
	"time"

	"github.com/locktest/locktest/reports"
)

// TestText: the catalogue and the scoreboard as the debate prints them,
// one aligned line per scenario ("none" for a scenario without a
// resource mode or faults).
func TestText(t *testing.T) {
	var b bytes.Buffer
	WriteCatalogue(&b, []Scenario{
		{Claim: 1, Name: "redis-gc-pause", Expect: "violation", Settings: map[string]string{"impl": "redis-set-nx-px", "faults": "pause-client"}},
		{Claim: 2, Name: "etcd-fenced", Expect: "safe", Settings: map[string]string{"impl": "etcd-mutex", "faults": "pause-client,kill-node", "resource": "fenced"}},
	})
	want := `claim  scenario        impl             faults                  resource  tests for
1      redis-gc-pause  redis-set-nx-px  pause-client            none      violation
2      etcd-fenced     etcd-mutex       pause-client,kill-node  fenced    safe
`
	if b.String() != want {
		t.Errorf("WriteCatalogue:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	WriteBoardText(&b, "out", reports.Scoreboard{Rows: []reports.ScoreRow{
		{Claim: 1, Name: "redis-gc-pause", Expect: "violation", Verdict: reports.Reproduced, Conclusive: 3, Violations: 3, Rate: 1, Lo: 0.44, Hi: 1},
		{Claim: 2, Name: "etcd-fenced", Expect: "safe", Verdict: reports.Inconclusive},
	}})
	want = `claim  scenario        tests for  violations                   verdict
1      redis-gc-pause  violation  3/3 (100%, 95% CI 44%–100%)  reproduced
2      etcd-fenced     safe       no conclusive run            inconclusive
scoreboard: out/scoreboard.html
`
	if b.String() != want {
		t.Errorf("WriteBoardText:\n%s\nwant\n%s", b.String(), want)
	}
}

// TestProgress: a debate's progress line per finished run says what it
// showed, how long it took, and, while runs are left, about how long they
// take.
func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := Progress(&b, time.Now())
	p(Scenario{Name: "redis-gc-pause"}, RunResult{Seed: 2, Outcome: "violation", Kinds: map[string]int{"overlapping-holds": 1}, Seconds: 12.4}, 0)
	p(Scenario{Name: "etcd-fenced"}, RunResult{Seed: 3, Reason: "no fault applied", Seconds: 9}, 0)
	want := "[1 done, 0 left] redis-gc-pause seed 2: violation (" + reports.KindsText(map[string]int{"overlapping-holds": 1}) + "), 12s\n" +
		"[2 done, 0 left] etcd-fenced seed 3: inconclusive: no fault applied, 9s\n"
	if b.String() != want {
		t.Errorf("progress:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	Progress(&b, time.Now())(Scenario{Name: "x"}, RunResult{Outcome: "safe"}, 4)
	if got := b.String(); got != "[1 done, 4 left, about 0s to go] x seed 0: safe, 0s\n" {
		t.Errorf("progress with runs left: %q", got)
	}
}
