package reports

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
)

// TestShrinkPage renders the hand-built store's shrink (a golden file):
// the summary and the outcome of the confirmations, the story they were
// marked with, both schedules on one scale with the first violation, every
// step with its size, its replays linked to their reports and its outcome,
// and the confirmations; every link leads to a file of the store, and
// the page has no script.
func TestShrinkPage(t *testing.T) {
	root := t.TempDir()
	handStore(t, root)
	dir := filepath.Join(root, shrinkDir)
	if err := WriteShrinkHTML(dir, root); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, ShrinkHTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	out := string(page)
	for _, want := range []string{
		`Shrink of <code><a href="../../gc/20250101T120000/report.html">store/gc/20250101T120000</a></code>: <span class="good">reproduced in 1 of 2 confirmations</span>`,
		"<strong>3 → 1 faults, 11s → 4s, 4 → 2 clients, 2 replays</strong>, keeping <code>mutual-exclusion: overlapping-holds</code>",
		`<p class="story">` + esc(gcStory) + `</p>`,
		`aria-label="the stored run&#39;s schedule"`, `aria-label="the smallest schedule"`,
		"first violation, 2.1s",
		`<td>c002<span class="tag">smallest</span></td>`,
		`<a class="t-fail" href="candidates/c002/20250107T120101/report.html" title="failed the same way, 2.1s into the faults">INVALID</a>`,
		`<a class="t-held" href="candidates/c001/20250107T120001/report.html" title="held: no anomaly of the kind kept">valid</a>`,
		"<strong>accepted</strong>, 1 of 1 failed", "rejected, 0 of 1 failed", "not run: faults[0]: no worker p1: the candidate cannot run",
		`<a href="../../gc-shrunk/20250107T121100/report.html">gc-shrunk/20250107T121100</a></td><td>valid</td><td>no</td><td>—</td>`,
		`<code>locktest run --schedule <a href="schedule.json">schedule.json</a></code>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(out, "<script") {
		t.Error("the page has a script: it must work as a file, offline")
	}
	for _, m := range hrefRE.FindAllStringSubmatch(out, -1) {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(m[1]))); err != nil {
			t.Errorf("link %s: %v", m[1], err)
		}
	}
	got := bytes.Replace(page, []byte(reportCSS), []byte("/* report.css */"), 1)
	compareFile(t, filepath.Join("testdata", "shrink.html.golden"), got)
}

// TestShrinkPageCases: what a shrink's page says of a search that did not
// end as planned, each from the hand-built store changed one way.
func TestShrinkPageCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, root string, l *ShrinkLog)
		want   []string
		// drawn is how many schedules the page draws.
		drawn int
	}{
		{name: "interrupted, before its schedule and confirmations", change: func(t *testing.T, root string, l *ShrinkLog) {
			// The smallest so far is the accepted step's schedule, and
			// the story is the one its failed replay's history tells.
			l.Interrupted, l.Confirmations, l.Elapsed = true, []ShrinkTrial{}, ""
			if err := os.Remove(filepath.Join(root, shrinkDir, ShrinkScheduleFile)); err != nil {
				t.Fatal(err)
			}
			r, h := loadGolden(t, "overlapping-holders.jsonl")
			r.Run.Expect = "invalid"
			putRun(t, root, candidate2, r, true)
			if err := history.WriteFile(filepath.Join(root, candidate2, runstore.HistoryFile), h); err != nil {
				t.Fatal(err)
			}
		}, drawn: 2, want: []string{`<span class="unknown">interrupted</span>`, "The search was interrupted", "(interrupted)",
			`locktest run --schedule <a href="candidates/c002.json">candidates/c002.json</a>`, "None: the search made no confirmation replay.",
			`<p class="story">`, "started 2025-01-07T12:00:00Z, not finished"}},
		{name: "not reproduced", change: func(t *testing.T, root string, l *ShrinkLog) {
			l.Need, l.Replays = 2, 3
		}, drawn: 2, want: []string{`<span class="bad">reproduced in only 1 of 2 confirmations (want 2)</span>`}},
		{name: "no candidate accepted, and the bug no longer reproduces", change: func(t *testing.T, root string, l *ShrinkLog) {
			l.Smallest, l.After, l.Steps[1].Accepted = "", l.Before, false
			l.Confirmations[0].Failed = false
		}, drawn: 2, want: []string{`<span class="bad">no longer reproduces: no candidate failed the same way, and the stored run&#39;s own schedule did in only 0 of 2 replays (want 1)</span>`}},
		{name: "no candidate accepted, and the stored run's schedule reproduces", change: func(t *testing.T, root string, l *ShrinkLog) {
			l.Smallest, l.After, l.Steps[1].Accepted = "", l.Before, false
		}, drawn: 2, want: []string{`<span class="good">no smaller schedule failed the same way; the stored run&#39;s own reproduced in 1 of 2 replays</span>`}},
		{name: "the budget ran out", change: func(t *testing.T, root string, l *ShrinkLog) { l.BudgetSpent = true },
			drawn: 2, want: []string{"The budget of 30m0s ran out", "30m0s (spent)", "2 replays (the budget ran out)"}},
		{name: "its stored run is gone", change: func(t *testing.T, root string, l *ShrinkLog) {
			if err := os.RemoveAll(filepath.Join(root, gcRun)); err != nil {
				t.Fatal(err)
			}
		}, drawn: 1, want: []string{"Shrink of <code>store/gc/20250101T120000</code>", "Not drawn: the stored run store/gc/20250101T120000 is not in the store."}},
		{name: "a replay is gone", change: func(t *testing.T, root string, l *ShrinkLog) {
			if err := os.RemoveAll(filepath.Join(root, notAgain)); err != nil {
				t.Fatal(err)
			}
		}, drawn: 2, want: []string{"/gc-shrunk/20250107T121100 (not in the store)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			handStore(t, root)
			l := handShrink(root)
			tc.change(t, root, &l)
			dir := filepath.Join(root, shrinkDir)
			if err := runstore.WriteJSON(filepath.Join(dir, ShrinkFile), l); err != nil {
				t.Fatal(err)
			}
			if err := WriteShrinkHTML(dir, root); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, ShrinkHTMLFile))
			if err != nil {
				t.Fatal(err)
			}
			out := string(b)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			if n := strings.Count(out, `<svg class="sched"`); n != tc.drawn {
				t.Errorf("%d schedules drawn, want %d", n, tc.drawn)
			}
		})
	}
	// A shrink.json that cannot be read gives its error and no page.
	dir := t.TempDir()
	putFile(t, dir, ShrinkFile, "{")
	if err := WriteShrinkHTML(dir, dir); err == nil || !strings.Contains(err.Error(), "shrink.json") {
		t.Errorf("a broken shrink.json: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ShrinkHTMLFile)); err == nil {
		t.Error("a page was written for a broken shrink.json")
	}
}

// TestScheduleSVG draws a schedule: a bar per fault from its start to its
// heal, labelled with what it hit and its settings, on a scale shared
// with a longer schedule, and the first violation.
func TestScheduleSVG(t *testing.T) {
	for _, tc := range []struct {
		name       string
		faults     int
		end, first time.Duration
		want       []string
		notWant    []string
	}{
		{name: "the stored run's", faults: 3, want: []string{`>#3</text>`, "pause-client · pause 6s, pause-point before-write: at 700ms, for 6s; it hit p1 in the run it was recorded in", "pause-client p1 · pause 50ms", "noop · window 300ms", "3 faults, 11s"},
			notWant: []string{"first violation"}},
		{name: "a longer scale", faults: 1, end: 11 * time.Second, first: 2100 * time.Millisecond, want: []string{"first violation, 2.1s", "1 fault, 4s", `>10s</text>`}},
		{name: "no fault", faults: 0, want: []string{"no fault", "0 faults, 4s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := gcSchedule()
			if tc.faults < 3 {
				p = smallSchedule()
				p.Faults = p.Faults[:tc.faults]
			}
			svg := string(ScheduleSVG("s", asSchedule(t, p), tc.end, tc.first))
			if n := strings.Count(svg, `class="sfault"`); n != tc.faults {
				t.Errorf("%d bars, want %d", n, tc.faults)
			}
			for _, w := range tc.want {
				if !strings.Contains(svg, esc(w)) && !strings.Contains(svg, w) {
					t.Errorf("the drawing lacks %q:\n%s", w, svg)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(svg, w) {
					t.Errorf("the drawing has %q", w)
				}
			}
		})
	}
	// One scale: the smallest's 4s run takes about a third of the width
	// of the stored run's 11s.
	small := string(ScheduleSVG("s", asSchedule(t, smallSchedule()), 11*time.Second, 0))
	width := f1(4.0 / 11 * (svgWidth - svgLeft - svgRight))
	if !strings.Contains(small, `width="`+width+`" height="28"><title>the run: 4s</title>`) {
		t.Errorf("the smallest schedule is not drawn on the stored run's scale:\n%s", small)
	}
}

// TestShrinkPageOfACopiedStore: a store copied elsewhere, its original
// still in place, gets a page whose links stay in the copy, though
// shrink.json names the original's folders.
func TestShrinkPageOfACopiedStore(t *testing.T) {
	old := t.TempDir()
	handStore(t, old)
	root := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(root, os.DirFS(old)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, shrinkDir)
	if err := WriteShrinkHTML(dir, root); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ShrinkHTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	links := hrefRE.FindAllStringSubmatch(string(b), -1)
	if len(links) < 6 {
		t.Fatalf("%d links, want the stored run, the replays and the schedule", len(links))
	}
	for _, m := range links {
		p, err := filepath.Abs(filepath.Join(dir, filepath.FromSlash(m[1])))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Errorf("link %s leaves the copy", m[1])
		}
	}
}

// asSchedule writes p as the nemesis writes a schedule file and reads it
// back as the shrink page does: the page's reader must take every field it
// draws from the nemesis's own form.
func asSchedule(t *testing.T, p nemesis.Plan) Schedule {
	t.Helper()
	path := filepath.Join(t.TempDir(), "schedule.json")
	if err := runstore.WriteJSON(path, p); err != nil {
		t.Fatal(err)
	}
	s, err := readPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Faults) != len(p.Faults) {
		t.Fatalf("read %d faults of %d", len(s.Faults), len(p.Faults))
	}
	for i, f := range p.Faults {
		g := s.Faults[i]
		if g.At != f.At || g.Lasts != f.Lasts || g.Fault != f.Fault || !slices.Equal(g.Pins, f.Pins) || !slices.Equal(g.Hit, f.Hit) || !maps.Equal(g.Settings, f.Settings) {
			t.Errorf("fault %d read as %+v, written as %+v", i+1, g, f)
		}
	}
	return s
}
