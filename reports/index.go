package reports

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/runstore"
)

// IndexFile is the page, at the root of a store, that links everything
// stored under it.
const IndexFile = "index.html"

// The kinds of what a store holds besides its runs (IndexEntry.Kind).
const (
	// KindDebate is a debate's output: a folder with scoreboard.json
	// (STORE/debate/<time>/ by default).
	KindDebate = "debate"
	// KindMatrix is a matrix: a folder with matrix.json (the matrix's
	// store, or its --out).
	KindMatrix = "matrix"
	// KindMargin is a margin search: a folder with margin.json, or any
	// folder <name>.margin/<time>/, which the search makes before it
	// writes margin.json at its end.
	KindMargin = "margin"
	// KindShrink is a shrink: a folder with shrink.json, or any folder
	// <name>.shrink/<time>/.
	KindShrink = "shrink"
)

// searchSuffix is the suffix of the name folder a search of each kind is
// made in (<name>.margin/<time>/, <name>.shrink/<time>/).
var searchSuffix = map[string]string{KindMargin: ".margin", KindShrink: ".shrink"}

var indexTmpl = template.Must(template.New("index.html.tmpl").Funcs(funcs).Funcs(template.FuncMap{
	"plural": func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	},
}).ParseFS(templates, "templates/index.html.tmpl"))

// IndexRow is one stored run of the index.
type IndexRow struct {
	runstore.Stored
	// PartOf names the debate or matrix whose page counts the run, by its
	// start ("debate 2025-01-05 09:59 UTC"), and PartOfPage links that page
	// from the store's root; both are "" for a run of neither.
	PartOf, PartOfPage string
	// Name is how the page names the run: its folder relative to its
	// search's for a trial ("runs/pause-1s/20250106T110101"), else "".
	Name string
}

// Verdicts renders each checker's verdict in words, "mutual-exclusion
// valid, …".
func (r IndexRow) Verdicts() []string {
	out := make([]string, 0, len(r.Results.Checkers))
	for _, c := range r.Results.Checkers {
		out = append(out, c.Checker+" "+VerdictWord(c.Valid))
	}
	return out
}

// MatrixFinding reports whether r is a run of a matrix that showed a
// violation: not as expected (valid), and yet what the matrix is for.
func (r IndexRow) MatrixFinding() bool {
	return !r.Results.Met() && strings.HasPrefix(r.PartOf, KindMatrix+" ")
}

// IndexEntry is a debate, a matrix, a margin search or a shrink found in a
// store, with its verdict in one line.
type IndexEntry struct {
	// Kind is KindDebate, KindMatrix, KindMargin or KindShrink.
	Kind string
	// Dir is its folder relative to the store's root, with slashes ("."
	// for the root itself).
	Dir string
	// Page is its page (or, when it has none, its JSON file) relative to
	// the root; "" when it has neither yet.
	Page string
	// Started is when it started, StartedText as its file says it (or its
	// folder's time stamp); zero and "" when unknown.
	Started     time.Time
	StartedText string
	// What says what it is in a few words, Verdict its outcome in one
	// line, and Class how the page colours the verdict: "good", "bad",
	// "unknown", or "" for a measurement that is neither.
	What, Verdict, Class string
	// Detail is a further line: the command, the stated bound, the story.
	Detail string
	// Err says why its file could not be read; the other fields say what
	// is known without it.
	Err string
	// Trials are the runs the search made (a margin search's trials, a
	// shrink's candidates' replays and its confirmations), newest first.
	// The index lists them under the search and never counts them among
	// the store's runs: they run with --expect invalid, and one that
	// held is the search's answer, not an alarm.
	Trials []IndexRow
	// named are the runs its file names, as it names them, and base the
	// folder that relative names are relative to.
	named []string
	base  string
}

// Index is what a store's index page shows.
type Index struct {
	// Root is the store's folder as it was given.
	Root string
	// Within is the search whose folder holds Root (the candidates of a
	// shrink, the trials of a margin search, which each run's end indexes
	// on their own); every run of Root is then one of its trials. Nil
	// when Root lies in no search.
	Within *IndexEntry
	// Debates, Matrices, Margins and Shrinks are what the store holds of
	// each kind, newest first.
	Debates, Matrices, Margins, Shrinks []IndexEntry
	// Runs are the stored runs that are no search's trials, newest first.
	Runs []IndexRow
	// Count counts Runs by verdict ("true", "false", "unknown"), leaving
	// out those whose results.json could not be read (Unreadable).
	Count      map[string]int
	Unreadable int
	// Unexpected counts the Runs whose verdict is not the one expected:
	// the store's alarms. A matrix's runs are not among them: a violation
	// is what a matrix finds, and Found counts those.
	Unexpected int
	// Found counts the Runs of a matrix that showed a violation (their
	// expectation, valid, not met): the matrix's findings, which its page
	// shows in their cells.
	Found int
	// Trials counts the trials of every search, which Count leaves out.
	Trials int
}

// Entries is how many debates, matrices, margin searches and shrinks the
// store holds.
func (x Index) Entries() int {
	return len(x.Debates) + len(x.Matrices) + len(x.Margins) + len(x.Shrinks)
}

// ScanIndex reads what the store at root holds: every stored run
// (runstore.Scan), every debate, matrix, margin search and shrink, and
// which runs are the trials of a search. A run is a trial of a margin
// search or a shrink when its folder lies in the search's folder (a
// margin's runs/, a shrink's candidates/), when the search's file names
// it (margin.json's trials, shrink.json's replays and confirmations), or
// when its results.json says it replays a shrunk schedule (run.shrunk,
// whose search names the shrink); when root itself lies in a search's
// folder, every run is a trial of it. A run that a debate's scoreboard or
// a matrix names is marked as part of it, and still counted. Files that
// name runs by paths they had elsewhere (a store copied or moved) are
// matched by the tail of the path under root. A file that cannot be read
// gives an entry with its error, never an error of the scan; the error is
// the store's own (no such folder).
func ScanIndex(root string) (Index, error) {
	x := Index{Root: strings.TrimSuffix(root, "/"), Count: map[string]int{}}
	stored, err := runstore.Scan(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return x, fmt.Errorf("store %s: no such folder", root)
		}
		return x, fmt.Errorf("store %s: %w", root, err)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return x, fmt.Errorf("store %s: %w", root, err)
	}
	rows := make([]IndexRow, len(stored))
	for i, st := range stored {
		rows[i] = IndexRow{Stored: st}
	}
	m := newRunMatcher(root, absRoot, rows)

	var entries []IndexEntry
	for _, f := range findEntries(root) {
		entries = append(entries, loadEntry(root, f.dir, f.kind))
	}
	entries = dropHeaderOnly(entries)

	// Which search each run is a trial of: where it lies first, then what
	// the searches' files name, then what the run says of itself.
	owner := make([]int, len(rows))
	for i := range owner {
		owner[i] = -1
	}
	for i, r := range rows {
		best := -1
		for j, e := range entries {
			if searchSuffix[e.Kind] == "" || !under(r.Dir, e.Dir) {
				continue
			}
			if best < 0 || len(e.Dir) > len(entries[best].Dir) {
				best = j
			}
		}
		owner[i] = best
	}
	for j, e := range entries {
		if searchSuffix[e.Kind] == "" {
			continue
		}
		for _, p := range e.named {
			if i := m.find(p, e.base); i >= 0 && owner[i] < 0 {
				owner[i] = j
			}
		}
	}
	for i, r := range rows {
		s := r.Results.Run.Shrunk
		if owner[i] >= 0 || s == nil {
			continue
		}
		j := slices.IndexFunc(entries, func(e IndexEntry) bool {
			return e.Kind == KindShrink && (e.Dir == m.rel(s.Search) || sameTail(e.Dir, s.Search))
		})
		if j < 0 {
			// Its search is not in the store: an entry of its own says so.
			entries = append(entries, IndexEntry{Kind: KindShrink, Dir: m.rel(s.Search), What: "shrink of " + s.From + ", keeping " + s.Checker + ": " + s.Kind,
				Verdict: s.Summary(), Class: "unknown", Err: "its search's folder is not in this store"})
			j = len(entries) - 1
		}
		owner[i] = j
	}
	x.Within = withinSearch(absRoot)
	// The debates' and the matrices' runs.
	for _, e := range entries {
		if e.Kind != KindDebate && e.Kind != KindMatrix {
			continue
		}
		for _, p := range e.named {
			if i := m.find(p, e.base); i >= 0 && rows[i].PartOf == "" {
				rows[i].PartOf, rows[i].PartOfPage = e.Kind+" "+cmp.Or(e.StartedText, e.Dir), e.Page
			}
		}
	}
	// Errors name files from the store's root, as the page links them.
	for i := range rows {
		rows[i].Err = m.trim(rows[i].Err)
	}
	for i := range entries {
		entries[i].Err = m.trim(entries[i].Err)
	}
	if x.Within != nil {
		x.Within.Err = m.trim(x.Within.Err)
	}
	for i, r := range rows {
		switch {
		case owner[i] >= 0:
			if e := entries[owner[i]]; e.Dir != "." && strings.HasPrefix(r.Dir, e.Dir+"/") {
				r.Name = strings.TrimPrefix(r.Dir, e.Dir+"/")
			}
			entries[owner[i]].Trials = append(entries[owner[i]].Trials, r)
			x.Trials++
		case x.Within != nil:
			x.Within.Trials = append(x.Within.Trials, r)
			x.Trials++
		default:
			x.Runs = append(x.Runs, r)
			switch {
			case r.Err != "":
				x.Unreadable++
			default:
				x.Count[string(r.Results.Valid)]++
				switch {
				case r.Results.Met():
				case r.MatrixFinding():
					x.Found++
				default:
					x.Unexpected++
				}
			}
		}
	}
	for _, e := range entries {
		if e.Kind == KindShrink && e.Detail == "" {
			// The story its confirmations were marked with.
			for _, t := range e.Trials {
				if s := t.Results.Run.Shrunk; s != nil && s.Story != "" {
					e.Detail = s.Story
					break
				}
			}
		}
		switch e.Kind {
		case KindDebate:
			x.Debates = append(x.Debates, e)
		case KindMatrix:
			x.Matrices = append(x.Matrices, e)
		case KindMargin:
			x.Margins = append(x.Margins, e)
		case KindShrink:
			x.Shrinks = append(x.Shrinks, e)
		}
	}
	for _, es := range [][]IndexEntry{x.Debates, x.Matrices, x.Margins, x.Shrinks} {
		slices.SortStableFunc(es, func(a, b IndexEntry) int {
			if c := b.Started.Compare(a.Started); c != 0 {
				return c
			}
			return strings.Compare(b.Dir, a.Dir)
		})
	}
	return x, nil
}

// RenderIndex renders the index page of x.
func RenderIndex(x Index) ([]byte, error) {
	var buf bytes.Buffer
	if err := indexTmpl.Execute(&buf, struct {
		Index
		Style template.CSS
	}{x, reportCSS}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteIndex (re)writes root/index.html (ScanIndex): the debates,
// matrices, margin searches and shrinks stored under root, each with its
// verdict and a link to its page, and every run that is no search's trial,
// newest first, with its verdicts and a link to its report; each search
// lists its trials, which the counts leave out.
func WriteIndex(root string) error {
	x, err := ScanIndex(root)
	if err != nil {
		return err
	}
	b, err := RenderIndex(x)
	if err != nil {
		return err
	}
	return runstore.WriteFileAtomic(filepath.Join(root, IndexFile), b)
}

// WriteShrinkPages (re)writes the page of every shrink stored under root
// (WriteShrinkHTML) and returns their files. A shrink whose shrink.json
// cannot be read gets no page; its error is joined into the error
// returned, and the others are written all the same.
func WriteShrinkPages(root string) ([]string, error) {
	if _, err := os.Stat(root); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("store %s: no such folder", root)
		}
		return nil, err
	}
	var written []string
	var errs []error
	for _, f := range findEntries(root) {
		if f.kind != KindShrink {
			continue
		}
		dir := filepath.Join(root, filepath.FromSlash(f.dir))
		if _, err := os.Stat(filepath.Join(dir, ShrinkFile)); errors.Is(err, fs.ErrNotExist) {
			continue // a search that has not written its log yet
		}
		if err := WriteShrinkHTML(dir, root); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Join(dir, ShrinkHTMLFile), err))
			continue
		}
		written = append(written, filepath.Join(dir, ShrinkHTMLFile))
	}
	return written, errors.Join(errs...)
}

// found is a folder of an entry, relative to the store's root.
type found struct{ dir, kind string }

// entryFiles are the files that make a folder an entry of their kind.
var entryFiles = map[string]string{ScoreboardJSONFile: KindDebate, MatrixHeaderFile: KindMatrix, MarginFile: KindMargin, ShrinkFile: KindShrink}

// findEntries walks root for the folders of debates, matrices, margin
// searches and shrinks, in walk order, each once. It does not follow
// symbolic links, and it does not go into a run's logs.
func findEntries(root string) []found {
	var out []found
	seen := map[found]bool{}
	add := func(dir, kind string) {
		f := found{filepath.ToSlash(dir), kind}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable folder is left out
		}
		rel, rerr := filepath.Rel(root, p)
		if rerr != nil {
			return nil
		}
		if e.IsDir() {
			if e.Name() == runstore.LogsDir && p != root {
				if _, err := os.Stat(filepath.Join(filepath.Dir(p), runstore.ResultsFile)); err == nil {
					return filepath.SkipDir
				}
			}
			if p != root {
				for kind, suffix := range searchSuffix {
					if strings.HasSuffix(filepath.Base(filepath.Dir(p)), suffix) && filepath.Dir(p) != root {
						add(rel, kind)
					}
				}
			}
			return nil
		}
		if kind, ok := entryFiles[e.Name()]; ok {
			add(filepath.Dir(rel), kind)
		}
		return nil
	})
	return out
}

// loadEntry reads the entry of kind in root's folder dir (relative, with
// slashes).
func loadEntry(root, dir, kind string) IndexEntry {
	abs := filepath.Join(root, filepath.FromSlash(dir))
	e := IndexEntry{Kind: kind, Dir: dir, base: abs}
	page := func(files ...string) {
		for _, f := range files {
			if st, err := os.Stat(filepath.Join(abs, f)); err == nil && !st.IsDir() {
				e.Page = path.Join(dir, f)
				return
			}
		}
	}
	stamped := func() {
		if t, ok := folderStamp(abs); ok {
			e.Started, e.StartedText = t, filepath.Base(abs)
		}
	}
	switch kind {
	case KindDebate:
		page("scoreboard.html", ScoreboardJSONFile)
		var b Scoreboard
		if err := runstore.ReadJSON(filepath.Join(abs, ScoreboardJSONFile), &b); err != nil {
			e.Err, e.What = err.Error(), "a debate"
			stamped()
			return e
		}
		e.StartedText = b.Date
		if t, err := time.Parse("2006-01-02 15:04 MST", b.Date); err == nil {
			e.Started = t
		} else {
			stamped()
		}
		e.What = fmt.Sprintf("%s, up to %s each", countOf(len(b.Rows), "scenario"), countOf(b.Seeds, "seed"))
		if b.Shard != "" {
			e.What += ", shard " + b.Shard
		}
		e.Verdict = b.TallyText()
		t := b.Tally()
		switch {
		case t[NotReproduced]+t[Refuted] > 0:
			e.Class = "bad"
		case t[NotRefuted]+t[Inconclusive] > 0 || len(b.Rows) == 0:
			e.Class = "unknown"
		default:
			e.Class = "good"
		}
		e.Detail = b.Command
		for _, r := range b.Rows {
			for _, s := range r.Seeds {
				if s.Dir != "" {
					e.named = append(e.named, s.Dir)
				}
			}
		}
	case KindMatrix:
		page(MatrixHTMLFile, MatrixHeaderFile)
		m, err := ReadMatrix(abs)
		if err != nil {
			e.Err, e.What = err.Error(), "a matrix"
			stamped()
			return e
		}
		h := m.Header
		if !h.Date.IsZero() {
			e.Started, e.StartedText = h.Date, h.Date.Format(time.RFC3339)
		} else {
			stamped()
		}
		e.What = fmt.Sprintf("%s × %s, %s per cell", countOf(len(m.Rows), "impl"), countOf(len(m.Columns), "property"), countOf(h.Seeds, "seed"))
		e.What = strings.Replace(e.What, "propertys", "properties", 1)
		e.Verdict = matrixTally(m)
		e.Detail = h.Command
		for _, r := range m.Rows {
			for _, c := range r.Cells {
				for _, l := range c.Links {
					e.named = append(e.named, strings.TrimSuffix(strings.TrimSuffix(l.Report, runstore.ReportFile), "/"))
				}
			}
		}
	case KindMargin:
		page(MarginHTMLFile, MarginFile)
		var mg Margin
		err := runstore.ReadJSON(filepath.Join(abs, MarginFile), &mg)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			stamped()
			e.What = "margin search " + strings.TrimSuffix(filepath.Base(filepath.Dir(abs)), ".margin")
			e.Verdict, e.Class = "not finished: running, or stopped before it wrote margin.json", "unknown"
			return e
		case err != nil:
			stamped()
			e.Err, e.What = err.Error(), "a margin search"
			return e
		}
		e.StartedText = mg.Started
		if t, err := time.Parse(time.RFC3339, mg.Started); err == nil {
			e.Started = t
		} else {
			stamped()
		}
		e.What = fmt.Sprintf("%s under %s, varying %s from %s to %s", mg.Impl, mg.Fault, mg.Param, mg.From, mg.To)
		e.Verdict = mg.Summary
		switch {
		case mg.Interrupted:
			e.Verdict, e.Class = e.Verdict+" (interrupted)", "unknown"
		case mg.BudgetSpent:
			e.Verdict, e.Class = e.Verdict+" (the budget ran out)", "unknown"
		}
		if mg.Bound != nil {
			e.Detail = fmt.Sprintf("stated bound %s (%s)", mg.Bound.Label, mg.Bound.Rule)
		}
		if g := mg.Gate; g != nil {
			held := "held"
			if g.Failed {
				held, e.Class = "failed", "bad"
				if g.Why != "" {
					held += ": " + g.Why
				}
			} else if e.Class == "" {
				e.Class = "good"
			}
			e.Detail = strings.TrimPrefix(e.Detail+fmt.Sprintf("; gate: %s %s (within %s): %s", g.Source, g.Label, g.Tolerance, held), "; ")
		}
		for _, p := range mg.Points {
			for _, r := range p.Runs {
				e.named = append(e.named, r.Run)
			}
		}
	case KindShrink:
		page(ShrinkHTMLFile, ShrinkFile)
		l, err := ReadShrink(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			stamped()
			e.What = "shrink of " + strings.TrimSuffix(filepath.Base(filepath.Dir(abs)), ".shrink")
			e.Verdict, e.Class = "not finished: running, or stopped before its first candidate", "unknown"
			return e
		case err != nil:
			stamped()
			e.Err, e.What = err.Error(), "a shrink"
			return e
		}
		e.StartedText = l.Started
		if t, err := time.Parse(time.RFC3339, l.Started); err == nil {
			e.Started = t
		} else {
			stamped()
		}
		e.What = fmt.Sprintf("shrink of %s, keeping %s", l.From, l.Anomaly)
		outcome, class := l.Outcome()
		e.Verdict, e.Class = l.Summary()+"; "+outcome, class
		for _, st := range l.Steps {
			for _, t := range st.Trials {
				e.named = append(e.named, t.Run)
			}
		}
		for _, t := range l.Confirmations {
			e.named = append(e.named, t.Run)
		}
	}
	return e
}

// matrixStatuses is the order a matrix's cell tally names its statuses in.
var matrixStatuses = []string{StatusViolated, StatusStuck, StatusInconclusive, StatusHeld, StatusRecovers, StatusMeasured, StatusYes, StatusNo, StatusNA, StatusNotRun}

// matrixTally counts m's cells by status: "2 violated, 10 held, 3 n/a
// cells"; "no cells yet" for a matrix of its header alone.
func matrixTally(m Matrix) string {
	n := map[string]int{}
	total := 0
	for _, r := range m.Rows {
		for _, c := range r.Cells {
			n[c.Status]++
			total++
		}
	}
	if total == 0 {
		return "no cells yet: running, or stopped before it wrote them"
	}
	var parts []string
	for _, s := range matrixStatuses {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
			delete(n, s)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d %s", n[s], cmp.Or(s, "unmarked")))
	}
	return strings.Join(parts, ", ") + " cells"
}

// dropHeaderOnly leaves out a matrix.json of a header alone (what `locktest
// matrix` keeps in its store when its pages go to --out) when the full
// matrix of the same run is in the store too.
func dropHeaderOnly(es []IndexEntry) []IndexEntry {
	full := map[string]bool{}
	for _, e := range es {
		if e.Kind == KindMatrix && e.Err == "" && !strings.HasPrefix(e.Verdict, "no cells") {
			full[e.StartedText+"\x00"+e.Detail] = true
		}
	}
	return slices.DeleteFunc(es, func(e IndexEntry) bool {
		return e.Kind == KindMatrix && strings.HasPrefix(e.Verdict, "no cells") && full[e.StartedText+"\x00"+e.Detail]
	})
}

// folderStamp is the time in a folder's name, as runstore.MakeRunDir
// stamps it (20060102T150405, with a suffix when two start in the same
// second).
func folderStamp(dir string) (time.Time, bool) {
	name := filepath.Base(dir)
	if len(name) < 15 {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("20060102T150405", name[:15], time.Local)
	return t, err == nil
}

// under says whether the folder dir (relative, with slashes) lies in the
// folder parent, or is it.
func under(dir, parent string) bool {
	return parent == "." || dir == parent || strings.HasPrefix(dir, parent+"/")
}

// sameTail says whether the folder rel (relative to the store) is the
// tail of the path p.
func sameTail(rel, p string) bool {
	return rel != "." && strings.HasSuffix(filepath.ToSlash(filepath.Clean(p)), "/"+rel)
}

// withinSearch returns the search whose folder holds absRoot (strictly:
// absRoot is one of its subfolders), read as an entry whose folder and
// page are relative to absRoot; nil when there is none.
func withinSearch(absRoot string) *IndexEntry {
	for d := filepath.Dir(absRoot); ; d = filepath.Dir(d) {
		kind := ""
		for k, file := range map[string]string{KindMargin: MarginFile, KindShrink: ShrinkFile} {
			if _, err := os.Stat(filepath.Join(d, file)); err == nil || strings.HasSuffix(filepath.Base(filepath.Dir(d)), searchSuffix[k]) {
				kind = k
			}
		}
		if kind != "" {
			rel, err := filepath.Rel(absRoot, d)
			if err != nil {
				return nil
			}
			e := loadEntry(absRoot, filepath.ToSlash(rel), kind)
			return &e
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// runMatcher finds a stored run by a path a file names it by.
type runMatcher struct {
	root    string // as given
	absRoot string
	byAbs   map[string]int
	byRel   map[string]int
}

func newRunMatcher(root, absRoot string, rows []IndexRow) *runMatcher {
	m := &runMatcher{root: root, absRoot: absRoot, byAbs: map[string]int{}, byRel: map[string]int{}}
	for i, r := range rows {
		m.byAbs[filepath.Join(absRoot, filepath.FromSlash(r.Dir))] = i
		m.byRel[r.Dir] = i
	}
	return m
}

// rel is p relative to the store's root, with slashes, when p lies in
// it; p otherwise.
func (m *runMatcher) rel(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		if r, err := filepath.Rel(m.absRoot, a); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			return filepath.ToSlash(r)
		}
	}
	return p
}

// trim takes the store's root out of the paths an error message names.
func (m *runMatcher) trim(msg string) string {
	for _, r := range []string{m.absRoot, filepath.Clean(m.root)} {
		if r != "." && r != string(filepath.Separator) {
			msg = strings.ReplaceAll(msg, r+string(filepath.Separator), "")
		}
	}
	return msg
}

// find returns the row of the run whose folder p names (relative to base
// when it is relative), or, when there is no such folder in the store, of
// the run whose folder is the longest tail of p of two parts at least;
// -1 when none is.
func (m *runMatcher) find(p, base string) int {
	if p == "" {
		return -1
	}
	q := p
	if !filepath.IsAbs(q) {
		q = filepath.Join(base, q)
	}
	if a, err := filepath.Abs(q); err == nil {
		if i, ok := m.byAbs[a]; ok {
			return i
		}
	}
	parts := strings.Split(filepath.ToSlash(filepath.Clean(p)), "/")
	for i := 1; i <= len(parts)-2; i++ {
		if j, ok := m.byRel[path.Join(parts[i:]...)]; ok {
			return j
		}
	}
	return -1
}
