package reports

import (
	"bytes"
	"flag"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// reportHistory is a small run: p1 and p2 both acquire l (ops 1 and 3),
// p1's release comes after, and the nemesis pauses p1 once.
func reportHistory() history.History {
	return hist(
		history.Op{Type: history.Invoke, Process: 1, F: history.Acquire, Time: ms(10), Value: history.Value{Lock: "l"}},
		history.Op{Type: history.OK, Process: 1, F: history.Acquire, Time: ms(12),
			Value: history.Value{Lock: "l", Token: history.Tok(1), LockValue: "p1-1", ValidUntil: ms(1012)}},
		history.Op{Type: history.Invoke, Process: 2, F: history.Acquire, Time: ms(20), Value: history.Value{Lock: "l"}},
		history.Op{Type: history.OK, Process: 2, F: history.Acquire, Time: ms(25),
			Value: history.Value{Lock: "l", Token: history.Tok(2), LockValue: "p2-1", ValidUntil: ms(1025)}},
		history.Op{Type: history.Invoke, Process: 1, F: history.Release, Time: ms(30), Value: history.Value{Lock: "l", LockValue: "p1-1"}},
		history.Op{Type: history.OK, Process: 1, F: history.Release, Time: ms(31), Value: history.Value{Lock: "l", Removed: "p2-1"}},
		history.Op{Type: history.Invoke, Process: -1, F: "pause-client", Time: ms(40)},
		history.Op{Type: history.OK, Process: -1, F: "pause-client", Time: ms(41),
			Value: history.Value{Targets: []string{"p1"}, Duration: ms(2000), Point: "before-write"}},
		history.Op{Type: history.Invoke, Process: -1, F: "resume-client", Time: ms(2041)},
		history.Op{Type: history.OK, Process: -1, F: "resume-client", Time: ms(2042), Value: history.Value{Targets: []string{"p1"}}},
	)
}

// reportInfo is the run of reportHistory.
func reportInfo(expect string) runstore.RunInfo {
	return runstore.RunInfo{
		Name: "redis-set-nx-px-pause", Impl: "redis-set-nx-px", ImplDoc: "SET NX PX on one redis-server",
		Backend: "redis", Nodes: 1, Faults: []string{"pause-client"}, Clients: 2, Locks: 1,
		TTL: "1s", Duration: "2s", Seed: 7, Mode: "counter", PausePoint: "before-write", ClientPause: "2s",
		Command: "locktest run --impl redis-set-nx-px --faults pause-client --seed 7",
		Version: "v0.0.0-test",
		Versions: runstore.Versions{Locktest: "v0.0.0-test", Servers: map[string]string{"redis": "7.0.15"},
			Clients: map[string]string{"github.com/redis/go-redis/v9": "v9.23.0"}},
		Started: "2025-01-02T03:04:05Z",
		Elapsed: "2.1s",
		Expect:  expect,
	}
}

// invalidChecks are checker results naming ops 1 and 3 in one anomaly, with
// a note that names op 4.
func invalidChecks() []checker.Result {
	return []checker.Result{
		{Checker: "mutual-exclusion", Valid: checker.Invalid,
			Anomalies: []checker.Anomaly{{Kind: "overlapping-holds", Ops: []int{1, 3},
				Explanation: "p1 and p2 both held l from 25ms to 31ms; p2's token 2 > p1's 1"}},
			Notes: []checker.Anomaly{{Kind: "foreign-release", Ops: []int{4, 5},
				Explanation: "p1 released the lock value of p2"}},
			Stats: map[string]float64{"holds": 2, "acquire_ok": 2, "overlaps": 1, "max_overlap_ms": 6.25}},
		{Checker: "resource", Valid: checker.Valid, Anomalies: []checker.Anomaly{},
			Stats: map[string]float64{"writes": 0, "reads": 0}},
		{Checker: "fencing-tokens", Valid: checker.Unknown, Anomalies: []checker.Anomaly{},
			Error: "check cancelled: context deadline exceeded"},
	}
}

func validChecks() []checker.Result {
	return []checker.Result{
		{Checker: "mutual-exclusion", Valid: checker.Valid, Anomalies: []checker.Anomaly{},
			Stats: map[string]float64{"holds": 2}},
		{Checker: "fencing-tokens", Valid: checker.Valid, Anomalies: []checker.Anomaly{}},
	}
}

func render(t *testing.T, r runstore.Results, h history.History) string {
	t.Helper()
	b, err := RenderHTML(r, history.NewTable(h))
	if err != nil {
		t.Fatalf("RenderHTML: %v", err)
	}
	return string(b)
}

func esc(s string) string { return template.HTMLEscapeString(s) }

// anomalySection is the part of a report that lists the anomalies.
func anomalySection(t *testing.T, out string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, `<h2 id="anomalies">`)
	list, _, ok2 := strings.Cut(rest, `<h2 id="timeline">`)
	if !ok || !ok2 {
		t.Fatal("report has no anomaly list followed by the timeline")
	}
	return list
}

func TestRenderHTMLInvalid(t *testing.T) {
	h := reportHistory()
	r := check(reportInfo("valid"), h, invalidChecks())
	out := render(t, r, h)
	for _, want := range []string{
		`<span class="v-false">invalid</span>`,
		"This is <strong>not</strong> the expected outcome (expected to be valid)",
		"overlapping-holds",
		esc(r.Checkers[0].Anomalies[0].Explanation),
		esc(h[1].String()),
		esc(h[3].String()),
		"<code>redis-set-nx-px</code>",
		"<code>" + esc(r.Run.Command) + "</code>",
		// The note, by kind and explanation.
		"foreign-release",
		esc("p1 released the lock value of p2"),
		// The checker that could not decide, with its reason.
		"unknown (check cancelled: context deadline exceeded)",
		// Stats, sorted by name.
		"acquire_ok 2, holds 2, max_overlap_ms 6.250, overlaps 1",
		"clients paused at <code>before-write</code> for 2s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, "None: no checker found a violation.") {
		t.Error("report of an invalid run says no checker found a violation")
	}
	// The anomaly list shows only the ops an anomaly names; those of the
	// note are not.
	list := anomalySection(t, out)
	for i, o := range h {
		if i == 1 || i == 3 {
			continue
		}
		if strings.Contains(list, esc(o.String())) {
			t.Errorf("report shows op %d, which no anomaly names: %s", i, o)
		}
	}
	// The ops appear in the anomaly's order.
	if a, b := strings.Index(out, esc(h[1].String())), strings.Index(out, esc(h[3].String())); a > b {
		t.Errorf("op 1 is shown after op 3")
	}
}

func TestRenderHTMLValid(t *testing.T) {
	h := reportHistory()
	out := render(t, check(reportInfo("valid"), h, validChecks()), h)
	for _, want := range []string{
		`<span class="v-true">valid</span>`,
		"This is the expected outcome (expected to be valid).",
		"None: no checker found a violation.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	list := anomalySection(t, out)
	for i, o := range h {
		if strings.Contains(list, esc(o.String())) {
			t.Errorf("report of a valid run shows op %d: %s", i, o)
		}
	}
}

func TestRenderHTMLExpectation(t *testing.T) {
	h := reportHistory()
	for _, tc := range []struct {
		expect string
		checks []checker.Result
		want   string
	}{
		{"valid", validChecks(), "This is the expected outcome (expected to be valid)."},
		{"valid", invalidChecks(), "This is <strong>not</strong> the expected outcome (expected to be valid)."},
		{"invalid", invalidChecks(), "This is the expected outcome (expected to find a violation)."},
		{"invalid", validChecks(), "This is <strong>not</strong> the expected outcome (expected to find a violation)."},
	} {
		out := render(t, check(reportInfo(tc.expect), h, tc.checks), h)
		if !strings.Contains(out, tc.want) {
			t.Errorf("expect %s, verdict %s: report lacks %q", tc.expect, checker.Overall(tc.checks), tc.want)
		}
	}
}

func TestRenderHTMLEachAnomalyShowsItsOwnOps(t *testing.T) {
	h := reportHistory()
	rs := invalidChecks()
	rs[1].Valid = checker.Invalid
	rs[1].Anomalies = []checker.Anomaly{{Kind: "foreign-release", Ops: []int{5}, Explanation: "p1 deleted p2's lock"}}
	out := render(t, check(reportInfo("invalid"), h, rs), h)
	blocks := strings.Split(anomalySection(t, out), `<div class="anomaly"`)[1:]
	if len(blocks) != 2 {
		t.Fatalf("report has %d anomaly blocks, want 2", len(blocks))
	}
	for i, tc := range []struct {
		kind string
		ops  []int
	}{{"overlapping-holds", []int{1, 3}}, {"foreign-release", []int{5}}} {
		b, _, _ := strings.Cut(blocks[i], "</div>")
		if !strings.Contains(b, "<strong>"+tc.kind+"</strong>") {
			t.Errorf("anomaly block %d is not %s:\n%s", i, tc.kind, b)
		}
		for j, o := range h {
			if got, want := strings.Contains(b, esc(o.String())), slices.Contains(tc.ops, j); got != want {
				t.Errorf("anomaly %s shows op %d: %v, want %v", tc.kind, j, got, want)
			}
		}
	}
}

// Many anomalies of a kind: the page counts them and shows the first
// MaxAnomalyExamples, in its list and on its timeline, with the same ids.
func TestRenderHTMLGroupsManyAnomaliesOfAKind(t *testing.T) {
	h := reportHistory()
	rs := invalidChecks()
	many := MaxAnomalyExamples + 17
	rs[0].Anomalies = nil
	for i := range many {
		rs[0].Anomalies = append(rs[0].Anomalies, checker.Anomaly{Kind: "overlapping-holds", Ops: []int{1, 3}, Explanation: fmt.Sprintf("overlap number %d", i)})
	}
	rs[1].Valid = checker.Invalid
	rs[1].Anomalies = []checker.Anomaly{{Kind: "foreign-release", Ops: []int{5}, Explanation: "p1 deleted p2's lock"}}
	out := render(t, check(reportInfo("invalid"), h, rs), h)
	section := anomalySection(t, out)
	if n := strings.Count(section, `<div class="anomaly"`); n != MaxAnomalyExamples+1 {
		t.Errorf("%d anomaly blocks, want %d overlaps and the foreign release", n, MaxAnomalyExamples)
	}
	if want := fmt.Sprintf("<strong>overlapping-holds</strong> (mutual-exclusion): %d anomalies; the first %d are shown", many, MaxAnomalyExamples); !strings.Contains(section, want) {
		t.Errorf("no count of the group: want %q", want)
	}
	if strings.Contains(section, fmt.Sprintf("overlap number %d", MaxAnomalyExamples)) {
		t.Error("an anomaly past the examples is shown")
	}
	if strings.Contains(section, "(fencing-tokens): 1 anomalies") || strings.Contains(section, "foreign-release</strong> (resource): 1 anomalies") {
		t.Error("a kind with few anomalies gets a count line")
	}
	last := fmt.Sprintf(`id="a%d" data-a="%d"`, MaxAnomalyExamples+1, MaxAnomalyExamples)
	if !strings.Contains(section, last) || !strings.Contains(section, "p1 deleted p2") {
		t.Errorf("the foreign release is not anomaly a%d", MaxAnomalyExamples+1)
	}
	tl := buildTimeline(rs, history.NewTable(h))
	if len(tl.Anoms) != MaxAnomalyExamples+1 || tl.Anoms[MaxAnomalyExamples].ID != fmt.Sprintf("a%d", MaxAnomalyExamples+1) {
		t.Errorf("the timeline draws %d anomalies, want the %d the list shows, with the same ids", len(tl.Anoms), MaxAnomalyExamples+1)
	}
}

func TestRenderHTMLOpOutsideHistory(t *testing.T) {
	h := reportHistory()
	rs := []checker.Result{{Checker: "mutual-exclusion", Valid: checker.Invalid,
		Anomalies: []checker.Anomaly{{Kind: "overlapping-holds", Ops: []int{3, 99, -1}, Explanation: "x"}}}}
	out := render(t, check(reportInfo("valid"), h, rs), h)
	for _, want := range []string{esc(h[3].String()), "op 99 is not in the history", "op -1 is not in the history"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestRenderHTMLEscapes(t *testing.T) {
	const evil = `<script>alert("x")</script>`
	h := reportHistory()
	for _, tc := range []struct {
		name string
		set  func(*runstore.Results)
	}{
		{"explanation", func(r *runstore.Results) { r.Checkers[0].Anomalies[0].Explanation = evil }},
		{"kind", func(r *runstore.Results) { r.Checkers[0].Anomalies[0].Kind = evil }},
		{"note", func(r *runstore.Results) { r.Checkers[0].Notes[0].Explanation = evil }},
		{"checker error", func(r *runstore.Results) { r.Checkers[2].Error = evil }},
		{"run name", func(r *runstore.Results) { r.Run.Name = evil }},
		{"command", func(r *runstore.Results) { r.Run.Command = evil }},
		{"impl doc", func(r *runstore.Results) { r.Run.ImplDoc = evil }},
		{"run problem", func(r *runstore.Results) { r.Problems = []string{evil} }},
		{"fault", func(r *runstore.Results) { r.Run.Faults = []string{evil} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := check(reportInfo("valid"), h, invalidChecks())
			tc.set(&r)
			out := render(t, r, h)
			if strings.Contains(out, "<script>alert") {
				t.Errorf("report contains an unescaped <script> from the %s", tc.name)
			}
			if !strings.Contains(out, "&lt;script&gt;") {
				t.Errorf("report does not show the escaped %s", tc.name)
			}
		})
	}
	t.Run("op", func(t *testing.T) {
		h := reportHistory()
		h[1].Error = evil
		h[1].Value.Node = `a"b'c&d`
		out := render(t, check(reportInfo("valid"), h, invalidChecks()), h)
		if strings.Contains(out, "<script>alert") {
			t.Error("report contains an unescaped <script> from an op")
		}
		if !strings.Contains(out, esc(h[1].String())) {
			t.Errorf("report lacks op 1 escaped as %s", esc(h[1].String()))
		}
	})
}

func TestRenderHTMLCapsNotes(t *testing.T) {
	h := reportHistory()
	rs := validChecks()
	for i := range 53 {
		rs[0].Notes = append(rs[0].Notes, checker.Anomaly{Kind: "slow-acquire", Ops: []int{0}, Explanation: fmt.Sprintf("note-%d.", i)})
	}
	out := render(t, check(reportInfo("valid"), h, rs), h)
	if !strings.Contains(out, "Notes of mutual-exclusion (53)") {
		t.Error("report does not count the notes")
	}
	if !strings.Contains(out, "note-49.") || strings.Contains(out, "note-50.") {
		t.Error("report does not show exactly the first 50 notes")
	}
	if !strings.Contains(out, "and 3 more in results.json") {
		t.Error("report does not say how many notes it left out")
	}
}

func TestFormatStats(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]float64
		want string
	}{
		{nil, ""},
		{map[string]float64{"ops": 3}, "ops 3"},
		{map[string]float64{"z": 1, "a": 2.5, "m": 0, "b": 1e9, "y": -4, "c": 1.0 / 3},
			"a 2.500, b 1000000000, c 0.333, m 0, y -4, z 1"},
	} {
		// Map iteration order changes from run to run; the output must not.
		for range 20 {
			if got := formatStats(tc.in); got != tc.want {
				t.Fatalf("formatStats(%v) = %q, want %q", tc.in, got, tc.want)
			}
		}
	}
}

func TestWriteHTML(t *testing.T) {
	dir := t.TempDir()
	h := reportHistory()
	r := check(reportInfo("valid"), h, invalidChecks())
	if err := WriteHTML(dir, r, history.NewTable(h)); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, runstore.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := render(t, r, h); string(got) != want {
		t.Error("report.html differs from RenderHTML's output")
	}
}

// goldenResults is the fixed run of the golden report: invalid, expected
// to be invalid, with a note, a problem of the run, an undecided checker
// and stats with several keys.
func goldenResults(h history.History) runstore.Results {
	info := reportInfo("invalid")
	info.Errors = []string{"worker p2 exited: signal: killed"}
	info.Interrupted = true
	return check(info, h, invalidChecks())
}

func TestGoldenReport(t *testing.T) {
	h := reportHistory()
	got := []byte(render(t, goldenResults(h), h))
	// The same input renders to the same bytes every time.
	for range 10 {
		if again := []byte(render(t, goldenResults(h), h)); !bytes.Equal(again, got) {
			t.Fatal("two renders of the same results differ")
		}
	}
	compareGolden(t, filepath.Join("testdata", "report.html.golden"), got)
}

// firstDiff shows the first line where want and got differ.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\nwant: %s\ngot:  %s", i+1, w, g)
		}
	}
	return "(no line differs)"
}

// check is what run and `locktest check` store for a run made as info whose
// history h the checkers found rs.
func check(info runstore.RunInfo, h history.History, rs []checker.Result) runstore.Results {
	return runstore.New(info, checker.Judge(history.NewTable(h), info.Facts(false), rs))
}
