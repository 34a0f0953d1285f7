package reports

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Verdicts of a scoreboard row: whether the run showed the outcome the
// scenario tests for.
const (
	// Reproduced: a violation scenario showed its violation in at least one
	// conclusive run, or a safe scenario showed none in every run.
	Reproduced = "reproduced"
	// NotReproduced: a violation scenario never showed it in its conclusive
	// runs, or a safe scenario showed a violation.
	NotReproduced = "not reproduced"
	// Inconclusive: the runs could not test the claim (a fault this machine
	// cannot make, a run that failed, a checker that gave up); the reason
	// says which. Never reported as safe.
	Inconclusive = "inconclusive"
)

// Scoreboard is the result of running a scenario catalogue over seeds:
// one row per scenario.
type Scoreboard struct {
	// Date, Commit and Machine say when, from what and where it was made.
	Date    string `json:"date"`
	Commit  string `json:"commit"`
	Machine string `json:"machine"`
	// Seeds is how many seeds each scenario was given at most.
	Seeds   int        `json:"seeds"`
	Elapsed string     `json:"elapsed"`
	Command string     `json:"command"`
	Rows    []ScoreRow `json:"rows"`
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
	Name        string            `json:"name"`
	Claim       int               `json:"claim"`
	Title       string            `json:"title"`
	Source      string            `json:"source"`
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
	// Repro is the make target that loops over seeds until it reproduces.
	Repro string `json:"repro"`
	// Seconds is the wall time of all its runs.
	Seconds float64 `json:"seconds"`
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
	return fmt.Sprintf("%d/%d (%s, 95%% CI %s–%s)", r.Violations, r.Conclusive, pct(r.Rate), pct(r.Lo), pct(r.Hi))
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

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

var scoreTmpl = template.Must(template.New("scoreboard.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/scoreboard.html.tmpl"))

// RenderScoreboardHTML renders the scoreboard as a self-contained page.
func RenderScoreboardHTML(s Scoreboard) ([]byte, error) {
	var b bytes.Buffer
	err := scoreTmpl.Execute(&b, struct {
		Scoreboard
		Style template.CSS
		Tally map[string]int
	}{s, reportCSS, s.Tally()})
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
	fmt.Fprintf(&b, "Made by `%s` on %s, from commit %s, on %s; up to %d seeds per scenario; %s in all.\n\n",
		s.Command, s.Date, s.Commit, s.Machine, s.Seeds, s.Elapsed)
	t := s.Tally()
	fmt.Fprintf(&b, "%d scenarios: %d reproduced, %d not reproduced, %d inconclusive.\n\n", len(s.Rows), t[Reproduced], t[NotReproduced], t[Inconclusive])
	fmt.Fprintf(&b, "| claim | scenario | tests for | violations (95%% CI) | first violation | verdict | who the runs agree with |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range s.Rows {
		name := "`" + r.Name + "`"
		if links && r.Report != "" {
			name = fmt.Sprintf("[`%s`](%s)", r.Name, r.Report)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | **%s** | %s |\n", r.Claim, name, r.Expect, r.RateText(), r.FirstText(), r.Verdict, agreeText(r))
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
		fmt.Fprintf(&b, ".\n\nReproduce: `make repro-%s`, or one run: `%s`", r.Name, r.Command)
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
		switch r.Verdict {
		case NotReproduced:
			c.Failure = &junitMessage{Message: msg, Text: c.SystemOut}
			suite.Failures++
		case Inconclusive:
			c.Skipped = &junitMessage{Message: msg}
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

func orWord(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// WriteScoreboard writes scoreboard.html and scoreboard.md into dir.
func WriteScoreboard(dir string, s Scoreboard) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
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
