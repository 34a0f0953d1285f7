package scenarios

import (
	"bytes"
	"testing"

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
