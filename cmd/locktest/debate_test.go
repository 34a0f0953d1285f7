package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/scenarios"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
)

func TestDebateList(t *testing.T) {
	out, errOut, code := locktest(t, "debate", "--list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"redis-gc-pause", "redlock-clock-jump", "partition+clock-bump", "etcd-pause-guarded", "zk-pause-fenced"} {
		if !strings.Contains(out, want) {
			t.Errorf("--list lacks %s:\n%s", want, out)
		}
	}
	out, _, _ = locktest(t, "debate", "--list", "--only", "7")
	if n := strings.Count(out, "\n"); n != 4 { // header and the three etcd scenarios
		t.Errorf("--only 7 listed %d lines:\n%s", n, out)
	}
}

// Bad input to debate is one line on stderr and exit code 2.
func TestDebateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("scenarios:\n  - name: x\n    colour: red\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"debate", "--only", "no-such-claim"}, `no scenario "no-such-claim"`},
		{[]string{"debate", "--scenarios", bad}, "bad.yaml: line 3: field colour not found"},
		{[]string{"debate", "--scenarios", filepath.Join(dir, "missing.yaml")}, "missing.yaml: no such file"},
		{[]string{"debate", "--seeds", "0", "--only", "1"}, "--seeds must be at least 1"},
	} {
		_, errOut, code := locktest(t, tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tt.args, code, errOut, tt.want)
		}
	}
}

// naiveDelScenario writes, into dir, a user's scenario file of one
// scenario: plain DEL under a client pause, whose runs last runTime; it
// returns the file's path.
func naiveDelScenario(t *testing.T, dir, runTime string) string {
	t.Helper()
	file := filepath.Join(dir, "mine.yaml")
	mine := `scenarios:
  - name: naive-del-pause
    claim: 11
    title: a slow holder deletes the next holder's lock
    source: my own review
    predictions: {me: violation — plain DEL is unsafe}
    expect: violation
    anomalies: [foreign-release]
    impl: redis-naive-del
    faults: [pause-client]
    ttl: 300ms
    pause: 1200ms
    interval: 500ms
    time: ` + runTime + "\n"
	if err := os.WriteFile(file, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// A user's scenario file runs for real: the scoreboard, its Markdown and
// the JUnit XML are written, and the exit code says it reproduced.
func TestDebateRunsAUserScenario(t *testing.T) {
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	file := naiveDelScenario(t, dir, "5s")
	out := filepath.Join(dir, "board")
	junit := filepath.Join(dir, "junit.xml")
	stdout, errOut, code := locktest(t, "debate", "--scenarios", file, "--seeds", "3", "--until-reproduced",
		"--store", filepath.Join(dir, "store"), "--out", out, "--junit", junit, "-q")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errOut)
	}
	if !strings.Contains(stdout, "naive-del-pause") || !strings.Contains(stdout, "reproduced") {
		t.Errorf("summary:\n%s", stdout)
	}
	md, err := os.ReadFile(filepath.Join(out, "scoreboard.md"))
	if err != nil || !strings.Contains(string(md), "Me predicts: violation") || !strings.Contains(string(md), "report.html") {
		t.Errorf("scoreboard.md (%v):\n%s", err, md)
	}
	page, err := os.ReadFile(filepath.Join(out, "scoreboard.html"))
	if err != nil || !strings.Contains(string(page), "naive-del-pause") || strings.Contains(string(page), "http://") || strings.Contains(string(page), "https://") {
		t.Errorf("scoreboard.html (%v) missing the scenario or not self-contained", err)
	}
	x, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name string `xml:"name,attr"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(x, &suite); err != nil || suite.Tests != 1 || suite.Failures != 0 || suite.Cases[0].Name != "naive-del-pause" {
		t.Errorf("junit (%v): %+v\n%s", err, suite, x)
	}
}

// TestDebateDefaultsToSeedsThatDecide: without --seeds, a debate runs the
// fewest seeds that can show a safe scenario held at --max-rate (here 90%,
// which one run without a violation shows), not a fixed count that leaves
// every safe scenario "not refuted".
func TestDebateDefaultsToSeedsThatDecide(t *testing.T) {
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	file := naiveDelScenario(t, dir, "5s")
	want := stats.SeedsToHold(0.9)
	stdout, errOut, code := locktest(t, "debate", "--scenarios", file, "--max-rate", "90%", "--store", filepath.Join(dir, "store"),
		"--out", filepath.Join(dir, "board"), "--json", filepath.Join(dir, "board.json"), "-q=false")
	// The verdict is not what this tests: one run of the scenario
	// reproduces its foreign release (exit 0) or, under load, shows only
	// the stale write (exit 1).
	if code != 0 && code != 1 || !strings.Contains(errOut, fmt.Sprintf("up to %d seeds each", want)) {
		t.Fatalf("exit %d, want 0 or 1 with %d seeds\n%s\n%s", code, want, stdout, errOut)
	}
	var board reports.Scoreboard
	if err := runstore.ReadJSON(filepath.Join(dir, "board.json"), &board); err != nil {
		t.Fatal(err)
	}
	if len(board.Rows) != 1 || board.Rows[0].Runs != want {
		t.Errorf("rows %+v, want one of %d runs", board.Rows, want)
	}
	// The help names the default's figure.
	help, _, _ := locktest(t, "debate", "--help")
	if n := stats.SeedsToHold(scenarios.DefaultMaxRate); !strings.Contains(help, fmt.Sprintf("%d at 15%%", n)) {
		t.Errorf("--seeds' help does not say %d at 15%%:\n%s", n, help)
	}
}

// Two shards of a debate, each in its own store, joined by merge, make one
// scoreboard of every seed, scored as one debate; a seed in two shards is
// refused.
func TestDebateShardsMerge(t *testing.T) {
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	file := naiveDelScenario(t, dir, "4s")
	for _, shard := range []string{"1/2", "2/2"} {
		n := shard[:1]
		stdout, errOut, code := locktest(t, "debate", "--scenarios", file, "--seeds", "2", "--shard", shard,
			"--store", filepath.Join(dir, "store"+n), "--out", filepath.Join(dir, "shard"+n))
		if code == 2 || !strings.Contains(errOut, "naive-del-pause seed "+n+": ") {
			t.Fatalf("shard %s: exit %d, want one progress line for seed %s\n%s\n%s", shard, code, n, stdout, errOut)
		}
	}
	merged := filepath.Join(dir, "merged.json")
	stdout, errOut, code := locktest(t, "merge", "--out", filepath.Join(dir, "merged"), "--json", merged,
		filepath.Join(dir, "shard1"), filepath.Join(dir, "shard2", reports.ScoreboardJSONFile))
	var b reports.Scoreboard
	if err := runstore.ReadJSON(merged, &b); err != nil {
		t.Fatalf("merge: exit %d, %v\n%s\n%s", code, err, stdout, errOut)
	}
	if len(b.Rows) != 1 || len(b.Rows[0].Seeds) != 2 || b.Rows[0].Seeds[0].Seed != 1 || b.Rows[0].Seeds[1].Seed != 2 || b.Rows[0].Runs != 2 {
		t.Fatalf("merged scoreboard: %+v", b)
	}
	row := b.Rows[0]
	want := map[string]int{reports.Reproduced: 0, reports.NotReproduced: 1, reports.Inconclusive: 3}[row.Verdict]
	if code != want || b.SchemaVersion != reports.ScoreboardSchemaVersion || b.Shard != "" {
		t.Errorf("merged %s: exit %d, want %d; schema %d, shard %q\n%s", row.Verdict, code, want, b.SchemaVersion, b.Shard, errOut)
	}
	if !strings.Contains(row.Seeds[0].Command, "--seed 1") || !strings.Contains(row.Seeds[1].Command, "--seed 2") || row.Seeds[1].Dir == "" {
		t.Errorf("seeds: %+v", row.Seeds)
	}
	// What a shard and the merge wrote is what docs/schemas says.
	for _, f := range []string{merged, filepath.Join(dir, "shard1", reports.ScoreboardJSONFile), filepath.Join(dir, "merged", reports.ScoreboardJSONFile)} {
		if err := schemacheck.ValidateFile("scoreboard", f); err != nil {
			t.Error(err)
		}
	}
	// Set beside itself, the merged board agrees in every scenario.
	stdout, errOut, code = locktest(t, "merge", "--out", filepath.Join(dir, "compared"), "--compare", merged, filepath.Join(dir, "merged"))
	if code != want || !strings.Contains(stdout, "1 of 1 scenarios agree") {
		t.Errorf("merge --compare: exit %d, want %d\n%s\n%s", code, want, stdout, errOut)
	}
	if err := schemacheck.ValidateFile("scoreboard", filepath.Join(dir, "compared", reports.ScoreboardJSONFile)); err != nil {
		t.Error(err)
	}
	if _, errOut, code := locktest(t, "merge", "--out", filepath.Join(dir, "twice"), filepath.Join(dir, "shard1"), filepath.Join(dir, "shard1")); code != 2 || !strings.Contains(errOut, "the shards overlap") {
		t.Errorf("merging a shard with itself: exit %d, %q", code, errOut)
	}
}

// TestDebateGateFailsOnARefutedClaim: a scenario that claims safety and
// shows a violation is refuted, and the debate exits 1; so does merge of
// its scoreboard, which scores the same runs again.
func TestDebateGateFailsOnARefutedClaim(t *testing.T) {
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	file := naiveDelScenario(t, dir, "5s")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The same run, claimed safe.
	safe := strings.NewReplacer("expect: violation", "expect: safe", "{me: violation — plain DEL is unsafe}", "{me: safe}",
		"    anomalies: [foreign-release]\n", "").Replace(string(b))
	if err := os.WriteFile(file, []byte(safe), 0o644); err != nil {
		t.Fatal(err)
	}
	board := filepath.Join(dir, "board")
	stdout, errOut, code := locktest(t, "debate", "--scenarios", file, "--seeds", "2", "--store", filepath.Join(dir, "store"), "--out", board, "-q")
	if code != 1 || !strings.Contains(stdout, "refuted") {
		t.Fatalf("debate: exit %d, want 1 with the claim refuted\n%s%s", code, stdout, errOut)
	}
	if stdout, errOut, code := locktest(t, "merge", board, "--out", filepath.Join(dir, "merged")); code != 1 || !strings.Contains(stdout, "refuted") {
		t.Errorf("merge: exit %d, want 1 with the claim refuted\n%s%s", code, stdout, errOut)
	}
}
