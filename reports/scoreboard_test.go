package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/schemacheck"
)

func sampleBoard() Scoreboard {
	return Scoreboard{
		Date: "2026-11-22 04:00 UTC", Commit: "abc1234", Machine: "2 cores, 24 GiB, linux/amd64", Seeds: 3,
		Elapsed: "1m30s", Command: "locktest debate --only 1,2,3", MaxRate: 0.15, Parallel: 2,
		Sources: []ScoreSource{{Name: "Kleppmann (2016)", Title: "Martin Kleppmann, How to do distributed locking", URL: "https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html"},
			{Name: "the lock-selection articles", Title: "digested in locktest's docs/locks.md"}},
		Versions: runstore.Versions{Locktest: "v0.2.0 abc1234", Servers: map[string]string{"redis": "7.0.15", "zookeeper": "3.8.4"},
			Clients: map[string]string{"github.com/redis/go-redis/v9": "v9.23.0"}},
		Rows: []ScoreRow{
			{Name: "redis-gc-pause", Claim: 1, Title: "A paused client writes late", Source: "Kleppmann (2016)", Expect: "violation",
				Predictions: []ScorePrediction{{"kleppmann", "violation — a lease cannot stop it", "yes"}, {"antirez", "violation | needs a check", "yes"}},
				Runs:        1, Conclusive: 1, Violations: 1, Rate: 1, Lo: 0.2065, Hi: 1, FirstViolation: 0.54,
				Observed: "violation", Verdict: Reproduced, Anomalies: map[string]int{"stale-write": 4, "lost-update": 3},
				Report: "../redis-gc-pause/20261122T040000/report.html", Command: "locktest run --impl redis-set-nx-px --seed 1", Seconds: 8.2,
				Survival: NewSurvival([]stats.Observation{{Time: 0.54, Event: true}})},
			{Name: "redlock-pause-before-validity", Claim: 3, Title: "Paused before the validity check", Source: "antirez (2016)", Expect: "safe",
				Predictions: []ScorePrediction{{"kleppmann", "violation", "no"}, {"antirez", "safe", "yes"}},
				Runs:        3, Conclusive: 3, Rate: 0, Lo: 0, Hi: 0.5615, Upper: 0.4742, FirstViolation: -1, Observed: "safe", Verdict: NotRefuted,
				Reason:  "no violation in 3 runs: the rate is at most 47% at 95% confidence, not below 15% (16 runs without one would show that)",
				Command: "locktest run --impl redlock --seed 1", Seconds: 24,
				Survival: NewSurvival([]stats.Observation{{Time: 20}, {Time: 20}, {Time: 20}})},
			{Name: "redlock-clock-jump", Claim: 2, Title: "C's clock jumps", Source: "Kleppmann (2016)", Expect: "violation",
				Predictions: []ScorePrediction{{"kleppmann", "violation", ""}},
				Runs:        3, FirstViolation: -1, Verdict: Inconclusive, Reason: "seed 1: fault partition unavailable: not root",
				Command: "locktest run --impl redlock --seed 1", Seconds: 3},
			{Name: "zk-pause-fenced", Claim: 12, Title: "fenced", Source: "Kleppmann (2016)", Expect: "safe",
				Predictions: []ScorePrediction{{"kleppmann", "safe", "no"}},
				Runs:        3, Conclusive: 3, Violations: 1, Rate: 1.0 / 3, Lo: 0.0615, Hi: 0.7923, FirstViolation: 2.25, Observed: "violation",
				Verdict: Refuted, Reason: "1 of 3 runs showed a violation", Command: "locktest run --impl zk-recipe --seed 2", Seconds: 30,
				Survival: NewSurvival([]stats.Observation{{Time: 10}, {Time: 2.25, Event: true}, {Time: 10}})},
		},
	}
}

func TestScoreboardMarkdownGolden(t *testing.T) {
	compareFile(t, filepath.Join("testdata", "scoreboard.md.golden"), RenderScoreboardMarkdown(sampleBoard(), true))
	// Without links (docs/findings.md) no run report is named.
	if bare := RenderScoreboardMarkdown(sampleBoard(), false); bytes.Contains(bare, []byte("report.html")) {
		t.Error("the link-free Markdown links to a run report")
	}
}

func TestScoreboardHTML(t *testing.T) {
	page, err := RenderScoreboardHTML(sampleBoard())
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, want := range []string{
		`<td class="verdict-reproduced">reproduced`, `<td class="verdict-inconclusive">inconclusive<br><span class="small">seed 1: fault partition unavailable: not root`,
		`<td class="verdict-refuted">refuted`, `<td class="verdict-not-refuted">not refuted<br><span class="small">no violation in 3 runs: the rate is at most 47%`,
		`Versions: redis 7.0.15, zookeeper 3.8.4; github.com/redis/go-redis/v9 v9.23.0; locktest v0.2.0 abc1234.`,
		`below 15%`, `href="../redis-gc-pause/20261122T040000/report.html"`,
		`<li>Kleppmann (2016): <a href="https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html">Martin Kleppmann, How to do distributed locking</a></li>`,
		`1/3 (33%, 95% CI 6%–79%)`, `id="redlock-clock-jump"`, `make repro-zk-pause-fenced`,
		`<td class="num">not reached (over half the runs outlived 10 s)</td>`,
		`Time to failure: no violation in 1.0 run-minutes under these faults: fewer than 180 per hour at 95%.`,
		`<svg class="survival"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("scoreboard.html lacks %q", want)
		}
	}
	// Links to the sources are fine; nothing may be loaded from elsewhere.
	if strings.Contains(s, `src="http`) || strings.Contains(s, "url(http") || strings.Contains(s, "@import") || strings.Contains(s, "<script src") || strings.Contains(s, `<link `) {
		t.Error("scoreboard.html loads something from elsewhere")
	}
}

func TestJUnit(t *testing.T) {
	x, err := RenderJUnit(sampleBoard())
	if err != nil {
		t.Fatal(err)
	}
	var suite junitSuite
	if err := xml.Unmarshal(x, &suite); err != nil {
		t.Fatalf("%v\n%s", err, x)
	}
	if suite.Tests != 4 || suite.Failures != 1 || suite.Skipped != 2 || len(suite.Cases) != 4 {
		t.Fatalf("suite %d tests %d failures %d skipped:\n%s", suite.Tests, suite.Failures, suite.Skipped, x)
	}
	byName := map[string]junitCase{}
	for _, c := range suite.Cases {
		byName[c.Name] = c
	}
	if c := byName["zk-pause-fenced"]; c.Failure == nil || !strings.Contains(c.Failure.Message, "expected safe, observed violation") {
		t.Errorf("refuted case: %+v", c)
	}
	if c := byName["redlock-clock-jump"]; c.Skipped == nil || !strings.Contains(c.Skipped.Message, "not root") {
		t.Errorf("inconclusive case: %+v", c)
	}
	if c := byName["redlock-pause-before-validity"]; c.Skipped == nil || !strings.HasPrefix(c.Skipped.Message, "not refuted: ") {
		t.Errorf("not refuted case: %+v", c)
	}
	if c := byName["redis-gc-pause"]; c.Failure != nil || c.Skipped != nil || c.Classname != "locktest.claim1" || c.Time != "8.200" {
		t.Errorf("reproduced case: %+v", c)
	}
}

func TestCompareScoreboards(t *testing.T) {
	row := func(name string, k, n int) ScoreRow {
		r := ScoreRow{Name: name, Conclusive: n, Violations: k, Verdict: "x"}
		if n > 0 {
			r.Rate, r.Lo, r.Hi = float64(k)/float64(n), 0, 1
			switch {
			case k == 0:
				r.Hi = 0.2
			case k == n:
				r.Lo = 0.8
			}
		}
		return r
	}
	here := Scoreboard{Parallel: 4, Rows: []ScoreRow{row("both-safe", 0, 20), row("both-violate", 20, 20), row("flipped", 0, 20),
		row("apart", 20, 20), row("empty", 0, 0), row("only-here", 1, 3)}}
	there := Scoreboard{Command: "locktest debate --parallel 1", Parallel: 1, Rows: []ScoreRow{row("both-safe", 0, 5), row("both-violate", 5, 5),
		row("flipped", 2, 5), row("apart", 1, 5), row("empty", 0, 5)}}
	there.Rows[3].Lo, there.Rows[3].Hi = 0.04, 0.6 // below here's 80%
	c := CompareScoreboards(here, there)
	want := map[string]string{"both-safe": "", "both-violate": "", "flipped": "one side saw a violation, the other none",
		"apart": "the 95% intervals do not overlap", "empty": "no conclusive run on one side"}
	if len(c.Rows) != len(want) || c.Disagreements() != 3 || len(c.Missing) != 1 || c.Missing[0] != "only-here" || c.Parallel != 1 {
		t.Fatalf("comparison %+v", c)
	}
	for _, r := range c.Rows {
		if r.Why != want[r.Name] || r.Agree != (want[r.Name] == "") {
			t.Errorf("%s: agree %v, why %q; want %q", r.Name, r.Agree, r.Why, want[r.Name])
		}
	}
	here.Compared = &c
	md := string(RenderScoreboardMarkdown(here, false))
	for _, w := range []string{"## Compared with another run of the same scenarios", "2 of 5 scenarios agree", "| `flipped` |", "**no**: the 95% intervals do not overlap", "Not in the other run: only-here."} {
		if !strings.Contains(md, w) {
			t.Errorf("the Markdown lacks %q", w)
		}
	}
}

// TestScoreboardJSONValidates: a scoreboard with survival curves, a row
// without one, and runs with their workload times validates against
// docs/schemas/scoreboard.schema.json at its version; a curve that lost
// its observations does not.
func TestScoreboardJSONValidates(t *testing.T) {
	b := sampleBoard()
	b.SchemaVersion = ScoreboardSchemaVersion
	b.Rows[0].Seeds = []ScoreRun{{Seed: 1, Outcome: "violation", FirstViolation: 0.54, Workload: 1.2, Seconds: 8.2, Command: "x", Faults: 1, Effective: 1}}
	doc, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemacheck.Validate("scoreboard", doc); err != nil {
		t.Fatal(err)
	}
	b.Rows[0].Survival = &Survival{Runs: 1}
	doc, _ = json.Marshal(b)
	if err := schemacheck.Validate("scoreboard", doc); err == nil {
		t.Error("a survival without observations validated")
	}
}
