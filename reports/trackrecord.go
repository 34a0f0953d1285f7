package reports

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Bug is one public correctness bug of a lock in a catalogue of bugs
// (scenarios/bugs.yaml): what it is, where it was reported, which versions
// have it and which fixed it. Its scenarios (ScoreRow.Bug names it) are
// the runs that reproduce it on a bad version and hold on a fixed one.
type Bug struct {
	// ID names the bug in commands and make targets (make bug-<ID>):
	// the tracker's name of it in lower case, "etcd-22082".
	ID string `json:"id" yaml:"id"`
	// Title says in one line what goes wrong.
	Title string `json:"title" yaml:"title"`
	// URL is the public report.
	URL string `json:"url" yaml:"url"`
	// Reported is the date of the report, YYYY-MM-DD.
	Reported string `json:"reported" yaml:"reported"`
	// System is the library or server the bug is in.
	System string `json:"system" yaml:"system"`
	// Bad names the versions that have the bug, and Fixed the version
	// that fixed it, or why no fixed version can be installed here.
	Bad   string `json:"bad" yaml:"bad"`
	Fixed string `json:"fixed" yaml:"fixed"`
	// Trigger is what makes it happen, as locktest makes it happen.
	Trigger string `json:"trigger" yaml:"trigger"`
	// Story is the shrunk story of one reproduction in one sentence: what
	// `locktest shrink` left of a failing run. "" until one was shrunk.
	Story string `json:"story,omitempty" yaml:"story"`
	// OutOfReach, when set, says why locktest does not reproduce the bug;
	// the bug then has no scenarios.
	OutOfReach string `json:"out_of_reach,omitempty" yaml:"out_of_reach"`
}

// Check refuses a bug without its id, title, link, date, system, bad
// versions or trigger, or with an id that is not lower-case words and
// numbers joined by dashes.
func (b Bug) Check() error {
	for _, f := range []struct{ name, v string }{{"id", b.ID}, {"title", b.Title}, {"url", b.URL}, {"reported", b.Reported}, {"system", b.System}, {"bad", b.Bad}, {"trigger", b.Trigger}} {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf("bug %q needs %s", b.ID, f.name)
		}
	}
	for _, part := range strings.Split(b.ID, "-") {
		if part == "" || strings.Trim(part, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			return fmt.Errorf("bug id %q must be lower-case words and numbers joined by dashes", b.ID)
		}
	}
	if b.Fixed == "" && b.OutOfReach == "" {
		return fmt.Errorf("bug %q needs fixed: the version that fixed it, or why none can be installed", b.ID)
	}
	return nil
}

// trackCell is what a track record says of a bug on one side (its bad
// or its fixed version): the text of its rows' rates, joined.
func trackCell(rows []ScoreRow, expect string) string {
	var parts []string
	for _, r := range rows {
		if r.Expect != expect {
			continue
		}
		var t string
		switch {
		case r.Conclusive == 0:
			t = "no conclusive run"
		case expect == "violation":
			t = fmt.Sprintf("%s in %s", r.Verdict, r.RateText())
		default:
			t = fmt.Sprintf("%s: %d of %d runs violated (95%% upper bound %s)", fixHeld(r), r.Violations, r.Conclusive, Percent(r.Upper))
		}
		parts = append(parts, fmt.Sprintf("`%s`: %s", r.Name, t))
	}
	return strings.Join(parts, "; ")
}

// MinFixRuns is how many conclusive runs without a violation a fixed
// version needs to have held in a track record.
const MinFixRuns = 10

// fixHeld says what a scenario of a fixed version showed: "held" when at
// least MinFixRuns conclusive runs showed no violation, "violated" when
// one did, else "too few runs".
func fixHeld(r ScoreRow) string {
	switch {
	case r.Violations > 0:
		return "violated"
	case r.Conclusive >= MinFixRuns:
		return "held"
	}
	return "too few runs"
}

// TrackRecordVerdict sums up a bug's rows: "reproduced" when a scenario
// of its bad version reproduced it and every scenario of a fixed version
// held (fixHeld: no violation in at least MinFixRuns conclusive runs);
// "reproduced, not fixed here" when it reproduced and no fixed
// version runs; "out of reach" for a bug with OutOfReach; else "not
// reproduced" or, when a fixed version did not hold, "fix not held".
func TrackRecordVerdict(b Bug, rows []ScoreRow) string {
	if b.OutOfReach != "" {
		return "out of reach"
	}
	repro, fixed, held := false, false, true
	for _, r := range rows {
		switch r.Expect {
		case "violation":
			repro = repro || r.Verdict == Reproduced
		default:
			fixed = true
			held = held && fixHeld(r) == "held"
		}
	}
	switch {
	case !repro:
		return "not reproduced"
	case !fixed:
		return "reproduced, not fixed here"
	case !held:
		return "reproduced, fix not held"
	}
	return "reproduced, fix held"
}

// RenderTrackRecordMarkdown renders the track record of the bugs a
// scoreboard carries, a table as etcd's robustness track record has, but
// measured: per bug its report, versions, the rate on the bad version and
// what the fixed version did, the time to the first violation, the shrunk
// story and the command that reproduces it. Rows of the board that name no
// bug are left out.
func RenderTrackRecordMarkdown(s Scoreboard) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Track record: public lock bugs, measured\n\n")
	fmt.Fprintf(&b, "Made by `%s` on %s, from commit %s, on %s; up to %d seeds per scenario, %d run(s) at once; %s in all.\n\n",
		s.Command, s.Date, s.Commit, s.Machine, s.Seeds, max(s.Parallel, 1), s.Elapsed)
	if v := VersionsText(s.Versions); v != "" {
		fmt.Fprintf(&b, "Versions: %s.\n\n", v)
	}
	tally := map[string]int{}
	for _, bug := range s.Bugs {
		tally[TrackRecordVerdict(bug, bugRows(s, bug.ID))]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(tally)) {
		parts = append(parts, fmt.Sprintf("%d %s", tally[k], k))
	}
	fmt.Fprintf(&b, "%d bugs: %s. A bad version *reproduced* the bug when the share of its runs that showed it has a 95%% interval above 0; a fixed version *held* when none of at least %d conclusive runs showed it (the table gives the one-sided 95%% upper bound of its rate that this leaves).\n\n", len(s.Bugs), strings.Join(parts, ", "), MinFixRuns)
	fmt.Fprintf(&b, "| bug | reported | system | versions | bad version | fixed version | time to the first violation | shrunk story | reproduce |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, bug := range s.Bugs {
		rows := bugRows(s, bug.ID)
		name := fmt.Sprintf("[%s](%s): %s", bug.ID, bug.URL, mdEscape(bug.Title))
		versions := fmt.Sprintf("bad: %s; fixed: %s", mdEscape(bug.Bad), mdEscape(bug.Fixed))
		verdict := TrackRecordVerdict(bug, rows)
		if bug.OutOfReach != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | **no**: %s | — | — | — | — |\n", name, bug.Reported, mdEscape(bug.System), versions, mdEscape(bug.OutOfReach))
			continue
		}
		bad, fixed := trackCell(rows, "violation"), trackCell(rows, "safe")
		if bad == "" {
			bad = "not run"
		}
		if fixed == "" {
			fixed = "none run"
		}
		first := "—"
		for _, r := range rows {
			if r.Expect == "violation" && r.FirstViolation >= 0 {
				first = fmt.Sprintf("earliest %s; median %s", r.FirstText(), r.Survival.MedianText())
			}
		}
		story := mdEscape(bug.Story)
		if story == "" {
			story = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | **%s**: %s | %s | %s | %s | `make bug-%s` |\n",
			name, bug.Reported, mdEscape(bug.System), versions, verdict, bad, fixed, first, story, bug.ID)
	}
	fmt.Fprintf(&b, "\nTriggers:\n\n")
	for _, bug := range s.Bugs {
		fmt.Fprintf(&b, "- **%s**: %s\n", bug.ID, mdEscape(bug.Trigger))
	}
	return b.Bytes()
}

// bugRows returns the rows of s that reproduce or hold the bug id.
func bugRows(s Scoreboard, id string) []ScoreRow {
	var rows []ScoreRow
	for _, r := range s.Rows {
		if r.Bug == id {
			rows = append(rows, r)
		}
	}
	return rows
}
