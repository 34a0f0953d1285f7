package reports

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/locktest/locktest/runstore"
)

// Verdicts of a scoreboard row: whether the runs showed the outcome the
// scenario tests for, and how strongly.
const (
	// Reproduced: a violation scenario showed its violation in at least one
	// conclusive run.
	Reproduced = "reproduced"
	// NotReproduced: a violation scenario never showed it in its conclusive
	// runs.
	NotReproduced = "not reproduced"
	// Held: a safe scenario showed no violation, in enough conclusive runs
	// that the one-sided 95% upper bound of its violation rate is below
	// the stated level (ScoreRow.MaxRate).
	Held = "held"
	// NotRefuted: a safe scenario showed no violation, in too few runs to
	// bound its rate below the stated level; the reason gives the bound.
	NotRefuted = "not refuted"
	// Refuted: a safe scenario showed a violation.
	Refuted = "refuted"
	// Inconclusive: the runs could not test the claim (a fault this machine
	// cannot make, a run that failed, a checker that gave up); the reason
	// says which. Never reported as safe.
	Inconclusive = "inconclusive"
)

// Verdicts lists the verdicts in the order a summary gives them.
var Verdicts = []string{Reproduced, Held, NotReproduced, Refuted, NotRefuted, Inconclusive}

// Expected reports whether a row's verdict is what its scenario expects
// (reproduced or held); Unexpected whether it is the opposite (not
// reproduced or refuted). A verdict that is neither is inconclusive, or
// not refuted: too weak either way.
func Expected(verdict string) bool { return verdict == Reproduced || verdict == Held }

// Unexpected reports whether a verdict contradicts what its scenario
// expects.
func Unexpected(verdict string) bool { return verdict == NotReproduced || verdict == Refuted }

// ScoreboardSchemaVersion is the version of the scoreboard's JSON layout
// (docs/schemas/scoreboard.schema.json). It grows by one with every change
// a reader could trip on.
const ScoreboardSchemaVersion = 2

// Scoreboard is the result of running a scenario catalogue over seeds:
// one row per scenario.
type Scoreboard struct {
	SchemaVersion int `json:"schema_version"`
	// Date, Commit and Machine say when, from what and where it was made.
	Date    string `json:"date"`
	Commit  string `json:"commit"`
	Machine string `json:"machine"`
	// Seeds is how many seeds each scenario was given at most.
	Seeds int `json:"seeds"`
	// Parallel is how many runs went at once; Shard ("1/4") names the
	// share of the runs this board holds, "" for all of them.
	Parallel int    `json:"parallel"`
	Shard    string `json:"shard,omitempty"`
	// MaxRate is the level a safe scenario's violation rate must be shown
	// to stay below to be held.
	MaxRate float64 `json:"max_rate"`
	// Versions are the versions of locktest, the servers and the client
	// libraries of all its runs.
	Versions runstore.Versions `json:"versions"`
	Elapsed  string            `json:"elapsed"`
	Command  string            `json:"command"`
	Rows     []ScoreRow        `json:"rows"`
	// Compared, when set, sets this scoreboard beside another of the
	// same scenarios (merge --compare).
	Compared *ScoreComparison `json:"compared,omitempty"`
	// Sources are the works the scenarios' claims come from.
	Sources []ScoreSource `json:"sources,omitempty"`
	// Bugs are the public bugs the scenarios reproduce (a catalogue of
	// bugs such as scenarios/bugs.yaml), in catalogue order.
	Bugs []Bug `json:"bugs,omitempty"`
}

// ScoreSource is a work a scenario's claim comes from, as the catalogue
// lists it: the short name scenarios cite it by, its author and title, and
// where to read it ("" for a source without an address).
type ScoreSource struct {
	Name  string `json:"name" yaml:"name"`
	Title string `json:"title" yaml:"title"`
	URL   string `json:"url,omitempty" yaml:"url"`
}

// ScoreComparison sets a scoreboard beside another of the same scenarios,
// made another way (with --parallel 1, say, or on another machine): per
// scenario both rates and whether they agree.
type ScoreComparison struct {
	// Command, Seeds, Parallel and Elapsed say how the other scoreboard
	// was made.
	Command  string `json:"command"`
	Seeds    int    `json:"seeds"`
	Parallel int    `json:"parallel"`
	Elapsed  string `json:"elapsed"`
	// Rows are the scenarios found in both, in this board's order.
	Rows []ScoreAgreement `json:"rows"`
	// Missing names the scenarios of this board the other lacks.
	Missing []string `json:"missing,omitempty"`
}

// ScoreAgreement is one scenario in two scoreboards.
type ScoreAgreement struct {
	Name string `json:"name"`
	// Here and There are the rates with their intervals (RateText), and
	// HereVerdict and ThereVerdict the verdicts.
	Here         string `json:"here"`
	There        string `json:"there"`
	HereVerdict  string `json:"here_verdict"`
	ThereVerdict string `json:"there_verdict"`
	// Agree is true when both showed the same outcome (a violation in
	// some run, or none) and their 95% intervals overlap; Why says why not.
	Agree bool   `json:"agree"`
	Why   string `json:"why,omitempty"`
}

// Disagreements counts the rows that do not agree.
func (c ScoreComparison) Disagreements() int {
	n := 0
	for _, r := range c.Rows {
		if !r.Agree {
			n++
		}
	}
	return n
}

// CompareScoreboards compares board with other, scenario by scenario: two
// rows agree when both have conclusive runs, both saw a violation or both
// saw none, and their 95% Wilson intervals overlap. It is pure.
func CompareScoreboards(board, other Scoreboard) ScoreComparison {
	c := ScoreComparison{Command: other.Command, Seeds: other.Seeds, Parallel: other.Parallel, Elapsed: other.Elapsed}
	theirs := map[string]ScoreRow{}
	for _, r := range other.Rows {
		theirs[r.Name] = r
	}
	for _, r := range board.Rows {
		o, ok := theirs[r.Name]
		if !ok {
			c.Missing = append(c.Missing, r.Name)
			continue
		}
		a := ScoreAgreement{Name: r.Name, Here: r.RateText(), There: o.RateText(), HereVerdict: r.Verdict, ThereVerdict: o.Verdict}
		switch {
		case r.Conclusive == 0 || o.Conclusive == 0:
			a.Why = "no conclusive run on one side"
		case (r.Violations > 0) != (o.Violations > 0):
			a.Why = "one side saw a violation, the other none"
		case r.Lo > o.Hi || o.Lo > r.Hi:
			a.Why = "the 95% intervals do not overlap"
		default:
			a.Agree = true
		}
		c.Rows = append(c.Rows, a)
	}
	return c
}

// ScoreRun is what one run of a scenario showed.
type ScoreRun struct {
	Seed int64 `json:"seed"`
	// Dir is the stored run's folder; "" when the run could not start.
	Dir string `json:"dir,omitempty"`
	// Outcome is "violation", "safe", or "" when the run was inconclusive;
	// Reason then says why.
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Kinds counts the run's anomalies by kind.
	Kinds map[string]int `json:"anomalies,omitempty"`
	// FirstViolation is the time, in seconds from the run's start, of the
	// earliest op of an anomaly that counts as the violation; -1 if none.
	FirstViolation float64 `json:"first_violation_s"`
	Seconds        float64 `json:"seconds"`
	// Workload is how long the run's workload ran, in seconds from the
	// run's start (its last recorded op): to its end, or to where it was
	// stopped at its first violation. A run that ended clean says the lock
	// lasted at least this long (its survival is censored here); 0 when
	// the run recorded nothing.
	Workload float64 `json:"workload_s,omitempty"`
	// Faults counts the faults applied; Effective those in force while a
	// client held the lock (faults that had a chance to matter), -1 when
	// the run did not say.
	Faults    int `json:"faults_injected"`
	Effective int `json:"faults_effective"`
	// Command reproduces this run.
	Command string `json:"command"`
	// Versions are what the run ran.
	Versions runstore.Versions `json:"versions"`
}

// ScorePrediction is what one side predicts, and whether the runs agree.
type ScorePrediction struct {
	Side string `json:"side"`
	Says string `json:"says"`
	// Agrees is "yes" or "no" once an outcome was observed, else "".
	Agrees string `json:"agrees,omitempty"`
}

// ScoreRow is one scenario's runs, summed up.
type ScoreRow struct {
	Name   string `json:"name"`
	Claim  int    `json:"claim"`
	Title  string `json:"title"`
	Source string `json:"source"`
	// Bug is the id of the public bug (Scoreboard.Bugs) the scenario
	// reproduces or holds; "" for a scenario about no bug.
	Bug         string            `json:"bug,omitempty"`
	Predictions []ScorePrediction `json:"predictions"`
	// Expect is the outcome the scenario tests for: violation or safe.
	Expect string `json:"expect"`
	// Runs were made; Conclusive of them tested the claim; Violations of
	// those showed the violation.
	Runs       int `json:"runs"`
	Conclusive int `json:"conclusive"`
	Violations int `json:"violations"`
	// Rate is Violations/Conclusive with its 95% Wilson interval [Lo, Hi].
	Rate float64 `json:"rate"`
	Lo   float64 `json:"lo"`
	Hi   float64 `json:"hi"`
	// Upper is the one-sided 95% Wilson upper bound of the rate, which a
	// held safe scenario must have below MaxRate; 1 without a conclusive
	// run.
	Upper   float64 `json:"upper"`
	MaxRate float64 `json:"max_rate"`
	// FirstViolation is the earliest time, in seconds from a run's start,
	// at which a run showed the violation; negative when none did.
	FirstViolation float64 `json:"first_violation_s"`
	// Observed is violation or safe, by the conclusive runs; "" when none.
	Observed string `json:"observed,omitempty"`
	Verdict  string `json:"verdict"`
	// Reason explains an inconclusive or unexpected verdict.
	Reason string `json:"reason,omitempty"`
	// Anomalies counts the anomaly kinds over all runs.
	Anomalies map[string]int `json:"anomalies,omitempty"`
	// Report is one run's report.html, relative to the scoreboard: a run
	// that showed the violation when one did.
	Report string `json:"report,omitempty"`
	// Command reproduces one run (the one linked, or the first).
	Command string `json:"command"`
	// Repro is the command that loops over seeds until it reproduces: a
	// make target for a built-in scenario ("make repro-NAME"), a debate of
	// its own file for one read from a file.
	Repro string `json:"repro"`
	// Seconds is the wall time of all its runs.
	Seconds float64 `json:"seconds"`
	// Versions are the versions its runs ran, joined where they differ.
	Versions runstore.Versions `json:"versions"`
	// Survival is how long the lock lasted in the conclusive runs: the
	// time to each run's first violation, or the time a clean run ran
	// (its Workload); nil without a conclusive run.
	Survival *Survival `json:"survival,omitempty"`
	// Seeds are its runs, one per seed, in seed order.
	Seeds []ScoreRun `json:"seeds"`
}

// ReproCommand is the command that loops over seeds until the row's
// scenario reproduces. A scoreboard written before Repro held a command
// names the make target alone ("repro-NAME").
func (r ScoreRow) ReproCommand() string {
	if strings.HasPrefix(r.Repro, "repro-") {
		return "make " + r.Repro
	}
	return cmp.Or(r.Repro, "make repro-"+r.Name)
}

// TallyText renders the tally in the order of Verdicts, leaving out
// verdicts no row has: "5 reproduced, 3 held, 1 not refuted".
func (s Scoreboard) TallyText() string {
	t := s.Tally()
	var parts []string
	for _, v := range Verdicts {
		if t[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", t[v], v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// VersionsText renders versions in one line: "redis 7.0.15, etcd 3.7.3;
// github.com/redis/go-redis/v9 v9.23.0; locktest v1.2 abc123"; "" for
// none.
func VersionsText(v runstore.Versions) string {
	var parts []string
	for _, m := range []map[string]string{v.Servers, v.Clients} {
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var one []string
		for _, k := range ks {
			one = append(one, k+" "+m[k])
		}
		if len(one) > 0 {
			parts = append(parts, strings.Join(one, ", "))
		}
	}
	if v.Locktest != "" {
		parts = append(parts, "locktest "+v.Locktest)
	}
	return strings.Join(parts, "; ")
}

// Tally counts the rows by verdict.
func (s Scoreboard) Tally() map[string]int {
	t := map[string]int{}
	for _, r := range s.Rows {
		t[r.Verdict]++
	}
	return t
}

// RateText renders the violation rate and its interval, "2/3 (67%, 95% CI
// 21–94%)".
func (r ScoreRow) RateText() string {
	if r.Conclusive == 0 {
		return "no conclusive run"
	}
	return fmt.Sprintf("%d/%d (%s, 95%% CI %s–%s)", r.Violations, r.Conclusive, Percent(r.Rate), Percent(r.Lo), Percent(r.Hi))
}

// FirstText renders the time to the first violation.
func (r ScoreRow) FirstText() string {
	if r.FirstViolation < 0 || math.IsNaN(r.FirstViolation) {
		return "—"
	}
	return fmt.Sprintf("%.1f s", r.FirstViolation)
}

// AnomalyText renders the anomaly counts, "lost-update ×4, stale-write ×2".
func (r ScoreRow) AnomalyText() string {
	if len(r.Anomalies) == 0 {
		return "none"
	}
	return KindsText(r.Anomalies)
}

// KindsText renders counts of anomaly kinds in name order, "lost-update ×4,
// stale-write ×2"; "" for none.
func KindsText(k map[string]int) string {
	ks := make([]string, 0, len(k))
	for name := range k {
		ks = append(ks, name)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, name := range ks {
		parts[i] = fmt.Sprintf("%s ×%d", name, k[name])
	}
	return strings.Join(parts, ", ")
}

// Percent renders a proportion as a whole percentage: 0.156 is "16%".
func Percent(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

var scoreTmpl = template.Must(template.New("scoreboard.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/scoreboard.html.tmpl"))

// RenderScoreboardHTML renders the scoreboard as a self-contained page.
func RenderScoreboardHTML(s Scoreboard) ([]byte, error) {
	var b bytes.Buffer
	err := scoreTmpl.Execute(&b, struct {
		Scoreboard
		Style        template.CSS
		VersionsText string
	}{s, reportCSS, VersionsText(s.Versions)})
	return b.Bytes(), err
}

// RenderScoreboardMarkdown renders the scoreboard as Markdown: a header
// saying when, where and from what it was made, a summary table, and per
// claim the predictions, what was observed and how to reproduce it. With
// links false it leaves out the links to run reports (for a copy committed
// to the repository, where the runs are not).
func RenderScoreboardMarkdown(s Scoreboard, links bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The debate, measured\n\n")
	fmt.Fprintf(&b, "Made by `%s` on %s, from commit %s, on %s; up to %d seeds per scenario, %d run(s) at once; %s in all.\n\n",
		s.Command, s.Date, s.Commit, s.Machine, s.Seeds, max(s.Parallel, 1), s.Elapsed)
	fmt.Fprintf(&b, "%d scenarios: %s.\n\n", len(s.Rows), s.TallyText())
	if v := VersionsText(s.Versions); v != "" {
		fmt.Fprintf(&b, "Versions: %s.\n\n", v)
	}
	fmt.Fprintf(&b, "A safe scenario is *held* when the one-sided 95%% upper bound of its violation rate is below %s; with no violation in fewer runs it is *not refuted*, with the bound it reached.\n\n", Percent(s.MaxRate))
	fmt.Fprintf(&b, "| claim | scenario | tests for | violations (95%% CI) | first violation | median time to failure | verdict | who the runs agree with |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range s.Rows {
		name := "`" + r.Name + "`"
		if links && r.Report != "" {
			name = fmt.Sprintf("[`%s`](%s)", r.Name, r.Report)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | **%s** | %s |\n", r.Claim, name, r.Expect, r.RateText(), r.FirstText(), r.Survival.MedianText(), r.Verdict, agreeText(r))
	}
	if len(s.Sources) > 0 {
		fmt.Fprintf(&b, "\nSources:\n\n")
		for _, src := range s.Sources {
			title := mdEscape(src.Title)
			if src.URL != "" {
				title = fmt.Sprintf("[%s](%s)", title, src.URL)
			}
			fmt.Fprintf(&b, "- %s: %s\n", mdEscape(src.Name), title)
		}
	}
	if c := s.Compared; c != nil {
		fmt.Fprintf(&b, "\n## Compared with another run of the same scenarios\n\n")
		fmt.Fprintf(&b, "`%s`, up to %d seeds per scenario, %d run(s) at once, took %s; this one, up to %d seeds, %d at once, took %s. %d of %d scenarios agree (the same outcome, and overlapping 95%% intervals).\n\n",
			c.Command, c.Seeds, max(c.Parallel, 1), c.Elapsed, s.Seeds, max(s.Parallel, 1), s.Elapsed, len(c.Rows)-c.Disagreements(), len(c.Rows))
		fmt.Fprintf(&b, "| scenario | here | verdict | there | verdict | agree |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, r := range c.Rows {
			agree := "yes"
			if !r.Agree {
				agree = "**no**: " + r.Why
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", r.Name, r.Here, r.HereVerdict, r.There, r.ThereVerdict, agree)
		}
		if len(c.Missing) > 0 {
			fmt.Fprintf(&b, "\nNot in the other run: %s.\n", strings.Join(c.Missing, ", "))
		}
	}
	for _, r := range s.Rows {
		fmt.Fprintf(&b, "\n## %d. %s — %s\n\n", r.Claim, r.Name, mdEscape(r.Title))
		fmt.Fprintf(&b, "Source: %s.\n\n", mdEscape(r.Source))
		for _, p := range r.Predictions {
			mark := ""
			switch p.Agrees {
			case "yes":
				mark = " ✔ (the runs agree)"
			case "no":
				mark = " ✘ (the runs disagree)"
			}
			fmt.Fprintf(&b, "- %s predicts: %s%s\n", sideName(p.Side), mdEscape(p.Says), mark)
		}
		fmt.Fprintf(&b, "\nObserved over %d runs (%d conclusive): violations %s; first violation %s; anomalies %s. Verdict: **%s**",
			r.Runs, r.Conclusive, r.RateText(), r.FirstText(), r.AnomalyText(), r.Verdict)
		if r.Reason != "" {
			fmt.Fprintf(&b, " — %s", mdEscape(r.Reason))
		}
		b.WriteString(".\n\n")
		if t := r.Survival.Text(); t != "" {
			fmt.Fprintf(&b, "Time to failure: %s.\n\n", t)
		}
		fmt.Fprintf(&b, "Reproduce: `%s`, or one run: `%s`", r.ReproCommand(), r.Command)
		if links && r.Report != "" {
			fmt.Fprintf(&b, "; [report](%s)", r.Report)
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

func agreeText(r ScoreRow) string {
	var yes []string
	for _, p := range r.Predictions {
		if p.Agrees == "yes" {
			yes = append(yes, sideName(p.Side))
		}
	}
	switch {
	case r.Observed == "":
		return "—"
	case len(yes) == 0:
		return "neither"
	}
	return strings.Join(yes, ", ")
}

// sideName capitalises a side's key for display: kleppmann → Kleppmann;
// antirez stays lower-case, as he writes it.
func sideName(side string) string {
	switch side {
	case "antirez", "":
		return side
	case "jepsen":
		return "Jepsen"
	}
	return strings.ToUpper(side[:1]) + side[1:]
}

// junit is the JUnit XML layout CI systems read.
type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// RenderJUnit renders the scoreboard as JUnit XML: one test case per
// scenario, failed when the observed outcome differs from the expected one
// (not reproduced), skipped when inconclusive.
func RenderJUnit(s Scoreboard) ([]byte, error) {
	suite := junitSuite{Name: "locktest debate", Tests: len(s.Rows)}
	var total float64
	for _, r := range s.Rows {
		total += r.Seconds
		c := junitCase{Name: r.Name, Classname: fmt.Sprintf("locktest.claim%d", r.Claim), Time: fmt.Sprintf("%.3f", r.Seconds),
			SystemOut: fmt.Sprintf("expected %s; violations %s; anomalies %s; reproduce: %s", r.Expect, r.RateText(), r.AnomalyText(), r.Command)}
		msg := fmt.Sprintf("expected %s, observed %s", r.Expect, orWord(r.Observed, "nothing conclusive"))
		if r.Reason != "" {
			msg += ": " + r.Reason
		}
		switch {
		case Unexpected(r.Verdict):
			c.Failure = &junitMessage{Message: msg, Text: c.SystemOut}
			suite.Failures++
		case !Expected(r.Verdict):
			c.Skipped = &junitMessage{Message: r.Verdict + ": " + msg}
			suite.Skipped++
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Time = fmt.Sprintf("%.3f", total)
	out, err := xml.MarshalIndent(suite, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}

// RenderMatrixJUnit renders the matrix as JUnit XML: one test case per
// cell (impl, column), failed when it got worse than the baseline (worse
// holds why, by "impl column"), skipped when it is inconclusive. A matrix
// finds violations by design, so a violated cell fails only against a
// baseline that had none.
func RenderMatrixJUnit(m Matrix, worse map[string]string) ([]byte, error) {
	suite := junitSuite{Name: "locktest matrix", Time: "0"}
	for _, r := range m.Rows {
		for _, col := range m.Columns {
			cell, ok := r.Cells[col.Key]
			if !ok {
				continue
			}
			c := junitCase{Name: r.Impl + " " + col.Key, Classname: "locktest.matrix." + r.Backend, Time: "0",
				SystemOut: strings.TrimSpace(cell.Status + ": " + cell.Value + " " + cell.Reason)}
			switch why, w := worse[r.Impl+" "+col.Key]; {
			case w:
				c.Failure = &junitMessage{Message: "worse than the baseline: " + why, Text: c.SystemOut}
				suite.Failures++
			case cell.Status == StatusInconclusive:
				c.Skipped = &junitMessage{Message: "inconclusive: " + cell.Reason}
				suite.Skipped++
			}
			suite.Cases = append(suite.Cases, c)
		}
	}
	suite.Tests = len(suite.Cases)
	out, err := xml.MarshalIndent(suite, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}

func orWord(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// ScoreboardJSONFile is the scoreboard's machine-readable form, which
// `locktest merge` reads back.
const ScoreboardJSONFile = "scoreboard.json"

// WriteScoreboard writes scoreboard.json, scoreboard.html and
// scoreboard.md into dir.
func WriteScoreboard(dir string, s Scoreboard) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := runstore.WriteJSON(filepath.Join(dir, ScoreboardJSONFile), s); err != nil {
		return err
	}
	page, err := RenderScoreboardHTML(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "scoreboard.html"), page, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "scoreboard.md"), RenderScoreboardMarkdown(s, true), 0o644)
}

// StallsText says in one sentence what the run's stall watch saw
// (runstore.Stalls): "none over 250ms (a 10ms timer of the driver)", or
// "the driver's 10ms timer woke up to 2.7s late, at 6.8s (4 times 250ms or
// more): longer than half the TTL of 1s, so a lease may have broken with no
// fault"; "" when the run did not measure it.
func StallsText(r runstore.RunInfo) string {
	s := r.Stalls
	if s == nil {
		return ""
	}
	ttl, _ := time.ParseDuration(r.TTL)
	var out string
	if s.Count == 0 {
		out = fmt.Sprintf("none of %s or more (a %s timer of the driver)", s.Over, s.Tick)
	} else {
		out = fmt.Sprintf("the driver's %s timer woke up to %s late, at %s (%s %s or more)", s.Tick, s.Longest, s.LongestAt, timesText(s.Count), s.Over)
		if runstore.StallMayBreakLease(r.LongestStall(), ttl) {
			out += fmt.Sprintf(": longer than half the TTL of %s, so a lease may have broken with no fault (the machine paused every process, as a GC pause would)", ttl)
		}
	}
	switch d := s.Disk; {
	case d == nil:
	case d.Count == 0:
		out += fmt.Sprintf("; the disk synced within %s (%d syncs of a probe file)", d.Over, d.Syncs)
	default:
		out += fmt.Sprintf("; a sync of the disk took up to %s, at %s (%d of %d syncs of a probe file over %s)", d.Longest, d.LongestAt, d.Count, d.Syncs, d.Over)
		if runstore.StallMayBreakLease(r.LongestDiskStall(), ttl) {
			out += fmt.Sprintf(": longer than half the TTL of %s, so a service that syncs before it answers (ZooKeeper, etcd) may have let a lease expire with no fault", ttl)
		}
	}
	if h := s.Hosts; h != nil && h.Host != "" {
		out += fmt.Sprintf("; the hosts answered keepalives within %s (slowest: %s, at %s)", h.Longest, h.Host, h.LongestAt)
		if runstore.StallMayBreakLease(r.LongestHostStall(), ttl) {
			out += fmt.Sprintf(": longer than half the TTL of %s, so a node on that host may have let a lease expire with no fault", ttl)
		}
	}
	return out
}

// timesText renders a count as "once" or "3 times".
func timesText(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}
