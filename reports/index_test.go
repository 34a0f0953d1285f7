package reports

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// storeRun writes a stored run under root/rel with the given start and
// verdict, and a report when report is set.
func storeRun(t *testing.T, root, rel, started string, valid checker.Verdict, report bool) {
	t.Helper()
	putRun(t, root, rel, handResults(filepath.Dir(rel), started, valid, "valid"), report)
}

// handResults are the results of a run named name of redis-set-nx-px
// under pause-client, with one checker's verdict valid (and two
// anomalies when invalid), expected to be expect.
func handResults(name, started string, valid checker.Verdict, expect string) runstore.Results {
	r := runstore.Results{Run: runstore.RunInfo{Name: name, Impl: "redis-set-nx-px", Faults: []string{"pause-client"}, Mode: "fenced",
		Started: started, Expect: expect}, Valid: valid,
		Checkers: []checker.Result{{Checker: "mutual-exclusion", Valid: valid, Anomalies: []checker.Anomaly{}}},
		Stats:    map[string]float64{"ops": 42}}
	if valid == checker.Invalid {
		r.Checkers[0].Anomalies = []checker.Anomaly{{Kind: "overlapping-holds"}, {Kind: "overlapping-holds"}}
	}
	return r
}

// putRun stores r under root/rel, with a report when report is set, and
// returns the run's folder.
func putRun(t *testing.T, root, rel string, r runstore.Results, report bool) string {
	t.Helper()
	dir := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := runstore.WriteResults(dir, r); err != nil {
		t.Fatal(err)
	}
	if report {
		if err := os.WriteFile(filepath.Join(dir, runstore.ReportFile), []byte("<html>"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// putFile writes body into root/rel, making its folder.
func putFile(t *testing.T, root, rel, body string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWriteIndex(t *testing.T) {
	root := t.TempDir()
	storeRun(t, root, "a/20250101T000000", "2025-01-01T00:00:00Z", checker.Valid, true)
	storeRun(t, root, "b/20250301T000000", "2025-03-01T00:00:00Z", checker.Invalid, true)
	storeRun(t, root, "a/20250201T000000", "2025-02-01T00:00:00Z", checker.Unknown, false)
	// A scenario's latest link is not a second copy of its run.
	if err := os.Symlink("20250101T000000", filepath.Join(root, "a", "latest")); err != nil {
		t.Fatal(err)
	}
	// A broken results.json is listed with its error.
	putFile(t, root, "c/x/"+runstore.ResultsFile, "{")
	if err := WriteIndex(root); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	// Newest first, each once.
	order := []string{`<a href="b/20250301T000000/report.html">`, `a/20250201T000000 (no report)`, `<a href="a/20250101T000000/report.html">`}
	last := -1
	for _, s := range order {
		i := strings.Index(out, s)
		if i < 0 {
			t.Fatalf("index lacks %q", s)
		}
		if i < last {
			t.Errorf("%q is not in newest-first order", s)
		}
		last = i
		if strings.Count(out, s) != 1 {
			t.Errorf("%q is listed %d times", s, strings.Count(out, s))
		}
	}
	if strings.Contains(out, "latest") {
		t.Error("index lists the latest link")
	}
	for _, want := range []string{
		"<strong>4 runs</strong>", "1 valid</span>", "1 invalid</span>", "1 unknown</span>", "1 unreadable</span>", "2 not as expected",
		`<td class="v-false">invalid</td>`, "mutual-exclusion invalid", `<td class="num">2</td>`,
		"c/x</td><td colspan=\"9\" class=\"err\">results.json unreadable:",
		"<strong>not as expected</strong> (valid)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("index lacks %q", want)
		}
	}
	if strings.Contains(out, "<nav>") || strings.Contains(out, "<details>") || strings.Contains(out, "trials of") {
		t.Error("an index of runs alone names debates, matrices, searches or trials")
	}
	if err := WriteIndex(filepath.Join(root, "missing")); err == nil || !strings.Contains(err.Error(), "no such folder") {
		t.Errorf("index of a missing store: %v", err)
	}
}

// The hand-built store's times, and its folders relative to its root.
const (
	debateDir  = "debate/20250105T095900"
	matrixDir  = "matrix"
	marginDir  = "redis-set-nx-px-pause-client-pause.margin/20250106T110000"
	shrinkDir  = "gc.shrink/20250107T120000"
	gcRun      = "gc/20250101T120000"
	matrixRun  = "matrix/redis-set-nx-px-client-pause/20250104T120000"
	confirmed  = "gc-shrunk/20250107T121000"
	notAgain   = "gc-shrunk/20250107T121100"
	candidate1 = shrinkDir + "/candidates/c001/20250107T120001"
	candidate2 = shrinkDir + "/candidates/c002/20250107T120101"
	trialHeld  = marginDir + "/runs/pause-0s/20250106T110001"
	trialBroke = marginDir + "/runs/pause-3s/20250106T110101"
	gcStory    = "p1 paused for 6s at 0.700s, at its before-write point; then p2 was granted token 3 while p1 still held token 2."
)

// gcSchedule is the stored run's schedule: a noop, the long pause that
// breaks the lock, and a short pause; smallSchedule is the long pause
// alone, sooner and shorter, in a shorter run.
func gcSchedule() nemesis.Plan {
	return nemesis.Plan{SchemaVersion: nemesis.PlanSchemaVersion, Seed: 1,
		Workload: map[string]string{"impl": "redis-set-nx-px", "clients": "4", "locks": "1", "ttl": "2s", "time": "11s"},
		Faults: []nemesis.PlannedFault{
			{At: 200 * time.Millisecond, Fault: "noop", Settings: map[string]string{"window": "300ms"}, Lasts: 300 * time.Millisecond},
			{At: 700 * time.Millisecond, Fault: "pause-client", Settings: map[string]string{"pause": "6s", "pause-point": "before-write"}, Hit: []string{"p1"}, Lasts: 6 * time.Second},
			{At: 7400 * time.Millisecond, Fault: "pause-client", Settings: map[string]string{"pause": "50ms", "pause-point": "before-write"}, Pins: []string{"p1"}, Lasts: 50 * time.Millisecond},
		}}
}

func smallSchedule() nemesis.Plan {
	p := gcSchedule()
	p.Workload = map[string]string{"impl": "redis-set-nx-px", "clients": "2", "locks": "1", "ttl": "2s", "time": "4s"}
	p.Faults = []nemesis.PlannedFault{p.Faults[1]}
	p.Faults[0].At, p.Faults[0].Lasts = time.Second, 3*time.Second
	p.Faults[0].Settings = map[string]string{"pause": "3s", "pause-point": "before-write"}
	return p
}

// handShrink is the shrink.json of a search of gcRun in the store at root
// (its replays named by absolute paths, as the search writes them): two
// candidates, of which the second is accepted, and two confirmations, of
// which one did not fail again.
func handShrink(root string) ShrinkLog {
	abs := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	size := func(f int, tm string, c int) runstore.ShrinkSize {
		return runstore.ShrinkSize{Faults: f, Time: tm, Clients: c, Locks: 1}
	}
	return ShrinkLog{SchemaVersion: 1, From: "store/" + gcRun, Anomaly: ShrinkTarget{"mutual-exclusion", "overlapping-holds"},
		Need: 1, Replays: 1, Grace: "3s", Budget: "30m0s", Started: "2025-01-07T12:00:00Z", Elapsed: "11m4s",
		Before: size(3, "11s", 4), After: size(1, "4s", 2), Smallest: "c002", ReplaysRun: 2,
		Steps: []ShrinkStep{
			{ID: "c001", Change: "no faults", Size: size(0, "11s", 4), Schedule: abs(shrinkDir + "/candidates/c001.json"),
				Trials: []ShrinkTrial{{Run: abs(candidate1), Verdict: "valid"}}},
			{ID: "c002", Change: "keep fault 2 of 3, 1s in, pause 6s → 3s; time 11s → 4s; clients 4 → 2", Size: size(1, "4s", 2), Schedule: abs(shrinkDir + "/candidates/c002.json"),
				Trials: []ShrinkTrial{{Run: abs(candidate2), Verdict: "INVALID", Failed: true, FirstViolation: 2100 * time.Millisecond}}, Accepted: true},
			{ID: "c003", Change: "clients 2 → 1", Size: size(1, "4s", 1), Schedule: abs(shrinkDir + "/candidates/c003.json"), Trials: []ShrinkTrial{},
				NotRun: "faults[0]: no worker p1: the candidate cannot run"},
		},
		Confirmations: []ShrinkTrial{{Run: abs(confirmed), Verdict: "INVALID", Failed: true, FirstViolation: 2300*time.Millisecond + 417*time.Microsecond},
			{Run: abs(notAgain), Verdict: "valid"}},
	}
}

// handStore builds a store at root holding a debate, a matrix, a margin
// search, a shrink and runs:
//   - counted runs: a debate's two (valid; invalid as its violation
//     scenario expects), the matrix's one (a violation: its finding, not an alarm), the shrunk run (invalid
//     as expected), a run that broke a lock expected to hold and one whose
//     verdict is unknown (the two alarms), and one unreadable;
//   - trials: the margin's two (one held, with --expect invalid: "not as
//     expected" if it were counted), the shrink's two candidates (one
//     held) and its two confirmations (one held).
func handStore(t *testing.T, root string) {
	t.Helper()
	abs := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	// The runs that count.
	putRun(t, root, "redis-gc/20250105T100000", handResults("redis-gc", "2025-01-05T10:00:00Z", checker.Valid, "valid"), true)
	putRun(t, root, "redis-gc-pause/20250105T100100", handResults("redis-gc-pause", "2025-01-05T10:01:00Z", checker.Invalid, "invalid"), true)
	putRun(t, root, matrixRun, handResults("redis-set-nx-px-client-pause", "2025-01-04T12:00:00Z", checker.Invalid, "valid"), true)
	putRun(t, root, gcRun, handResults("gc", "2025-01-01T12:00:00Z", checker.Invalid, "invalid"), true)
	if err := runstore.WriteJSON(filepath.Join(abs(gcRun), runstore.ScheduleFile), gcSchedule()); err != nil {
		t.Fatal(err)
	}
	putRun(t, root, "redlock/20250103T090000", handResults("redlock", "2025-01-03T09:00:00Z", checker.Invalid, "valid"), true)
	putRun(t, root, "zk/20250102T080000", handResults("zk", "2025-01-02T08:00:00Z", checker.Unknown, "valid"), false)
	putFile(t, root, "broken/20250101T000000/"+runstore.ResultsFile, `{"run": {`)

	// The debate: two scenarios, each of one seed.
	board := Scoreboard{SchemaVersion: ScoreboardSchemaVersion, Date: "2025-01-05 09:59 UTC", Seeds: 1, Parallel: 2, MaxRate: 0.15,
		Command: "locktest debate --only redis-gc,redis-gc-pause --seeds 1", Elapsed: "2m0s",
		Rows: []ScoreRow{
			{Name: "redis-gc", Expect: "safe", Runs: 1, Conclusive: 1, Verdict: NotRefuted, Seeds: []ScoreRun{{Seed: 1, Dir: abs("redis-gc/20250105T100000"), Outcome: "safe"}}},
			{Name: "redis-gc-pause", Expect: "violation", Runs: 1, Conclusive: 1, Violations: 1, Verdict: Reproduced, Seeds: []ScoreRun{{Seed: 1, Dir: abs("redis-gc-pause/20250105T100100"), Outcome: "violation"}}},
		}}
	if err := WriteScoreboard(abs(debateDir), board); err != nil {
		t.Fatal(err)
	}
	// The matrix, made with --store ROOT/matrix: one impl, one run.
	m := Matrix{Header: MatrixHeader{Date: time.Date(2025, 1, 4, 12, 0, 0, 0, time.UTC), Seeds: 1, Command: "locktest matrix --impls redis-set-nx-px --store store/matrix", Store: abs(matrixDir)},
		Columns: []MatrixColumn{{Key: "mutex-client-pause", Title: "mutex: client pause"}, {Key: "latency-1", Title: "acquire p50/p99"}},
		Rows: []MatrixRow{{Impl: "redis-set-nx-px", Backend: "redis", Nodes: 1, Cells: map[string]MatrixCell{
			"mutex-client-pause": {Status: StatusViolated, Value: "1/1 runs", Links: []MatrixLink{{Label: "seed 1", Report: filepath.Join(abs(matrixRun), runstore.ReportFile)}}},
			"latency-1":          {Status: StatusMeasured, Value: "0.06 / 0.15 ms"},
		}}}}
	if err := WriteMatrix(abs(matrixDir), m); err != nil {
		t.Fatal(err)
	}
	// The margin search: a pause of 0s held, one of 3s broke the lock.
	putRun(t, root, trialHeld, handResults("pause-0s", "2025-01-06T11:00:01Z", checker.Valid, "invalid"), true)
	putRun(t, root, trialBroke, handResults("pause-3s", "2025-01-06T11:01:01Z", checker.Invalid, "invalid"), true)
	mg := Margin{SchemaVersion: MarginSchemaVersion, Command: "locktest margin --impl redis-set-nx-px --faults pause-client --vary pause=0s..3s --trials 1 --grid 2",
		Started: "2025-01-06T11:00:00Z", Elapsed: "2m2s", Impl: "redis-set-nx-px", Fault: "pause-client", Param: "pause", Unit: "duration", From: "0s", To: "3s",
		Settings: map[string]string{"ttl": "1s"}, Trials: 1, Grid: 2, Resolution: "50ms",
		Points: []MarginPoint{
			{Value: 0, Label: "0s", Trials: 1, High: 0.79, Runs: []MarginRun{{Run: "runs/pause-0s/20250106T110001", Verdict: "valid"}}},
			{Value: 3e9, Label: "3s", Failures: 1, Trials: 1, Rate: 1, Low: 0.21, High: 1, Runs: []MarginRun{{Run: "runs/pause-3s/20250106T110101", Verdict: "INVALID", Failed: true}}},
		},
		Found: true, Breaks: "3s", Holds: "0s", Boundary: "1.5s", Summary: "breaks at pause ≥ 1.5s (between 0s, 0 of 1 failed, and 3s, 1 of 1 failed)",
		Bound: &MarginBound{Value: 997e6, Label: "997ms", Rule: "TTL − gap = 1s − 3ms"}, Runs: 2,
		Gate: &MarginGate{Value: 997e6, Label: "997ms", Source: "stated bound", Tolerance: "50ms"}}
	if err := WriteMargin(abs(marginDir), mg); err != nil {
		t.Fatal(err)
	}
	// The shrink: its candidates in its folder, its confirmations beside
	// the other runs, marked with what they were shrunk from.
	putRun(t, root, candidate1, handResults("c001", "2025-01-07T12:00:01Z", checker.Valid, "invalid"), true)
	putRun(t, root, candidate2, handResults("c002", "2025-01-07T12:01:01Z", checker.Invalid, "invalid"), true)
	for _, c := range []struct {
		rel, started string
		valid        checker.Verdict
	}{{confirmed, "2025-01-07T12:10:00Z", checker.Invalid}, {notAgain, "2025-01-07T12:11:00Z", checker.Valid}} {
		r := handResults("gc-shrunk", c.started, c.valid, "invalid")
		r.Run.Shrunk = &runstore.Shrunk{From: "store/" + gcRun, Search: abs(shrinkDir), Checker: "mutual-exclusion", Kind: "overlapping-holds",
			Before: runstore.ShrinkSize{Faults: 3, Time: "11s", Clients: 4, Locks: 1}, After: runstore.ShrinkSize{Faults: 1, Time: "4s", Clients: 2, Locks: 1},
			Replays: 2, Need: 1, OfReplays: 1, Reproduced: 1, Confirmations: 2, Story: gcStory}
		putRun(t, root, c.rel, r, true)
	}
	if err := runstore.WriteJSON(filepath.Join(abs(shrinkDir), ShrinkFile), handShrink(root)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		rel  string
		plan nemesis.Plan
	}{{shrinkDir + "/" + ShrinkScheduleFile, smallSchedule()}, {shrinkDir + "/candidates/c002.json", smallSchedule()}} {
		if err := runstore.WriteJSON(abs(p.rel), p.plan); err != nil {
			t.Fatal(err)
		}
	}
}

// hrefs are the links of a page.
var hrefRE = regexp.MustCompile(`href="([^"#]+)"`)

// TestIndexOfAStore: a store holding a debate, a matrix, a margin search,
// a shrink and runs gives one page that links each of them, every run and
// every trial, with the trials grouped under their search and left out
// of the counts, so that a trial that held is no alarm; a store seen from
// inside a search, one copied elsewhere, one whose search has not ended,
// and one with unreadable files each give the page they should.
func TestIndexOfAStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		// build makes the store in root and returns the folder to index.
		build func(t *testing.T, root string) string
		// runs, trials and unexpected are the counts the page must give;
		// entries the number of debates, matrices, margins and shrinks.
		runs, trials, unexpected int
		entries                  [4]int
		want, notWant            []string
		golden                   string
	}{
		{name: "everything", build: func(t *testing.T, root string) string {
			handStore(t, root)
			if _, err := WriteShrinkPages(root); err != nil { // as locktest index does
				t.Fatal(err)
			}
			return root
		},
			runs: 7, trials: 6, unexpected: 2, entries: [4]int{1, 1, 1, 1}, golden: "index.html.golden",
			want: []string{
				"<strong>7 runs</strong>", "1 valid</span>", "4 invalid</span>", "1 unknown</span>", "1 unreadable</span>", "2 not as expected", "1 run of a matrix broke a lock: its findings, in its cells, not alarms",
				"The 6 trials of margin searches and shrinks are listed under their search and not counted",
				`<a href="` + debateDir + `/scoreboard.html">`, `<a href="` + matrixDir + `/matrix.html">`,
				`<a href="` + marginDir + `/margin.html">`, `<a href="` + shrinkDir + `/shrink.html">`,
				`<span class="unknown">1 reproduced, 1 not refuted</span>`,
				"1 violated, 1 measured cells", "breaks at pause ≥ 1.5s", "stated bound 997ms",
				"; gate: stated bound 997ms (within 50ms): held", `<span class="good">breaks at pause`,
				"3 → 1 faults, 11s → 4s, 4 → 2 clients, 2 replays; reproduced in 1 of 2 confirmations",
				gcStory, `<a href="` + debateDir + `/scoreboard.html">debate 2025-01-05 09:59 UTC</a>`,
				`<a href="` + matrixDir + `/matrix.html">matrix 2025-01-04T12:00:00Z</a>`,
				"broken/20250101T000000</td><td colspan=\"9\" class=\"err\">results.json unreadable:",
				"<summary>2 trials</summary>", "<summary>4 trials</summary>",
			}},
		{name: "from inside a shrink", build: func(t *testing.T, root string) string {
			handStore(t, root)
			return filepath.Join(root, shrinkDir, "candidates")
		}, runs: 0, trials: 2, want: []string{"This folder holds the trials of the shrink <a href=\"../shrink.json\">..</a>", "<strong>0 runs</strong>.", "None but the trials above."}},
		{name: "a search in progress", build: func(t *testing.T, root string) string {
			// margin.json comes at the search's end; its folder's name
			// says what it is before that.
			putRun(t, root, "x.margin/20250106T110000/runs/pause-0s/20250106T110001", handResults("pause-0s", "2025-01-06T11:00:01Z", checker.Valid, "invalid"), true)
			putRun(t, root, "x/20250101T000000", handResults("x", "2025-01-01T00:00:00Z", checker.Valid, "valid"), true)
			return root
		}, runs: 1, trials: 1, entries: [4]int{0, 0, 1, 0}, want: []string{"margin search x", "not finished: running, or stopped before it wrote margin.json", "all as expected"}},
		{name: "a store copied elsewhere", build: func(t *testing.T, root string) string {
			// The files name the runs where they were made: found by the
			// tails of their paths.
			old := filepath.Join(t.TempDir(), "old-store")
			handStore(t, old)
			if err := os.Rename(old, filepath.Join(root, "store")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "store")
		}, runs: 7, trials: 6, unexpected: 2, entries: [4]int{1, 1, 1, 1}, want: []string{`<a href="` + debateDir + `/scoreboard.html">debate 2025-01-05 09:59 UTC</a>`}},
		{name: "a matrix made in the store itself", build: func(t *testing.T, root string) string {
			// locktest matrix's default: its runs and matrix.json in the
			// store, beside the store's other runs.
			putRun(t, root, "matrix-redlock-none/20250104T120000", handResults("matrix-redlock-none", "2025-01-04T12:00:00Z", checker.Valid, "valid"), true)
			putRun(t, root, "x/20250101T000000", handResults("x", "2025-01-01T00:00:00Z", checker.Valid, "valid"), true)
			m := Matrix{Header: MatrixHeader{Date: time.Date(2025, 1, 4, 12, 0, 0, 0, time.UTC), Seeds: 1, Command: "locktest matrix --impls redlock"},
				Columns: []MatrixColumn{{Key: "mutex-none", Title: "mutex: no fault"}},
				Rows: []MatrixRow{{Impl: "redlock", Cells: map[string]MatrixCell{"mutex-none": {Status: StatusHeld,
					Links: []MatrixLink{{Label: "seed 1", Report: filepath.Join(root, "matrix-redlock-none", "20250104T120000", runstore.ReportFile)}}}}}}}
			if err := WriteMatrix(root, m); err != nil {
				t.Fatal(err)
			}
			return root
		}, runs: 2, entries: [4]int{0, 1, 0, 0}, want: []string{`<a href="matrix.html">this store</a>`, `<a href="matrix.html">matrix 2025-01-04T12:00:00Z</a>`, "1 held cells"}},
		{name: "a margin search whose gate failed", build: func(t *testing.T, root string) string {
			mg := Margin{SchemaVersion: MarginSchemaVersion, Started: "2025-01-06T11:00:00Z", Impl: "redlock", Fault: "clock-bump", Param: "clock-bump", From: "0s", To: "2s",
				Points: []MarginPoint{}, Found: true, Summary: "breaks at clock-bump ≥ 400ms (between 300ms, 0 of 5 failed, and 500ms, 2 of 5 failed)",
				Gate: &MarginGate{Value: 9e8, Label: "900ms", Source: "--gate", Tolerance: "100ms", Failed: true, Why: "it broke at clock-bump 500ms, below the --gate 900ms by more than 100ms"}}
			dir := filepath.Join(root, "redlock-clock.margin", "20250106T110000")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := WriteMargin(dir, mg); err != nil {
				t.Fatal(err)
			}
			return root
		}, entries: [4]int{0, 0, 1, 0}, want: []string{`<span class="bad">breaks at clock-bump ≥ 400ms`,
			"gate: --gate 900ms (within 100ms): failed: it broke at clock-bump 500ms, below the --gate 900ms by more than 100ms"}},
		{name: "unreadable files", build: func(t *testing.T, root string) string {
			putFile(t, root, "debate/20250105T095900/"+ScoreboardJSONFile, "[")
			putFile(t, root, "m/"+MatrixHeaderFile, `{"schema_version": 99}`)
			putFile(t, root, "y.margin/20250106T110000/"+MarginFile, "{")
			putFile(t, root, "z.shrink/20250107T120000/"+ShrinkFile, `{"steps": 3}`)
			// A confirmation whose search is gone is still a trial.
			r := handResults("gc-shrunk", "2025-01-07T12:10:00Z", checker.Valid, "invalid")
			r.Run.Shrunk = &runstore.Shrunk{From: "store/gc/1", Search: "/gone/gc.shrink/20250107T120000", Checker: "mutual-exclusion", Kind: "overlapping-holds"}
			putRun(t, root, "gc-shrunk/20250107T121000", r, true)
			return root
		}, runs: 0, trials: 1, entries: [4]int{1, 1, 1, 2}, want: []string{
			"unreadable: debate/20250105T095900/scoreboard.json: unexpected end of JSON input",
			"unreadable: m/matrix.json: schema_version 99; this locktest reads up to", "unreadable: y.margin/20250106T110000/margin.json: unexpected end of JSON input",
			"unreadable: z.shrink/20250107T120000/shrink.json: json: cannot unmarshal number", "its search&#39;s folder is not in this store",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := tc.build(t, root)
			x, err := ScanIndex(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tc.runs == 7 && x.Found != 1 {
				t.Errorf("%d runs of the matrix found a violation, want 1: its violated run is a finding, not an alarm", x.Found)
			}
			if len(x.Runs) != tc.runs || x.Trials != tc.trials || x.Unexpected != tc.unexpected {
				t.Errorf("%d runs, %d trials, %d not as expected; want %d, %d, %d", len(x.Runs), x.Trials, x.Unexpected, tc.runs, tc.trials, tc.unexpected)
			}
			if got := [4]int{len(x.Debates), len(x.Matrices), len(x.Margins), len(x.Shrinks)}; got != tc.entries {
				t.Errorf("debates, matrices, margins, shrinks: %v, want %v", got, tc.entries)
			}
			// No trial is counted: every run counted is no search's.
			for _, r := range x.Runs {
				if strings.Contains(r.Dir, ".margin/") || strings.Contains(r.Dir, ".shrink/") || r.Results.Run.Shrunk != nil {
					t.Errorf("trial %s is counted as a run", r.Dir)
				}
			}
			if err := WriteIndex(dir); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			page := string(b)
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			// Every link leads to a file of the store.
			for _, m := range hrefRE.FindAllStringSubmatch(page, -1) {
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(m[1]))); err != nil {
					t.Errorf("link %s: %v", m[1], err)
				}
			}
			if tc.golden != "" {
				x.Root = "store"
				out, err := RenderIndex(x)
				if err != nil {
					t.Fatal(err)
				}
				compareFile(t, filepath.Join("testdata", tc.golden), []byte(strings.Replace(string(out), string(reportCSS), "/* report.css */", 1)))
			}
		})
	}
}

// TestIndexLinksEveryEntryAndTrial checks the hand-built store's index
// line by line: each trial is listed once, under its own search, with no
// "not as expected" beside it, and each counted run once in the runs'
// table, marked as part of the debate or matrix that names it.
func TestIndexLinksEveryEntryAndTrial(t *testing.T) {
	root := t.TempDir()
	handStore(t, root)
	x, err := ScanIndex(root)
	if err != nil {
		t.Fatal(err)
	}
	trialsOf := func(es []IndexEntry) []string {
		var out []string
		for _, e := range es {
			for _, r := range e.Trials {
				out = append(out, r.Dir)
			}
		}
		return out
	}
	for _, tc := range []struct {
		kind string
		got  []string
		want []string
	}{
		{KindMargin, trialsOf(x.Margins), []string{trialBroke, trialHeld}},
		{KindShrink, trialsOf(x.Shrinks), []string{notAgain, confirmed, candidate2, candidate1}},
		{KindDebate, trialsOf(x.Debates), nil},
		{KindMatrix, trialsOf(x.Matrices), nil},
	} {
		if strings.Join(tc.got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s trials %v, want %v (newest first)", tc.kind, tc.got, tc.want)
		}
	}
	partOf := map[string]string{}
	for _, r := range x.Runs {
		partOf[r.Dir] = r.PartOf
	}
	for dir, want := range map[string]string{"redis-gc/20250105T100000": "debate 2025-01-05 09:59 UTC", "redis-gc-pause/20250105T100100": "debate 2025-01-05 09:59 UTC",
		matrixRun: "matrix 2025-01-04T12:00:00Z", gcRun: "", "redlock/20250103T090000": ""} {
		if got, ok := partOf[dir]; !ok || got != want {
			t.Errorf("run %s: part of %q (listed: %v), want %q", dir, got, ok, want)
		}
	}
	if s := x.Shrinks[0]; s.Detail != gcStory || s.Class != "good" {
		t.Errorf("the shrink's entry: story %q, class %q; want the confirmations' story, and good (1 of 2 confirmations failed again, and it needs 1)", s.Detail, s.Class)
	}
}

// TestIndexInChromium loads the hand-built store's index and the
// shrink's page in headless Chromium: the index's sections, its trials
// folded under their searches and unfolding, every link leading to a file
// of the store, the shrink page's two schedules drawn with a size, and
// no request leaving the files.
func TestIndexInChromium(t *testing.T) {
	root := t.TempDir()
	handStore(t, root)
	if _, err := WriteShrinkPages(root); err != nil {
		t.Fatal(err)
	}
	if err := WriteIndex(root); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	var reqs requests
	reqs.listen(t, ctx)
	url := "file://" + filepath.Join(root, IndexFile)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	if got := eval[string](t, ctx, `[...document.querySelectorAll("h2")].map(h => h.textContent).join("|")`); got != "Debates|Matrices|Margin searches|Shrinks|Runs" {
		t.Errorf("sections %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("table.index tr").length - 1`); n != 7 {
		t.Errorf("%d runs in the runs' table, want 7", n)
	}
	// The trials are folded away, and unfold.
	if v := eval[bool](t, ctx, `document.querySelector("details table.trials td").checkVisibility()`); v {
		t.Error("the trials are shown before their search is unfolded")
	}
	eval[bool](t, ctx, `document.querySelectorAll("details").forEach(d => d.open = true), true`)
	if n := eval[int](t, ctx, `[...document.querySelectorAll("details table.trials tr")].filter(r => r.querySelector("td") && r.querySelector("td").checkVisibility()).length`); n != 6 {
		t.Errorf("%d trials shown unfolded, want 6", n)
	}
	// Every link of the page leads to a file the browser can load.
	links := eval[[]string](t, ctx, `[...document.querySelectorAll("a[href]")].map(a => a.href)`)
	if len(links) < 15 {
		t.Errorf("only %d links", len(links))
	}
	for _, l := range links {
		p, _, _ := strings.Cut(strings.TrimPrefix(l, "file://"), "#")
		if _, err := os.Stat(p); err != nil {
			t.Errorf("link %s: %v", l, err)
		}
	}
	page := "file://" + filepath.Join(root, shrinkDir, ShrinkHTMLFile)
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("svg.sched").length`); n != 2 {
		t.Errorf("%d schedules drawn, want 2", n)
	}
	if w := eval[float64](t, ctx, `Math.min(...[...document.querySelectorAll("svg.sched")].map(s => s.getBoundingClientRect().width))`); w < 600 {
		t.Errorf("a schedule is %v px wide", w)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("svg.sched rect.sfault").length`); n != 4 {
		t.Errorf("%d fault bars, want 3 + 1", n)
	}
	if got := eval[string](t, ctx, `document.querySelector(".shrunk .story").textContent`); got != gcStory {
		t.Errorf("story %q", got)
	}
	for _, u := range reqs.list() {
		if !strings.HasPrefix(u, "file://") {
			t.Errorf("a page fetched %s", u)
		}
	}
}

// TestIndexSchemaOfTheHandShrink: the hand-built shrink.json is one the
// schema accepts, so that the pages are tested on what the shrink
// writes.
func TestIndexSchemaOfTheHandShrink(t *testing.T) {
	root := t.TempDir()
	handStore(t, root)
	if err := schemacheck.ValidateFile("shrink", filepath.Join(root, shrinkDir, ShrinkFile)); err != nil {
		t.Error(err)
	}
	if err := schemacheck.ValidateFile("margin", filepath.Join(root, marginDir, MarginFile)); err != nil {
		t.Error(err)
	}
}

// TestIndexScreenshotsForDocs writes the screenshots of the index and of
// a shrink's page that docs/reports.md shows, when
// LOCKTEST_INDEX_SCREENSHOTS is "STORE:DIR": DIR/report-index.png, the
// store's index with its first search's trials unfolded, and
// DIR/report-shrink.png, the page of its newest shrink. It is skipped
// otherwise.
func TestIndexScreenshotsForDocs(t *testing.T) {
	spec := os.Getenv("LOCKTEST_INDEX_SCREENSHOTS")
	if spec == "" {
		t.Skip("set LOCKTEST_INDEX_SCREENSHOTS=STORE:DIR to write the screenshots of docs/reports.md")
	}
	store, out, ok := strings.Cut(spec, ":")
	if !ok {
		t.Fatalf("LOCKTEST_INDEX_SCREENSHOTS=%q: want STORE:DIR", spec)
	}
	x, err := ScanIndex(store)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Shrinks) == 0 || x.Shrinks[0].Page == "" {
		t.Fatalf("%s holds no shrink with a page: run locktest index %s", store, store)
	}
	ctx := browser(t)
	for _, shot := range []struct {
		page, file, js string
		height         int64
	}{
		{IndexFile, "report-index.png", `(document.querySelector("details") || {}).open = true`, 1500},
		{x.Shrinks[0].Page, "report-shrink.png", "", 1150},
	} {
		abs, err := filepath.Abs(filepath.Join(store, filepath.FromSlash(shot.page)))
		if err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1260, shot.height), chromedp.Navigate("file://"+abs)); err != nil {
			t.Fatal(err)
		}
		if shot.js != "" {
			eval[bool](t, ctx, shot.js+`, true`)
		}
		b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, shot.file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
