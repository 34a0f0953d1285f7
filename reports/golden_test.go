package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// goldenCase is one of the checker's golden histories (checker/testdata),
// as checker/testdata/golden.json describes it.
type goldenCase struct {
	File   string `json:"file"`
	Mode   string `json:"mode"`
	Leases bool   `json:"leases"`
	Valid  string `json:"valid"`
}

// loadGolden reads a golden history and checks it as a run would.
func loadGolden(t testing.TB, file string) (runstore.Results, history.History) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "checker", "testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	var gc *goldenCase
	for i := range cases {
		if cases[i].File == file {
			gc = &cases[i]
		}
	}
	if gc == nil {
		t.Fatalf("%s is not in checker/testdata/golden.json", file)
	}
	h, err := history.ReadFile(filepath.Join("..", "checker", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	info := runstore.RunInfo{Name: strings.TrimSuffix(file, ".jsonl"), Impl: "golden", Backend: "none", Nodes: 1,
		Faults: []string{"pause-client"}, Clients: 3, Locks: 1, TTL: "1s", Duration: "10s", Seed: 1, Mode: gc.Mode,
		Network: "loopback", Clock: "clock shim",
		Command: "locktest check checker/testdata/" + file, Version: "v0.0.0-test", Started: "2025-01-02T03:04:05Z",
		Elapsed: "10s", Expect: "valid"}
	rs := checker.Run(context.Background(), history.NewTable(h), checker.For(gc.Mode, gc.Leases)...)
	// The golden pages hold what the checkers found, not their stats,
	// which grow as the checkers do.
	for i := range rs {
		rs[i].Elapsed, rs[i].Stats = 0, nil
	}
	r := check(info, h, rs)
	// The problem "no fault was applied" does not matter here, and the
	// verdict must be the checkers'.
	r.Problems, r.Valid = nil, checker.Overall(rs)
	if string(r.Valid) != gc.Valid {
		t.Fatalf("%s: verdict %s, golden.json says %s", file, r.Valid, gc.Valid)
	}
	return r, h
}

func TestGoldenHistoryReports(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		verdict    string // in words
		// kinds are the anomalies the list must show, in order.
		kinds []string
		// want are further strings the page must hold.
		want []string
	}{
		{name: "valid", file: "clean.jsonl", verdict: "valid",
			want: []string{"None: no checker found a violation.", `class="fault"`}},
		{name: "mutual-exclusion-violation", file: "overlapping-holders.jsonl", verdict: "invalid",
			kinds: []string{"overlapping-holds"}, want: []string{`<text class="tok"`}},
		{name: "fencing-saved", file: "stale-write-rejected.jsonl", verdict: "valid",
			want: []string{"None: no checker found a violation.", `class="w w1"`, "write-rejected", `class="exp"`}},
		{name: "stuck-lock", file: "stuck-lock.jsonl", verdict: "invalid",
			kinds: []string{"stuck-lock"}, want: []string{`norel"`}},
		// A holder told of its lost lease 2 s after the takeover: the
		// notice section's row, a late one, and the notice's triangle on
		// the timeline.
		{name: "lost-notice", file: "notice-after-takeover.jsonl", verdict: "invalid",
			kinds: []string{"overlapping-holds", "lost-update", "not-linearizable"},
			want: []string{`<h2 id="notices">Lost-lock notices</h2>`, "1 notices; 1 of 1 holds that another client overlapped were told, 1 told only after the loss; 0 writes after being told.",
				`<tr class="late"><td>p0</td><td>x</td><td class="num">0.010 s</td><td>op 7</td><td class="num">1.101 s</td><td class="num">3.100 s</td><td class="num">&#43;1.999 s</td>`,
				`<path class="n" data-n="0"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, h := loadGolden(t, tc.file)
			out := render(t, r, h)
			if want := `: <span class="v-` + string(r.Valid) + `">` + tc.verdict + `</span></h1>`; !strings.Contains(out, want) {
				t.Errorf("report lacks the verdict %q", want)
			}
			for _, c := range r.Checkers {
				if want := "<td>" + c.Checker; !strings.Contains(out, want) {
					t.Errorf("report lacks checker %s", c.Checker)
				}
				if want := `<td class="v-` + string(c.Valid) + `">` + VerdictWord(c.Valid); !strings.Contains(out, want) {
					t.Errorf("report lacks the verdict of %s: %q", c.Checker, want)
				}
			}
			if !strings.Contains(out, `<svg id="tl"`) {
				t.Error("report has no timeline SVG")
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q", w)
				}
			}
			list := anomalySection(t, out)
			var kinds []string
			for _, c := range r.Checkers {
				for _, a := range c.Anomalies {
					kinds = append(kinds, a.Kind)
					if !strings.Contains(list, esc(a.Explanation)) {
						t.Errorf("anomaly list lacks the explanation %q", a.Explanation)
					}
					// Every op that proves it: its record in the list, a red
					// point on the timeline.
					for _, i := range a.Ops {
						if !strings.Contains(list, esc(h[i].String())) {
							t.Errorf("anomaly %s: the list lacks op %d", a.Kind, i)
						}
						if !strings.Contains(out, `<circle data-o="`+strconv.Itoa(i)+`"`) {
							t.Errorf("anomaly %s: the timeline does not mark op %d", a.Kind, i)
						}
					}
				}
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Errorf("anomalies %v, want %v", kinds, tc.kinds)
			}
			if got, want := strings.Count(out, `<g class="anom"`), len(tc.kinds); got != want {
				t.Errorf("timeline draws %d anomalies, want %d", got, want)
			}
			compareGolden(t, filepath.Join("testdata", tc.name+".html.golden"), []byte(out))
		})
	}
}

// compareGolden compares got with the file at path, rewriting it with
// -update.
//
// The page's own stylesheet and script are inlined in every report; the
// golden files hold a placeholder for each (checked here to be the embedded
// files, verbatim), so that they record what differs from page to page.
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	for _, asset := range []struct{ open, body, close, placeholder string }{
		{"<style>", string(reportCSS), "</style>", "<style>/* templates/report.css */</style>"},
		{"<script>", string(reportJS), "</script>", "<script>/* templates/report.js */</script>"},
	} {
		inlined := asset.open + asset.body + asset.close
		if !bytes.Contains(got, []byte(inlined)) {
			t.Fatalf("the page does not inline %s verbatim", asset.placeholder)
		}
		got = bytes.Replace(got, []byte(inlined), []byte(asset.placeholder), 1)
	}
	compareFile(t, path, got)
}

// compareFile compares got with the golden file at path, rewriting it with
// -update.
func compareFile(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reports -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the output differs from %s (if the change is intended, run go test ./reports -update):\n%s",
			path, firstDiff(string(want), string(got)))
	}
}

// TestWriteHTMLExtras writes the report of a session-lock run into a
// folder with logs and a resource log: porcupine's visualization is
// written and linked, and so are the logs and the rejected requests.
func TestWriteHTMLExtras(t *testing.T) {
	r, h := loadGolden(t, "stuck-lock.jsonl")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs", "n1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"logs/driver.log", "logs/n1/server.log"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := `{"f":"write","process":0,"lock":"x","n":1,"token":3,"reply":{"ok":true,"n":1,"time":5000000}}
{"f":"write","process":1,"lock":"x","n":1,"token":2,"reply":{"ok":false,"n":1,"time":6000000,"error":"rejected: token 2 < 3"}}
`
	if err := os.WriteFile(filepath.Join(dir, runstore.ResourceFile), []byte(res), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(dir, r, history.NewTable(h)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, runstore.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, want := range []string{
		`<a href="linearizability.html">porcupine's visualization</a>`,
		`<a href="logs/driver.log">logs/driver.log</a>`,
		`<a href="logs/n1/server.log">logs/n1/server.log</a>`,
		"2 requests the store received (write accepted 1, write rejected 1)",
		esc("rejected: token 2 < 3"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	vis, err := os.ReadFile(filepath.Join(dir, LinearizabilityFile))
	if err != nil {
		t.Fatal(err)
	}
	// porcupine's page, with our description of the ops.
	if !strings.Contains(string(vis), "<html") || !strings.Contains(string(vis), "acquire(x)") {
		t.Errorf("%s is not porcupine's visualization of the mutex ops", LinearizabilityFile)
	}
}
