package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/runstore"
)

// The file names the backend matrix is written to.
const (
	MatrixHTMLFile = "matrix.html"
	MatrixMDFile   = "matrix.md"
	// MatrixHeaderFile, at the root of a matrix's store, keeps the header
	// of the run that made it, so the stored matrix can be aggregated
	// again (locktest matrix --from) under its own date, commit and
	// command.
	MatrixHeaderFile = "matrix.json"
)

// Matrix is the backend matrix: one row per impl, one cell per
// measured property. The matrix package builds it from stored runs; this
// package only renders it.
type Matrix struct {
	// SchemaVersion is MatrixSchemaVersion when written.
	SchemaVersion int            `json:"schema_version"`
	Header        MatrixHeader   `json:"header"`
	Columns       []MatrixColumn `json:"columns"`
	Rows          []MatrixRow    `json:"rows"`
	// Seeded holds, when the matrix measured seeded impls beside the
	// correct recipes they vary, what it found of each one's bug.
	Seeded []SeededBug `json:"seeded,omitempty"`
}

// MatrixSchemaVersion is the version of matrix.json's layout
// (docs/schemas/matrix.schema.json). It grows by one with every change a
// reader could trip on.
const MatrixSchemaVersion = 2

// MatrixHeader says how and where a matrix was measured.
type MatrixHeader struct {
	// Date is when the matrix run started.
	Date time.Time `json:"date"`
	// Commit is the code's version: git describe, or the binary's VCS
	// revision.
	Commit string `json:"commit"`
	// Machine describes the host: cores, memory, kernel.
	Machine string `json:"machine"`
	// Seeds is how many seeds each fault cell ran.
	Seeds int `json:"seeds"`
	// Duration is how long each run's workload lasted, in nanoseconds.
	Duration time.Duration `json:"duration"`
	// Settings lists the other run settings in a few words (ttl, clients,
	// fault timing, resource mode).
	Settings string `json:"settings"`
	// Store is the folder of the stored runs the cells link to.
	Store string `json:"store"`
	// Elapsed is how long the whole matrix took, in nanoseconds.
	Elapsed time.Duration `json:"elapsed"`
	// Command is the command line that made the matrix.
	Command string `json:"command"`
	// Parallel is how many runs went at once; Shard ("2/4") names the
	// share of the jobs a sharded matrix made, "" for all of them.
	Parallel int `json:"parallel,omitempty"`
	// Pace says how the number of runs at once was chosen: given, or
	// measured, with the CPU per run measured and the limits chosen.
	Pace string `json:"pace,omitempty"`
	// Skipped counts the runs the matrix left out because the earlier
	// seeds of their cell had decided it (a cell stops when decided).
	Skipped int `json:"skipped,omitempty"`
	// ClustersStarted counts the clusters the matrix's runs started, and
	// ClustersReused the runs that took a cluster an earlier run left
	// healthy, reset and proven clean, instead (run.Clusters).
	ClustersStarted int `json:"clusters_started,omitempty"`
	ClustersReused  int `json:"clusters_reused,omitempty"`
	// ClustersIdled counts the kept clusters stopped because no run took
	// them within ClustersMaxIdle (run.Clusters.MaxIdle).
	ClustersIdled   int           `json:"clusters_idled,omitempty"`
	ClustersMaxIdle time.Duration `json:"clusters_max_idle,omitempty"`
	Shard           string        `json:"shard,omitempty"`
	// Versions are the versions of locktest, the servers and the client
	// libraries of its runs.
	Versions runstore.Versions `json:"versions"`
}

// MatrixColumn is one measured property.
type MatrixColumn struct {
	// Key names the column in Row.Cells.
	Key string `json:"key"`
	// Title is the column's heading; Doc says in a sentence what it
	// measures and how.
	Title string `json:"title"`
	Doc   string `json:"doc"`
}

// MatrixRow is one impl.
type MatrixRow struct {
	Impl    string `json:"impl"`
	Backend string `json:"backend"`
	Nodes   int    `json:"nodes"`
	Doc     string `json:"doc"`
	// Cells holds the row's cell of each column, by column key; a column
	// without a cell renders as empty.
	Cells map[string]MatrixCell `json:"cells"`
	// Versions are the versions its runs ran.
	Versions runstore.Versions `json:"versions"`
}

// Cell statuses. A cell that could not be measured is StatusNA (the
// property does not apply to the backend) or StatusInconclusive (the run
// could not show it); neither is ever rendered as safe.
const (
	StatusViolated     = "violated"
	StatusHeld         = "held"
	StatusNA           = "n/a"
	StatusInconclusive = "inconclusive"
	StatusStuck        = "stuck"
	StatusRecovers     = "recovers"
	StatusMeasured     = "measured"
	StatusYes          = "yes"
	StatusNo           = "no"
	StatusNotRun       = "not run"
)

// MatrixCell is one property of one impl.
type MatrixCell struct {
	// Status is one of the Status constants.
	Status string `json:"status"`
	// Value is the short figure the table shows ("2/2 runs", "p50 0.4 ms").
	Value string `json:"value,omitempty"`
	// Reason explains the value: what was measured, or why it could not
	// be.
	Reason string `json:"reason,omitempty"`
	// Links are the stored runs that show it.
	Links []MatrixLink `json:"links,omitempty"`
	// Runs, Conclusive and Violations count a safety cell's runs, those
	// that tested the property and those that showed a violation; Lo and
	// Hi bound the violation rate (95% Wilson). Zero in other cells.
	Runs       int     `json:"runs,omitempty"`
	Conclusive int     `json:"conclusive,omitempty"`
	Violations int     `json:"violations,omitempty"`
	Lo         float64 `json:"lo,omitempty"`
	Hi         float64 `json:"hi,omitempty"`
	// Survival is how long the lock lasted in a safety cell's conclusive
	// runs (time to the first violation, or the time a clean run ran);
	// nil in other cells and where no run kept its times.
	Survival *Survival `json:"survival,omitempty"`
	// Stopped says, of a cell that ran fewer seeds than the matrix's
	// because its earlier seeds decided it, after how many it stopped and
	// why; "" for a cell that ran them all.
	Stopped string `json:"stopped,omitempty"`
}

// MatrixLink points at one stored run's report.
type MatrixLink struct {
	// Label names the run, e.g. "seed 1".
	Label string `json:"label"`
	// Report is the path of the run's report.html.
	Report string `json:"report"`
}

// Text is the cell as one short line of text: the status and the value.
func (c MatrixCell) Text() string {
	switch {
	case c.Value == "":
		return c.Status
	case c.Status == StatusMeasured || c.Status == StatusYes || c.Status == StatusNo,
		strings.HasPrefix(c.Value, "saved:") || strings.HasPrefix(c.Value, "not saved:"):
		// A value that says its verdict itself (the saved-by-fencing
		// column's) is shown alone.
		return c.Value
	}
	return c.Status + ": " + c.Value
}

// relLink returns the link from a page in dir to target: relative when
// target lies under dir, and "" when it does not (a page in the repository
// must not point into a temporary store).
func relLink(dir, target string) string {
	if target == "" {
		return ""
	}
	adir, err1 := filepath.Abs(dir)
	at, err2 := filepath.Abs(target)
	if err1 != nil || err2 != nil {
		return ""
	}
	rel, err := filepath.Rel(adir, at)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// SeedsText says how many seeds a matrix's fault cells ran: "5", or, where
// the sequential rule left runs out, "up to 5 (a cell stops once its
// earlier seeds decide it: 212 runs left out)".
func SeedsText(h MatrixHeader) string {
	if h.Skipped == 0 {
		return fmt.Sprint(h.Seeds)
	}
	return fmt.Sprintf("up to %d (a cell stops once its earlier seeds decide it: %d runs left out)", h.Seeds, h.Skipped)
}

// RenderMatrixMarkdown renders m as Markdown for a file in dir: the
// header, the table (one row per impl, cells as status and value, with
// links to the stored runs that lie under dir), the notes that say why a
// cell could not be measured or counts fewer runs than it ran, the time
// to failure of the impls that broke, the seeded bugs and what each
// column measures. Every cell's full explanation is in matrix.html and
// matrix.json.
func RenderMatrixMarkdown(m Matrix, dir string) []byte {
	var b bytes.Buffer
	h := m.Header
	fmt.Fprintf(&b, "# locktest backend matrix\n\n")
	fmt.Fprintf(&b, "Generated by `locktest matrix`; how to read and regenerate it: `docs/matrix-howto.md`. "+
		"A cell that could not be measured is n/a (the property does not apply to the backend) or inconclusive (the run could not show it), with the reason in the notes below the table; neither means safe. "+
		"`matrix.html` and `matrix.json`, written beside the stored runs, explain every cell.\n\n")
	fmt.Fprintf(&b, "- date: %s\n", h.Date.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- commit: %s\n", orDash(h.Commit))
	fmt.Fprintf(&b, "- machine: %s\n", orDash(h.Machine))
	fmt.Fprintf(&b, "- seeds per fault cell: %s; workload per run: %s\n", SeedsText(h), h.Duration)
	if h.Settings != "" {
		fmt.Fprintf(&b, "- settings: %s\n", h.Settings)
	}
	if v := VersionsText(h.Versions); v != "" {
		fmt.Fprintf(&b, "- versions: %s\n", v)
	}
	switch {
	case h.Pace != "":
		fmt.Fprintf(&b, "- runs at once: %s (the latency and throughput runs alone)\n", h.Pace)
	case h.Parallel > 1:
		fmt.Fprintf(&b, "- %d runs at once (the latency and throughput runs alone)\n", h.Parallel)
	}
	if h.ClustersStarted+h.ClustersReused > 0 {
		fmt.Fprintf(&b, "- clusters: %d started, %d runs took one an earlier run left healthy, reset and proven clean%s\n", h.ClustersStarted, h.ClustersReused, h.idledText())
	}
	if h.Elapsed > 0 {
		fmt.Fprintf(&b, "- the whole matrix took %s\n", h.Elapsed.Round(time.Second))
	}
	if h.Store != "" {
		fmt.Fprintf(&b, "- stored runs: `%s`\n", h.Store)
	}
	if h.Command != "" {
		fmt.Fprintf(&b, "- command: `%s`\n", h.Command)
	}
	b.WriteString("\n| impl |")
	for _, c := range m.Columns {
		fmt.Fprintf(&b, " %s |", mdEscape(c.Title))
	}
	b.WriteString("\n| --- |")
	for range m.Columns {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range m.Rows {
		fmt.Fprintf(&b, "| `%s` |", r.Impl)
		for _, c := range m.Columns {
			cell, ok := r.Cells[c.Key]
			if !ok {
				b.WriteString("  |")
				continue
			}
			text := mdEscape(cell.Text())
			if links := mdLinks(dir, cell.Links); links != "" {
				text += " (" + links + ")"
			}
			fmt.Fprintf(&b, " %s |", text)
		}
		b.WriteString("\n")
	}
	if notes := matrixNotes(m); len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	writeTimeToFailure(&b, m)
	if t := RenderSeededMarkdown(m); t != nil {
		b.WriteString("\n## Seeded bugs\n\n" + SeededIntro + "\n\n")
		b.Write(t)
	}
	b.WriteString("\n## Columns\n\n")
	for _, c := range m.Columns {
		fmt.Fprintf(&b, "- **%s**: %s\n", c.Title, c.Doc)
	}
	return b.Bytes()
}

// mdLinks returns the Markdown links, from a page in dir, to the stored
// runs of links that lie under dir, comma-separated; "" when none does.
func mdLinks(dir string, links []MatrixLink) string {
	var out []string
	for _, l := range links {
		if href := relLink(dir, l.Report); href != "" {
			out = append(out, fmt.Sprintf("[%s](%s)", l.Label, href))
		}
	}
	return strings.Join(out, ", ")
}

// needsNote reports whether a cell's table text leaves out something a
// reader needs: why it could not be measured (n/a, inconclusive, not run),
// why its lock got stuck, or why a safety cell counts fewer runs than it
// ran.
func needsNote(c MatrixCell) bool {
	switch c.Status {
	case StatusNA, StatusInconclusive, StatusStuck, StatusNotRun:
		return true
	}
	return c.Runs > c.Conclusive
}

// noteText is the reason of a cell that needs a note, without the time to
// failure, which the section of that name gives.
func noteText(c MatrixCell) string {
	if t := c.Survival.Text(); t != "" {
		return strings.TrimSuffix(c.Reason, "; "+t)
	}
	return c.Reason
}

// matrixNotes returns the notes below the table, one per column, cell
// and reason: the column, the impls whose cell it is, the cell as the
// table shows it, and the reason. The notes go by column, and within a
// column by the first impl of each.
func matrixNotes(m Matrix) []string {
	var out []string
	for _, c := range m.Columns {
		type note struct {
			text, reason string
			impls        []string
		}
		var notes []*note
		for _, r := range m.Rows {
			cell, ok := r.Cells[c.Key]
			if !ok || !needsNote(cell) {
				continue
			}
			text, reason := cell.Text(), noteText(cell)
			if reason == "" {
				continue
			}
			i := slices.IndexFunc(notes, func(n *note) bool { return n.text == text && n.reason == reason })
			if i < 0 {
				notes = append(notes, &note{text: text, reason: reason})
				i = len(notes) - 1
			}
			notes[i].impls = append(notes[i].impls, "`"+r.Impl+"`")
		}
		for _, n := range notes {
			out = append(out, fmt.Sprintf("**%s**, %s (%s): %s", c.Title, strings.Join(n.impls, ", "), n.text, strings.ReplaceAll(n.reason, "\n", " ")))
		}
	}
	return out
}

// writeTimeToFailure writes the "Time to failure" section of the
// Markdown: per safety column whose runs kept their times, the impls that
// broke, with the median and the violations per run-hour, and how many
// others did not.
func writeTimeToFailure(b *bytes.Buffer, m Matrix) {
	svs := MatrixSurvivals(m)
	if len(svs) == 0 {
		return
	}
	b.WriteString("\n## Time to failure\n\n")
	b.WriteString("Per safety column, the time from a run's start to its first violation of each impl that had one, over the conclusive runs (Kaplan–Meier: a run that ended clean counts as lasting at least its length), with the median's 95% interval and the violations per run-hour; the HTML page draws the curves and gives every clean cell its bound.\n")
	for _, sv := range svs {
		fmt.Fprintf(b, "\n### %s\n\n", mdEscape(sv.Column.Title))
		var broke []MatrixRow
		for _, r := range m.Rows {
			if s := r.Cells[sv.Column.Key].Survival; s != nil && s.Violations > 0 {
				broke = append(broke, r)
			}
		}
		clean := len(sv.Rows) - len(broke)
		if len(broke) == 0 {
			fmt.Fprintf(b, "No violation in the runs of any of its %d impl%s.\n", clean, plural(clean))
			continue
		}
		b.WriteString("| impl | median time to failure | runs broken, and violations per run-hour |\n| --- | --- | --- |\n")
		for _, r := range broke {
			s := r.Cells[sv.Column.Key].Survival
			fmt.Fprintf(b, "| `%s` | %s | %s |\n", r.Impl, mdEscape(s.MedianText()), mdEscape(brokeText(s)))
		}
		if clean > 0 {
			fmt.Fprintf(b, "\nNo violation in the runs of %d other impl%s.\n", clean, plural(clean))
		}
	}
}

// brokeText is the time to failure of a cell with a violation without its
// median: how many runs broke in how long, and the rate per run-hour.
func brokeText(s *Survival) string {
	return fmt.Sprintf("%d of %d runs broke in %s (%s per hour, at most %s at 95%%)",
		s.Violations, s.Runs, exposureText(s.ExposureS), perHour(s.RatePerHour), perHour(s.RateUpperPerHour))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// mdEscape keeps a table cell in its cell.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

var matrixTmpl = template.Must(template.New("matrix.html.tmpl").Funcs(funcs).Funcs(template.FuncMap{
	"statusClass": statusClass,
	"seedsText":   SeedsText,
}).ParseFS(templates, "templates/matrix.html.tmpl"))

// statusClass is the CSS class suffix of a cell status.
func statusClass(status string) string {
	switch status {
	case StatusNA:
		return "na"
	case StatusNotRun:
		return "notrun"
	}
	return status
}

type matrixData struct {
	Matrix
	Versions string
	Date     string
	Style    template.CSS
	Rows     []matrixRowData
	Survival []MatrixSurvival
	Intro    string
	Bugs     SeededTable
}

// MatrixSurvival is one safety column's time to failure: a chart of the
// impls that broke under its faults, and a line per impl whose runs kept
// their times.
type MatrixSurvival struct {
	Column MatrixColumn
	// Chart draws the Kaplan–Meier curves of the impls with a violation;
	// "" when none had one.
	Chart template.HTML
	Rows  []MatrixSurvivalRow
}

// MatrixSurvivalRow is one impl's time to failure in one column.
type MatrixSurvivalRow struct {
	Impl   string
	Median string
	Text   string
}

// MatrixSurvivals returns, per column, the time to failure of each impl
// whose cell has one, in the matrix's order; columns without any are
// left out.
func MatrixSurvivals(m Matrix) []MatrixSurvival {
	var out []MatrixSurvival
	for _, c := range m.Columns {
		ms := MatrixSurvival{Column: c}
		var curves []SurvivalCurve
		for _, r := range m.Rows {
			sv := r.Cells[c.Key].Survival
			if sv == nil {
				continue
			}
			ms.Rows = append(ms.Rows, MatrixSurvivalRow{Impl: r.Impl, Median: sv.MedianText(), Text: sv.Text()})
			if sv.Violations > 0 {
				curves = append(curves, SurvivalCurve{Name: r.Impl, Survival: sv})
			}
		}
		if len(ms.Rows) == 0 {
			continue
		}
		if len(curves) > 0 {
			ms.Chart = SurvivalSVG("time to failure under "+c.Title, curves)
		}
		out = append(out, ms)
	}
	return out
}

type matrixRowData struct {
	MatrixRow
	Cells []matrixCellData
}

type matrixCellData struct {
	Column MatrixColumn
	Cell   MatrixCell
	Has    bool
	Links  []MatrixLink // with Report relative to the page
}

// RenderMatrixHTML renders m as a self-contained page for a file in dir:
// the header, the table with every cell's explanation on hover, and per
// impl the explanations with links to the stored runs (relative, where the
// runs lie under dir).
func RenderMatrixHTML(m Matrix, dir string) ([]byte, error) {
	d := matrixData{Matrix: m, Versions: VersionsText(m.Header.Versions), Date: m.Header.Date.UTC().Format(time.RFC3339), Style: reportCSS,
		Survival: MatrixSurvivals(m), Intro: SeededIntro, Bugs: NewSeededTable(m)}
	for _, r := range m.Rows {
		rd := matrixRowData{MatrixRow: r}
		for _, c := range m.Columns {
			cell, ok := r.Cells[c.Key]
			cd := matrixCellData{Column: c, Cell: cell, Has: ok}
			for _, l := range cell.Links {
				if href := relLink(dir, l.Report); href != "" {
					cd.Links = append(cd.Links, MatrixLink{Label: l.Label, Report: href})
				}
			}
			rd.Cells = append(rd.Cells, cd)
		}
		d.Rows = append(d.Rows, rd)
	}
	var buf bytes.Buffer
	if err := matrixTmpl.Execute(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteMatrix writes dir/matrix.json (the whole matrix, every cell with
// its counts), dir/matrix.html and dir/matrix.md, creating dir.
func WriteMatrix(dir string, m Matrix) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	m.SchemaVersion = MatrixSchemaVersion
	if err := runstore.WriteJSON(filepath.Join(dir, MatrixHeaderFile), m); err != nil {
		return err
	}
	page, err := RenderMatrixHTML(m, dir)
	if err != nil {
		return err
	}
	if err := runstore.WriteFileAtomic(filepath.Join(dir, MatrixHTMLFile), page); err != nil {
		return err
	}
	return runstore.WriteFileAtomic(filepath.Join(dir, MatrixMDFile), RenderMatrixMarkdown(m, dir))
}

// WriteMatrixMarkdown writes m as Markdown to the file path, with links
// relative to its folder.
func WriteMatrixMarkdown(path string, m Matrix) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return runstore.WriteFileAtomic(path, RenderMatrixMarkdown(m, filepath.Dir(path)))
}

// WriteMatrixHeader writes dir/matrix.json as a matrix of h alone, before
// its pages are written: what a store keeps of the run that made it.
func WriteMatrixHeader(dir string, h MatrixHeader) error {
	return runstore.WriteJSON(filepath.Join(dir, MatrixHeaderFile), Matrix{SchemaVersion: MatrixSchemaVersion, Header: h})
}

// ReadMatrix reads a matrix.json (path, or the one in the folder path). A
// missing file gives an error satisfying errors.Is(err, os.ErrNotExist).
// A file of a newer schema than this locktest knows is an error; one of
// the first layout, which held only the header, gives a matrix of that
// header alone.
func ReadMatrix(path string) (Matrix, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, MatrixHeaderFile)
	}
	var m Matrix
	if err := runstore.ReadJSON(path, &m); err != nil {
		return m, err
	}
	switch {
	case m.SchemaVersion > MatrixSchemaVersion:
		return m, fmt.Errorf("%s: schema_version %d; this locktest reads up to %d", path, m.SchemaVersion, MatrixSchemaVersion)
	case m.SchemaVersion == 0:
		// The first layout: the header's fields at the top.
		var h MatrixHeader
		if err := runstore.ReadJSON(path, &h); err != nil {
			return m, err
		}
		m = Matrix{Header: h}
	}
	return m, nil
}

// ReadMatrixHeader reads the header of dir/matrix.json (ReadMatrix).
func ReadMatrixHeader(dir string) (MatrixHeader, error) {
	m, err := ReadMatrix(filepath.Join(dir, MatrixHeaderFile))
	return m.Header, err
}

// idledText says how many kept clusters were stopped for idling: "; 40
// stopped after 1m0s with no run" ("" when none).
func (h MatrixHeader) idledText() string {
	if h.ClustersIdled == 0 {
		return ""
	}
	return fmt.Sprintf("; %d stopped after %s with no run", h.ClustersIdled, h.ClustersMaxIdle)
}

// IdledText is idledText for the matrix's page.
func (h MatrixHeader) IdledText() string { return h.idledText() }
