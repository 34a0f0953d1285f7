package scenarios

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// bugsHead is a bugs list of one bug, for the files of TestBugsList.
const bugsHead = `bugs:
  - id: x-1
    title: t
    url: https://example.org/x/1
    reported: 2026-01-01
    system: x
    bad: v1
    fixed: v2
    trigger: a pause
`

// TestBugsList checks how a scenario file's bugs list and its scenarios'
// bug keys are read and refused.
func TestBugsList(t *testing.T) {
	good := bugsHead + strings.Replace(scenarioHead, "expect: violation", "expect: violation\n    bug: x-1", 1)
	s, err := Parse([]byte(good), "f.yaml")
	if err != nil || len(s) != 1 || s[0].Bug != "x-1" {
		t.Fatalf("good file: %v, %v", s, err)
	}
	bugs, err := ParseBugs([]byte(good), "f.yaml")
	if err != nil || len(bugs) != 1 || bugs[0].ID != "x-1" || bugs[0].Fixed != "v2" {
		t.Fatalf("ParseBugs: %+v, %v", bugs, err)
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"unknown bug", strings.Replace(good, "bug: x-1", "bug: y-2", 1), `bug "y-2" is not in the file's bugs list`},
		{"no scenario reproduces it", strings.Replace(good, "expect: violation", "expect: safe", 1), `bug "x-1" has no scenario that expects its violation`},
		{"out of reach with scenarios", strings.Replace(good, "    trigger: a pause\n", "    trigger: a pause\n    out_of_reach: no fault makes it\n", 1), `bug "x-1" is out of reach but has scenarios`},
		{"listed twice", strings.Replace(good, "scenarios:", strings.TrimPrefix(bugsHead, "bugs:\n")+"scenarios:", 1), `bug "x-1" is listed twice`},
		{"incomplete", strings.Replace(good, "    url: https://example.org/x/1\n", "", 1), `bug "x-1" needs url`},
		{"unknown bug field", strings.Replace(good, "    bad: v1\n", "    bad: v1\n    severity: high\n", 1), "field severity not found"},
	} {
		if _, err := Parse([]byte(tt.yaml), "f.yaml"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", tt.name, err, tt.want)
		}
	}
	// An out-of-reach bug needs no scenario.
	reach := strings.Replace(bugsHead, "    trigger: a pause\n", "    trigger: a pause\n    out_of_reach: no fault makes it\n", 1) + scenarioHead
	if _, err := Parse([]byte(reach), "f.yaml"); err != nil {
		t.Errorf("an out-of-reach bug without scenarios: %v", err)
	}
}

// TestSelectByBug picks a bug's scenarios by its id, and Pick keeps the
// bugs of the scenarios picked.
func TestSelectByBug(t *testing.T) {
	dir := t.TempDir()
	file := bugsHead + strings.Replace(scenarioHead, "expect: violation", "expect: violation\n    bug: x-1", 1) +
		strings.Replace(strings.TrimPrefix(scenarioHead, "scenarios:\n"), "name: a", "name: b", 1)
	path := filepath.Join(dir, "bugs.yaml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := LoadFiles([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	picked, err := Select(cat.Scenarios, []string{"x-1"})
	if err != nil || len(picked) != 1 || picked[0].Name != "a" {
		t.Fatalf("--only x-1 picked %v, %v; want scenario a", picked, err)
	}
	if bugs := cat.Pick(picked); len(bugs) != 1 || bugs[0].ID != "x-1" {
		t.Errorf("Pick(a) = %+v, want bug x-1", bugs)
	}
	onlyB, _ := Select(cat.Scenarios, []string{"b"})
	if bugs := cat.Pick(onlyB); len(bugs) != 0 {
		t.Errorf("Pick(b) = %+v, want no bug", bugs)
	}
	if _, err := LoadFiles([]string{path, path}); err == nil || !strings.Contains(err.Error(), "also in another file") {
		t.Errorf("a bug in two files: %v", err)
	}
}

// TestWriteTrackRecordKeepsTheHandWrittenPart rewrites the measured table
// and keeps what follows the marker; a board without bugs is refused.
func TestWriteTrackRecordKeepsTheHandWrittenPart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "track-record.md")
	hand := HandWrittenMarker + "\n\n## Out of reach, in detail\n"
	if err := os.WriteFile(path, []byte("old table\n\n"+hand), 0o644); err != nil {
		t.Fatal(err)
	}
	board := NewBoard(t.Context(), time.Unix(0, 0), Options{}, 10, 0.15, "locktest debate --scenarios scenarios/bugs.yaml", "", nil)
	if err := WriteTrackRecord(path, board); err == nil {
		t.Error("a board without bugs was written as a track record")
	}
	board.Bugs = []reports.Bug{{ID: "x-1", Title: "t", URL: "u", Reported: "2026-01-01", System: "x", Bad: "v1", Fixed: "v2", Trigger: "a pause"}}
	board.Rows = []reports.ScoreRow{{Name: "x-bad", Bug: "x-1", Expect: ExpectViolation, Report: "/store/x/report.html",
		Seeds: []reports.ScoreRun{{Seed: 1, Dir: "/store/x/1", Command: "c1"}}}}
	if err := WriteTrackRecord(path, board); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if s := string(b); strings.Contains(s, "old table") || !strings.Contains(s, "| [x-1](u): t |") || !strings.HasSuffix(s, hand) {
		t.Errorf("track record:\n%s", s)
	}
	twin := TrackRecordBoard(path)
	if want := strings.TrimSuffix(path, ".md") + ".json"; twin != want {
		t.Errorf("TrackRecordBoard(%s) = %s, want %s", path, twin, want)
	}
	kept, err := ReadBoard(twin)
	if err != nil {
		t.Fatalf("the board beside the page: %v", err)
	}
	if len(kept.Rows) != 1 || kept.Rows[0].Report != "" || kept.Rows[0].Seeds[0].Dir != "" || kept.Rows[0].Seeds[0].Command != "c1" {
		t.Errorf("the board beside the page keeps rows %+v; want the row without the paths of its runs and pages", kept.Rows)
	}
	if board.Rows[0].Seeds[0].Dir == "" {
		t.Error("WriteTrackRecord cleared the run paths of the board it was given")
	}
	if len(kept.Bugs) != 1 || kept.Bugs[0].ID != "x-1" || kept.Command != board.Command {
		t.Errorf("the board beside the page has bugs %+v and command %q, want x-1 and %q", kept.Bugs, kept.Command, board.Command)
	}
}

// TestOverlay puts a debate's rows over an earlier track record's board:
// a row of the same scenario takes the old one's place, a new scenario
// comes after, the rest stay, and the board's own facts are the new
// debate's.
func TestOverlay(t *testing.T) {
	row := func(name, bug, cmd string) reports.ScoreRow {
		return reports.ScoreRow{Name: name, Bug: bug, Seeds: []reports.ScoreRun{{Seed: 1, Command: cmd}}}
	}
	x, y, z := reports.Bug{ID: "x-1"}, reports.Bug{ID: "y-2"}, reports.Bug{ID: "z-3"}
	base := reports.Scoreboard{Date: "old", Seeds: 20, Command: "debate all", Bugs: []reports.Bug{x, y},
		Rows: []reports.ScoreRow{row("x-bad", "x-1", "old x"), row("y-bad", "y-2", "old y"), row("y-fixed", "y-2", "old y fixed")}}
	for _, tc := range []struct {
		name     string
		top      reports.Scoreboard
		rows     []string // name=command, in order
		bugs     []string
		seeds    int
		wantDate string
	}{
		{"one bug again", reports.Scoreboard{Date: "new", Seeds: 10, Command: "debate --only y-2", Bugs: []reports.Bug{y},
			Rows: []reports.ScoreRow{row("y-fixed", "y-2", "new y fixed"), row("y-bad", "y-2", "new y")}},
			[]string{"x-bad=old x", "y-bad=new y", "y-fixed=new y fixed"}, []string{"x-1", "y-2"}, 20, "new"},
		{"a new scenario and bug", reports.Scoreboard{Date: "new", Seeds: 30, Bugs: []reports.Bug{z},
			Rows: []reports.ScoreRow{row("z-bad", "z-3", "new z")}},
			[]string{"x-bad=old x", "y-bad=old y", "y-fixed=old y fixed", "z-bad=new z"}, []string{"x-1", "y-2", "z-3"}, 30, "new"},
		{"nothing run", reports.Scoreboard{Date: "new"},
			[]string{"x-bad=old x", "y-bad=old y", "y-fixed=old y fixed"}, []string{"x-1", "y-2"}, 20, "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Overlay(base, tc.top)
			var rows, bugs []string
			for _, r := range got.Rows {
				rows = append(rows, r.Name+"="+r.Seeds[0].Command)
			}
			for _, b := range got.Bugs {
				bugs = append(bugs, b.ID)
			}
			if !slices.Equal(rows, tc.rows) || !slices.Equal(bugs, tc.bugs) || got.Seeds != tc.seeds || got.Date != tc.wantDate || got.Command != tc.top.Command {
				t.Errorf("Overlay: rows %v, bugs %v, seeds %d, date %q, command %q; want %v, %v, %d, %q, %q",
					rows, bugs, got.Seeds, got.Date, got.Command, tc.rows, tc.bugs, tc.seeds, tc.wantDate, tc.top.Command)
			}
		})
	}
	if len(base.Rows) != 3 || base.Rows[1].Seeds[0].Command != "old y" || len(base.Bugs) != 2 {
		t.Errorf("Overlay changed its base: %+v", base)
	}
}

// TestMergeJoinsTheBugs joins the debates of two bugs into one board that
// has both bugs, once each, in the order first seen.
func TestMergeJoinsTheBugs(t *testing.T) {
	x := reports.Bug{ID: "x-1"}
	y := reports.Bug{ID: "y-2"}
	a := reports.Scoreboard{Seeds: 10, Bugs: []reports.Bug{x}, Rows: []reports.ScoreRow{{Name: "x-1-bad", Bug: "x-1", Expect: ExpectViolation}}}
	b := reports.Scoreboard{Seeds: 10, Bugs: []reports.Bug{y, x}, Rows: []reports.ScoreRow{{Name: "y-2-bad", Bug: "y-2", Expect: ExpectViolation}}}
	m, err := Merge([]reports.Scoreboard{a, b}, t.TempDir(), 0.15)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Bugs) != 2 || m.Bugs[0].ID != "x-1" || m.Bugs[1].ID != "y-2" || len(m.Rows) != 2 {
		t.Errorf("merged bugs %+v, rows %d; want x-1, y-2 and 2 rows", m.Bugs, len(m.Rows))
	}
	if len(a.Bugs) != 1 {
		t.Errorf("Merge changed its first board's bugs: %+v", a.Bugs)
	}
}

// TestAttachBugs names the bug of a row made from another file of the
// same scenario, and refuses a row whose runs ran other settings.
func TestAttachBugs(t *testing.T) {
	file := bugsHead + strings.Replace(scenarioHead, "expect: violation", "expect: violation\n    bug: x-1", 1)
	path := filepath.Join(t.TempDir(), "bugs.yaml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := LoadFiles([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	s := cat.Scenarios[0]
	board := reports.Scoreboard{Rows: []reports.ScoreRow{
		{Name: "a", Seeds: []reports.ScoreRun{{Seed: 3, Command: s.Command(3)}}},
		{Name: "other", Bug: "z-9"},
	}}
	got, err := AttachBugs(board, cat)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows[0].Bug != "x-1" || got.Rows[1].Bug != "" || len(got.Bugs) != 1 || got.Bugs[0].ID != "x-1" {
		t.Errorf("rows %+v, bugs %+v", got.Rows, got.Bugs)
	}
	board.Rows[0].Seeds[0].Command = strings.Replace(s.Command(3), "--impl redis-set-nx-px", "--impl redlock", 1)
	if _, err := AttachBugs(board, cat); err == nil || !strings.Contains(err.Error(), "not the scenario as the bugs file has it") {
		t.Errorf("a row of other settings: %v", err)
	}
}

// TestReadUnderChecksOnlyTheRowsItKeeps: a row of the earlier board
// whose scenario the debate runs again may have run other settings, as it
// is replaced; a row that is kept may not, and is refused before the
// debate's first run. WriteTrackRecordOver then puts the debate's rows
// over the board read, and names their bugs.
func TestReadUnderChecksOnlyTheRowsItKeeps(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bugs.yaml")
	if err := os.WriteFile(file, []byte(bugsHead+strings.Replace(scenarioHead, "expect: violation", "expect: violation\n    bug: x-1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := LoadFiles([]string{file})
	if err != nil {
		t.Fatal(err)
	}
	s := cat.Scenarios[0]
	under := filepath.Join(dir, "under.json")
	stale := reports.Scoreboard{Rows: []reports.ScoreRow{{Name: s.Name, Seeds: []reports.ScoreRun{{Seed: 3, Command: "locktest run --impl redlock --seed 3"}}}}}
	if err := runstore.WriteJSON(under, stale); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadUnder(under, cat, nil); err == nil || !strings.Contains(err.Error(), under+": scenario a seed 3") {
		t.Errorf("a stale row kept: %v", err)
	}
	b, err := ReadUnder(under, cat, cat.Scenarios)
	if err != nil {
		t.Fatalf("a stale row run again: %v", err)
	}
	top := reports.Scoreboard{Rows: []reports.ScoreRow{{Name: s.Name, Expect: ExpectViolation, Seeds: []reports.ScoreRun{{Seed: 3, Command: s.Command(3)}}}}}
	page := filepath.Join(dir, "track-record.md")
	if err := WriteTrackRecordOver(page, &b, top, cat); err != nil {
		t.Fatal(err)
	}
	got, err := ReadBoard(TrackRecordBoard(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 1 || got.Rows[0].Bug != "x-1" || got.Rows[0].Seeds[0].Command != s.Command(3) || len(got.Bugs) != 1 {
		t.Errorf("the page's board: rows %+v, bugs %+v; want the debate's row of x-1", got.Rows, got.Bugs)
	}
}

// TestBugsCatalogue loads scenarios/bugs.yaml as make bug-ID does, from
// the repository's root, and checks that the track record in the docs
// has a row for each of its bugs, and no other: the catalogue and
// docs/track-record.md stay in step.
func TestBugsCatalogue(t *testing.T) {
	t.Chdir("..")
	cat, err := LoadFiles([]string{"scenarios/bugs.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Bugs) < 8 {
		t.Errorf("the catalogue has %d bugs; the track record promises at least 8", len(cat.Bugs))
	}
	doc, err := os.ReadFile("docs/track-record.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| \[([a-z0-9-]+)\]\(`).FindAllStringSubmatch(string(doc), -1)
	var inDoc []string
	for _, r := range rows {
		inDoc = append(inDoc, r[1])
	}
	var want []string
	for _, b := range cat.Bugs {
		want = append(want, b.ID)
	}
	if !slices.Equal(inDoc, want) {
		t.Errorf("docs/track-record.md has rows %v; scenarios/bugs.yaml has bugs %v (make track-record remakes it)", inDoc, want)
	}
	// The shrunk story is the catalogue's: each reproduced bug has one,
	// and the page shows it as the catalogue says it.
	cells := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if m := regexp.MustCompile(`^\| \[([a-z0-9-]+)\]\(`).FindStringSubmatch(line); m != nil {
			cells[m[1]] = regexp.MustCompile(`\s+\|\s+`).Split(strings.Trim(strings.ReplaceAll(line, `\|`, "\x00"), "| "), -1)
		}
	}
	for _, b := range cat.Bugs {
		if b.OutOfReach == "" && b.Story == "" {
			t.Errorf("bug %s is reproduced but has no shrunk story: shrink one of its violating runs (locktest shrink --budget 8m RUN) and put the story in its story key", b.ID)
		}
		want := strings.ReplaceAll(strings.ReplaceAll(b.Story, "|", "\x00"), "\n", " ")
		if want == "" {
			want = "—"
		}
		if c := cells[b.ID]; len(c) != 9 || c[7] != want {
			t.Errorf("docs/track-record.md's row of %s does not show its story as scenarios/bugs.yaml has it (want %q; make track-record remakes the page)", b.ID, want)
		}
	}
}
