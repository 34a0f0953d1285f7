package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The file names the backend matrix is written to.
const (
	MatrixHTMLFile = "matrix.html"
	MatrixMDFile   = "matrix.md"
)

// Matrix is the backend matrix of issue 8: one row per impl, one cell per
// measured property. The matrix package builds it from stored runs; this
// package only renders it.
type Matrix struct {
	Header  MatrixHeader
	Columns []MatrixColumn
	Rows    []MatrixRow
}

// MatrixHeader says how and where a matrix was measured.
type MatrixHeader struct {
	// Date is when the matrix run started.
	Date time.Time
	// Commit is the code's version: git describe, or the binary's VCS
	// revision.
	Commit string
	// Machine describes the host: cores, memory, kernel.
	Machine string
	// Seeds is how many seeds each fault cell ran.
	Seeds int
	// Duration is how long each run's workload lasted.
	Duration time.Duration
	// Settings lists the other run settings in a few words (ttl, clients,
	// fault timing, resource mode).
	Settings string
	// Store is the folder of the stored runs the cells link to.
	Store string
	// Elapsed is how long the whole matrix took.
	Elapsed time.Duration
	// Command is the command line that made the matrix.
	Command string
}

// MatrixColumn is one measured property.
type MatrixColumn struct {
	// Key names the column in Row.Cells.
	Key string
	// Title is the column's heading; Doc says in a sentence what it
	// measures and how.
	Title, Doc string
}

// MatrixRow is one impl.
type MatrixRow struct {
	Impl    string
	Backend string
	Nodes   int
	Doc     string
	// Cells holds the row's cell of each column, by column key; a column
	// without a cell renders as empty.
	Cells map[string]MatrixCell
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
	Status string
	// Value is the short figure the table shows ("2/2 runs", "p50 0.4 ms").
	Value string
	// Reason explains the value: what was measured, or why it could not
	// be.
	Reason string
	// Links are the stored runs that show it.
	Links []MatrixLink
}

// MatrixLink points at one stored run's report.
type MatrixLink struct {
	// Label names the run, e.g. "seed 1".
	Label string
	// Report is the path of the run's report.html.
	Report string
}

// Text is the cell as one short line of text: the status and the value.
func (c MatrixCell) Text() string {
	switch {
	case c.Value == "":
		return c.Status
	case c.Status == StatusMeasured || c.Status == StatusYes || c.Status == StatusNo:
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

// RenderMatrixMarkdown renders m as Markdown for a file in dir: the
// header, the table (one row per impl, cells as status and value), and per
// impl the explanations of its cells. Links to stored runs appear only
// where the run lies under dir.
func RenderMatrixMarkdown(m Matrix, dir string) []byte {
	var b bytes.Buffer
	h := m.Header
	fmt.Fprintf(&b, "# locktest backend matrix\n\n")
	fmt.Fprintf(&b, "- date: %s\n", h.Date.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- commit: %s\n", orDash(h.Commit))
	fmt.Fprintf(&b, "- machine: %s\n", orDash(h.Machine))
	fmt.Fprintf(&b, "- seeds per fault cell: %d; workload per run: %s\n", h.Seeds, h.Duration)
	if h.Settings != "" {
		fmt.Fprintf(&b, "- settings: %s\n", h.Settings)
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
			fmt.Fprintf(&b, " %s |", mdEscape(cell.Text()))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Columns\n\n")
	for _, c := range m.Columns {
		fmt.Fprintf(&b, "- **%s**: %s\n", c.Title, c.Doc)
	}
	b.WriteString("\n## Cells explained\n")
	for _, r := range m.Rows {
		fmt.Fprintf(&b, "\n### `%s` (%s, %d node%s)\n\n", r.Impl, r.Backend, r.Nodes, plural(r.Nodes))
		if r.Doc != "" {
			fmt.Fprintf(&b, "%s\n\n", r.Doc)
		}
		for _, c := range m.Columns {
			cell, ok := r.Cells[c.Key]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "- %s — %s", c.Title, cell.Text())
			if cell.Reason != "" {
				fmt.Fprintf(&b, ": %s", cell.Reason)
			}
			var links []string
			for _, l := range cell.Links {
				if href := relLink(dir, l.Report); href != "" {
					links = append(links, fmt.Sprintf("[%s](%s)", l.Label, href))
				}
			}
			if len(links) > 0 {
				fmt.Fprintf(&b, " (%s)", strings.Join(links, ", "))
			}
			b.WriteString("\n")
		}
	}
	return b.Bytes()
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
	Date  string
	Style template.CSS
	Rows  []matrixRowData
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
	d := matrixData{Matrix: m, Date: m.Header.Date.UTC().Format(time.RFC3339), Style: reportCSS}
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

// WriteMatrix writes dir/matrix.html and dir/matrix.md, creating dir.
func WriteMatrix(dir string, m Matrix) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	page, err := RenderMatrixHTML(m, dir)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, MatrixHTMLFile), page); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, MatrixMDFile), RenderMatrixMarkdown(m, dir))
}

// WriteMatrixMarkdown writes m as Markdown to the file path, with links
// relative to its folder.
func WriteMatrixMarkdown(path string, m Matrix) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(path, RenderMatrixMarkdown(m, filepath.Dir(path)))
}
