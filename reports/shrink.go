package reports

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// The files of a shrink (`locktest shrink`) in its search's folder,
// STORE/<name>.shrink/<time>/: the search's log, its page, and the
// smallest schedule.
const (
	ShrinkFile         = "shrink.json"
	ShrinkHTMLFile     = "shrink.html"
	ShrinkScheduleFile = "schedule.json"
)

// ShrinkLog is shrink.json as package shrink writes it
// (docs/schemas/shrink.schema.json), read back to be shown: the search's
// settings, every candidate with its replays, and the result. It holds
// every field of the schema, so that a page or an index made from it says
// all that the log says.
type ShrinkLog struct {
	SchemaVersion int `json:"schema_version"`
	// From is the stored run the search started from, as it was given.
	From string `json:"from"`
	// Anomaly is what every accepted candidate showed.
	Anomaly ShrinkTarget `json:"anomaly"`
	// A candidate counted as failing when Need of Replays replays failed.
	Need        int    `json:"need"`
	Replays     int    `json:"replays"`
	Grace       string `json:"grace"`
	Budget      string `json:"budget"`
	Started     string `json:"started"`
	Elapsed     string `json:"elapsed"`
	BudgetSpent bool   `json:"budget_spent,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Before and After are the sizes of the stored run and of the smallest
	// schedule; Smallest is the ID of the step that accepted it ("" when
	// none was).
	Before     runstore.ShrinkSize `json:"before"`
	After      runstore.ShrinkSize `json:"after"`
	Smallest   string              `json:"smallest,omitempty"`
	ReplaysRun int                 `json:"replays_run"`
	Steps      []ShrinkStep        `json:"steps"`
	// Confirmations are the replays of the smallest schedule after the
	// search, counted whole.
	Confirmations []ShrinkTrial `json:"confirmations"`
}

// ShrinkTarget is the anomaly a shrink keeps.
type ShrinkTarget struct {
	Checker string `json:"checker"`
	Kind    string `json:"kind"`
}

func (t ShrinkTarget) String() string { return t.Checker + ": " + t.Kind }

// ShrinkStep is one candidate of the search, with its replays.
type ShrinkStep struct {
	ID       string        `json:"id"`
	Change   string        `json:"change"`
	Trials   []ShrinkTrial `json:"trials"`
	Accepted bool          `json:"accepted"`
	// NotRun says why it was not replayed, or is empty.
	NotRun   string              `json:"not_run,omitempty"`
	Size     runstore.ShrinkSize `json:"size"`
	Schedule string              `json:"schedule"`
}

// Failures counts the step's replays that failed the way the search
// looks for.
func (s ShrinkStep) Failures() int {
	n := 0
	for _, t := range s.Trials {
		if t.Failed {
			n++
		}
	}
	return n
}

// ShrinkTrial is one replay: its stored run (as the search logged its
// folder), its verdict, whether it failed the way the search looks for,
// and when, from the start of its fault phase.
type ShrinkTrial struct {
	Run            string        `json:"run"`
	Verdict        string        `json:"verdict"`
	Failed         bool          `json:"failed"`
	FirstViolation time.Duration `json:"first_violation_ns,omitempty"`
}

// Reproduced counts the confirmations that failed the same way.
func (l ShrinkLog) Reproduced() int {
	return ShrinkStep{Trials: l.Confirmations}.Failures()
}

// SizeText renders a shrink size as "3 faults, 6.5s, 4 clients, 1 lock".
func SizeText(s runstore.ShrinkSize) string {
	return fmt.Sprintf("%s, %s, %s, %s", countOf(s.Faults, "fault"), s.Time, countOf(s.Clients, "client"), countOf(s.Locks, "lock"))
}

func countOf(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Summary says in one line what the search found: "23 → 1 faults, 30s →
// 4s, 8 → 2 clients, 61 replays", with the budget or an interruption.
func (l ShrinkLog) Summary() string {
	out := fmt.Sprintf("%d → %d faults, %s → %s, %d → %d clients", l.Before.Faults, l.After.Faults, l.Before.Time, l.After.Time, l.Before.Clients, l.After.Clients)
	if l.Before.Locks != l.After.Locks {
		out += fmt.Sprintf(", %d → %d locks", l.Before.Locks, l.After.Locks)
	}
	out += fmt.Sprintf(", %d replays", l.ReplaysRun)
	switch {
	case l.Interrupted:
		out += " (interrupted)"
	case l.BudgetSpent:
		out += " (the budget ran out)"
	}
	return out
}

// Outcome says whether the smallest schedule failed the same way again
// after the search, and the class the pages colour that with: "good" when
// Need of its confirmations did, "bad" when fewer did, "unknown" for a
// search that was interrupted or had no confirmation. When no candidate
// was accepted, the confirmations replayed the stored run's own schedule,
// and fewer than Need failing says the bug no longer reproduces.
func (l ShrinkLog) Outcome() (text, class string) {
	switch n := len(l.Confirmations); {
	case l.Interrupted:
		return "interrupted", "unknown"
	case n == 0 && l.Smallest == "":
		return "no smaller candidate failed; no confirmation", "unknown"
	case n == 0:
		return "not confirmed (no confirmation replay)", "unknown"
	case l.Smallest == "" && l.Reproduced() < l.Need:
		// The confirmations replayed the stored run's own schedule.
		return fmt.Sprintf("no longer reproduces: no candidate failed the same way, and the stored run's own schedule did in only %d of %d replays (want %d)", l.Reproduced(), n, l.Need), "bad"
	case l.Smallest == "":
		return fmt.Sprintf("no smaller schedule failed the same way; the stored run's own reproduced in %d of %d replays", l.Reproduced(), n), "good"
	case l.Reproduced() >= l.Need:
		return fmt.Sprintf("reproduced in %d of %d confirmations", l.Reproduced(), n), "good"
	default:
		return fmt.Sprintf("reproduced in only %d of %d confirmations (want %d)", l.Reproduced(), n, l.Need), "bad"
	}
}

// ReadShrink reads dir's shrink.json. A missing file gives an error
// satisfying errors.Is(err, os.ErrNotExist); a bad one names the file.
func ReadShrink(dir string) (ShrinkLog, error) {
	var l ShrinkLog
	err := runstore.ReadJSON(filepath.Join(dir, ShrinkFile), &l)
	return l, err
}

// ShrinkPage is what a shrink's page shows: the log, with its replays'
// folders as links from the page, the story, and the schedules.
type ShrinkPage struct {
	Log ShrinkLog
	// Links maps a replay's folder as the log names it to the folder as a
	// link from the page's folder; a replay not found has none.
	Links map[string]string
	// FromLink is the stored run the search started from, as a link from
	// the page's folder ("" when it is not found).
	FromLink string
	// Story is the smallest failing story in one sentence ("" when no
	// replay of the smallest schedule tells it).
	Story string
	// Smallest and Original are the smallest schedule and the stored
	// run's, nil when they could not be read; SmallestFile is the
	// smallest's file, from the page's folder, and ScheduleNote why a
	// schedule is missing.
	Smallest, Original *Schedule
	SmallestFile       string
	ScheduleNote       string
}

var shrinkTmpl = template.Must(template.New("shrink.html.tmpl").Funcs(funcs).Funcs(template.FuncMap{"trialOf": trialOf,
	"ms": func(d time.Duration) time.Duration { return d.Round(time.Millisecond) },
	// runName names a run's folder by its name and time, its last two parts.
	"runName": func(link string) string {
		parts := strings.Split(link, "/")
		return strings.Join(parts[max(0, len(parts)-2):], "/")
	}}).
	ParseFS(templates, "templates/shrink.html.tmpl"))

// trialView is a replay as a step's cell shows it: a link to its report,
// coloured by what it showed.
type trialView struct {
	Trial              ShrinkTrial
	Link, Class, Title string
}

func trialOf(t ShrinkTrial, links map[string]string) trialView {
	v := trialView{Trial: t, Link: links[t.Run], Class: "t-held", Title: "held: no anomaly of the kind kept"}
	switch {
	case t.Failed:
		v.Class, v.Title = "t-fail", fmt.Sprintf("failed the same way, %s into the faults", t.FirstViolation.Round(time.Millisecond))
	case strings.EqualFold(t.Verdict, "valid"):
	default:
		v.Class, v.Title = "t-other", "not the anomaly kept: "+strings.ToLower(t.Verdict)
	}
	if v.Link == "" {
		v.Title += " (the replay is not in the store)"
	}
	return v
}

// FirstViolation is the latest first violation of the failed replays
// that made the smallest schedule the smallest (its accepting step's), or
// of its failed confirmations when no step accepted it; 0 when none says.
func (p ShrinkPage) FirstViolation() time.Duration {
	var out time.Duration
	for _, st := range p.Log.Steps {
		if st.ID == p.Log.Smallest {
			for _, t := range st.Trials {
				if t.Failed {
					out = max(out, t.FirstViolation)
				}
			}
		}
	}
	if out == 0 {
		for _, t := range p.Log.Confirmations {
			if t.Failed {
				out = max(out, t.FirstViolation)
			}
		}
	}
	return out
}

// RenderShrinkHTML renders a shrink as a self-contained page, with no
// script: what the search kept and found, the story, the original and the
// smallest schedule drawn on one time scale, every step with its size, its
// replays (each linked to its report) and whether it was accepted, and
// the confirmations.
func RenderShrinkHTML(p ShrinkPage) ([]byte, error) {
	if p.Links == nil {
		p.Links = map[string]string{}
	}
	outcome, class := p.Log.Outcome()
	var end time.Duration
	for _, pl := range []*Schedule{p.Original, p.Smallest} {
		if pl != nil {
			end = max(end, planEnd(*pl))
		}
	}
	var originalSVG, smallestSVG template.HTML
	if p.Original != nil {
		originalSVG = ScheduleSVG("the stored run's schedule", *p.Original, end, 0)
	}
	if p.Smallest != nil {
		smallestSVG = ScheduleSVG("the smallest schedule", *p.Smallest, end, p.FirstViolation())
	}
	var b bytes.Buffer
	err := shrinkTmpl.Execute(&b, struct {
		ShrinkPage
		Outcome, Class           string
		OriginalSVG, SmallestSVG template.HTML
		Style                    template.CSS
	}{p, outcome, class, originalSVG, smallestSVG, reportCSS})
	return b.Bytes(), err
}

// LoadShrinkPage reads the shrink in the search's folder dir of the store
// root: its shrink.json, the smallest schedule (schedule.json, or the
// accepted step's while the search has not written it), the stored run's
// schedule, and the story, which the confirmations' results.json tell
// (the shrink marks them) or, before that, the history of a replay that
// failed the same way. Replays and the stored run are found where the log
// names them, or, in a store copied elsewhere, at the same place under
// root. The error is shrink.json's; a schedule that cannot be read leaves
// its drawing out, saying why.
func LoadShrinkPage(dir, root string) (ShrinkPage, error) {
	l, err := ReadShrink(dir)
	if err != nil {
		return ShrinkPage{}, err
	}
	p := ShrinkPage{Log: l, Links: map[string]string{}}
	find := newFinder(root)
	link := func(logged string) string {
		at := find.dir(logged, "")
		if at == "" {
			return ""
		}
		return relTo(dir, at)
	}
	for _, st := range l.Steps {
		for _, t := range st.Trials {
			p.Links[t.Run] = link(t.Run)
		}
	}
	for _, t := range l.Confirmations {
		p.Links[t.Run] = link(t.Run)
	}
	from := find.dir(l.From, "")
	if from != "" {
		p.FromLink = relTo(dir, from)
		if pl, err := readPlan(filepath.Join(from, runstore.ScheduleFile)); err == nil {
			p.Original = &pl
		} else {
			p.ScheduleNote = "the stored run's schedule: " + err.Error()
		}
	} else {
		p.ScheduleNote = "the stored run " + l.From + " is not in the store"
	}
	smallest := filepath.Join(dir, ShrinkScheduleFile)
	if _, err := os.Stat(smallest); err != nil {
		for _, st := range l.Steps {
			if st.ID == l.Smallest && st.Schedule != "" {
				smallest = find.file(st.Schedule, dir)
			}
		}
	}
	if pl, err := readPlan(smallest); err == nil {
		p.Smallest, p.SmallestFile = &pl, relTo(dir, smallest)
	} else if l.Smallest != "" {
		p.ScheduleNote = joinNote(p.ScheduleNote, "the smallest schedule: "+err.Error())
	}
	p.Story = shrinkStory(l, find)
	return p, nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// WriteShrinkHTML (re)writes dir/shrink.html, the page of the shrink in
// the search's folder dir of the store root (LoadShrinkPage). It returns
// shrink.json's error when that cannot be read, and writes nothing then.
func WriteShrinkHTML(dir, root string) error {
	p, err := LoadShrinkPage(dir, root)
	if err != nil {
		return err
	}
	b, err := RenderShrinkHTML(p)
	if err != nil {
		return err
	}
	return runstore.WriteFileAtomic(filepath.Join(dir, ShrinkHTMLFile), b)
}

// Schedule is what the shrink page draws of a schedule file (a stored
// run's schedule.json, docs/schemas/schedule.schema.json): the reports
// read the file by its schema, as they read a history, without the
// nemesis that writes and replays it.
type Schedule struct {
	// Workload holds the run's own settings by flag name ("time").
	Workload map[string]string
	// Faults are the injections, in the order they began.
	Faults []ScheduledFault
}

// ScheduledFault is one injection of a Schedule: when it began from the
// start of the workload, how long it stayed, and what it hit.
type ScheduledFault struct {
	At, Lasts       time.Duration
	Fault           string
	Settings        map[string]string
	Pins, Cuts, Hit []string
}

// readPlan reads a schedule file.
func readPlan(path string) (Schedule, error) {
	var raw struct {
		Workload map[string]string `json:"workload"`
		Faults   []struct {
			At       string            `json:"at"`
			Fault    string            `json:"fault"`
			Settings map[string]string `json:"settings"`
			Pins     []string          `json:"pins"`
			Cuts     []string          `json:"cuts"`
			Hit      []string          `json:"hit"`
			Lasts    string            `json:"lasts"`
		} `json:"faults"`
	}
	if err := runstore.ReadJSON(path, &raw); err != nil {
		return Schedule{}, err
	}
	p := Schedule{Workload: raw.Workload}
	for i, f := range raw.Faults {
		at, err1 := time.ParseDuration(f.At)
		lasts, err2 := time.ParseDuration(f.Lasts)
		if err := errors.Join(err1, err2); err != nil {
			return Schedule{}, fmt.Errorf("%s: fault %d: %w", path, i+1, err)
		}
		p.Faults = append(p.Faults, ScheduledFault{At: at, Lasts: lasts, Fault: f.Fault, Settings: f.Settings, Pins: f.Pins, Cuts: f.Cuts, Hit: f.Hit})
	}
	return p, nil
}

// shrinkStory is the story of the smallest schedule: the one the shrink
// marked its confirmations with, else the one the history of the first
// replay of the smallest schedule that failed the same way tells.
func shrinkStory(l ShrinkLog, find *finder) string {
	for _, t := range l.Confirmations {
		if d := find.dir(t.Run, ""); d != "" {
			if info, err := runstore.ReadRunInfo(d); err == nil && info.Shrunk != nil && info.Shrunk.Story != "" {
				return info.Shrunk.Story
			}
		}
	}
	var failed []ShrinkTrial
	for _, t := range l.Confirmations {
		if t.Failed {
			failed = append(failed, t)
		}
	}
	for _, st := range l.Steps {
		if st.ID == l.Smallest {
			for _, t := range st.Trials {
				if t.Failed {
					failed = append(failed, t)
				}
			}
		}
	}
	for _, t := range failed {
		d := find.dir(t.Run, "")
		if d == "" {
			continue
		}
		if s, err := storyOf(d, l.Anomaly); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// storyOf is the story the run in dir tells of its first anomaly of t's
// kind, "" when it has none.
func storyOf(dir string, t ShrinkTarget) (string, error) {
	res, err := runstore.ReadResults(dir)
	if err != nil {
		return "", err
	}
	h, err := history.ReadTable(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		return "", err
	}
	var first *checker.Anomaly
	var at int64
	for _, c := range res.Checkers {
		if c.Checker != t.Checker {
			continue
		}
		for i, a := range c.Anomalies {
			if a.Kind != t.Kind {
				continue
			}
			var proof int64
			for _, o := range a.Ops {
				if o >= 0 && o < h.Len() {
					proof = max(proof, h.Time(o))
				}
			}
			if first == nil || proof < at {
				first, at = &c.Anomalies[i], proof
			}
		}
	}
	if first == nil {
		return "", nil
	}
	return Story(h, *first), nil
}

// relTo is target as a link from the folder dir, with slashes; target
// itself (with slashes) when no relative path joins them.
func relTo(dir, target string) string {
	ad, err1 := filepath.Abs(dir)
	at, err2 := filepath.Abs(target)
	if err1 == nil && err2 == nil {
		if rel, err := filepath.Rel(ad, at); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(target)
}

// finder finds a folder or file that a log names (by the path it had when
// it was written) in a store that may have moved since: the path itself,
// when it exists in the store, else the longest tail of it that exists
// under the store's root, else the path itself, outside the store, when
// it exists there.
type finder struct{ root string }

func newFinder(root string) *finder {
	if a, err := filepath.Abs(root); err == nil {
		root = a
	}
	return &finder{root: root}
}

// dir finds the folder p, relative to base when it is relative ("" for
// the working folder); "" when it is not found.
func (f *finder) dir(p, base string) string {
	return f.find(p, base, true)
}

// file finds the file p as dir does, and returns p unchanged when it is
// not found (its reader says why).
func (f *finder) file(p, base string) string {
	if got := f.find(p, base, false); got != "" {
		return got
	}
	return p
}

func (f *finder) find(p, base string, wantDir bool) string {
	if p == "" {
		return ""
	}
	ok := func(q string) bool {
		st, err := os.Stat(q)
		return err == nil && st.IsDir() == wantDir
	}
	q := p
	if !filepath.IsAbs(q) && base != "" {
		q = filepath.Join(base, q)
	}
	inRoot := false
	if a, err := filepath.Abs(q); err == nil {
		rel, err := filepath.Rel(f.root, a)
		inRoot = err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	if inRoot && ok(q) {
		return q
	}
	parts := strings.Split(filepath.ToSlash(filepath.Clean(p)), "/")
	// A tail of two parts at least (a run's name and time): one part
	// alone would find any folder of that name.
	for i := 1; i <= len(parts)-2; i++ {
		tail := filepath.Join(parts[i:]...)
		if tail == "" || strings.HasPrefix(tail, "..") {
			continue
		}
		if c := filepath.Join(f.root, tail); ok(c) {
			return c
		}
	}
	if ok(q) {
		return q // outside the store, where the log says
	}
	return ""
}

// planEnd is the end of a schedule's drawing: the end of its run
// (planRun) or of its last fault, whichever is later.
func planEnd(p Schedule) time.Duration {
	d := planRun(p)
	for _, f := range p.Faults {
		d = max(d, f.At+f.Lasts)
	}
	return d
}

// planRun is how long a schedule's run lasts: its workload's time, or the
// end of its last fault when the plan does not say.
func planRun(p Schedule) time.Duration {
	if d, err := time.ParseDuration(p.Workload["time"]); err == nil && d > 0 {
		return d
	}
	var d time.Duration
	for _, f := range p.Faults {
		d = max(d, f.At+f.Lasts)
	}
	return d
}

// The schedule drawing's geometry, in px, beside the timeline's (svg.go).
const (
	schedLane  = 18
	schedPitch = 24
	schedTop   = 34 // the caption and the time axis above the lanes
)

// ScheduleSVG draws a schedule on a time line from 0 to end (the longest
// of the schedules shown together, so that they share one scale): a lane
// per fault, its bar from when it went in to when it was healed, labelled
// with what it hit and its settings, the run's own end, and, when first
// is not 0, a red line at the first violation. It needs no script.
func ScheduleSVG(caption string, p Schedule, end, first time.Duration) template.HTML {
	run := planRun(p)
	end = max(end, planEnd(p), time.Millisecond)
	s := scale{0, us(int64(end))}
	lanes := max(len(p.Faults), 1)
	hgt := float64(schedTop + lanes*schedPitch + 24) // the axis's labels below the lanes
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="sched" xmlns="http://www.w3.org/2000/svg" width="%d" height="%s" viewBox="0 0 %d %s" role="img" aria-label="%s">`,
		svgWidth, f1(hgt), svgWidth, f1(hgt), template.HTMLEscapeString(caption))
	fmt.Fprintf(&b, `<text class="cap" x="%d" y="12">%s: %s, %s</text>`, svgLeft, template.HTMLEscapeString(caption),
		countOf(len(p.Faults), "fault"), time.Duration(run).String())
	bottom := float64(schedTop + lanes*schedPitch)
	// The run itself, from its start to its end.
	fmt.Fprintf(&b, `<rect class="lane" x="%s" y="%d" width="%s" height="%s"><title>the run: %s</title></rect>`,
		f1(s.x(0)), schedTop-4, f1(s.x(us(int64(run)))-s.x(0)), f1(bottom-schedTop+4), time.Duration(run))
	if len(p.Faults) == 0 {
		fmt.Fprintf(&b, `<text class="lbl" x="%s" y="%d" text-anchor="start">no fault</text>`, f1(s.x(0)+6), schedTop+13)
	}
	for i, f := range p.Faults {
		y := float64(schedTop + i*schedPitch)
		x0, x1 := s.x(us(int64(f.At))), s.x(us(int64(f.At+f.Lasts)))
		w := max(x1-x0, 2)
		what := faultText(f)
		fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%s">#%d</text>`, svgLeft-6, f1(y+13), i+1)
		title := fmt.Sprintf("%s: at %s, for %s", what, f.At, f.Lasts)
		if len(f.Hit) > 0 {
			title += "; it hit " + strings.Join(f.Hit, ", ") + " in the run it was recorded in"
		}
		fmt.Fprintf(&b, `<rect class="sfault" x="%s" y="%s" width="%s" height="%d"><title>%s</title></rect>`,
			f1(x0), f1(y), f1(w), schedLane, template.HTMLEscapeString(title))
		// The label goes right of the bar, or left of it near the end.
		lx, anchor := x0+w+4, "start"
		if lx > svgWidth-svgRight-float64(6*len(what)) {
			lx, anchor = x0-4, "end"
		}
		fmt.Fprintf(&b, `<text class="flbl" x="%s" y="%s" text-anchor="%s">%s</text>`, f1(lx), f1(y+13), anchor, template.HTMLEscapeString(what))
	}
	if first > 0 {
		x := s.x(us(int64(first)))
		fmt.Fprintf(&b, `<g class="viol"><line x1="%s" x2="%s" y1="%d" y2="%s"/><text x="%s" y="%d">first violation, %s</text><title>the anomaly was proven %s into the faults (the latest of the failed replays that accepted this schedule)</title></g>`,
			f1(x), f1(x), schedTop-6, f1(bottom), f1(x+3), schedTop-8, first.Round(time.Millisecond), first.Round(time.Millisecond))
	}
	timeAxis(&b, s, bottom+2)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// faultText says what a planned fault does, in a few words: "pause-client
// p2 · pause 6s, pause-point before-write", naming what it is pinned to
// (a fault with no pins hits what its run draws, or the first worker to
// get to its pause point).
func faultText(f ScheduledFault) string {
	out := f.Fault
	if len(f.Pins) > 0 {
		out += " " + strings.Join(f.Pins, ",")
	}
	if len(f.Cuts) > 0 {
		out += " " + strings.Join(f.Cuts, " ")
	}
	if len(f.Settings) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(f.Settings)) {
			parts = append(parts, k+" "+f.Settings[k])
		}
		out += " · " + strings.Join(parts, ", ")
	}
	return out
}
