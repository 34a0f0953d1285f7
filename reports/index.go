package reports

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// IndexFile is the page, at the root of a store, that lists its runs.
const IndexFile = "index.html"

var indexTmpl = template.Must(template.New("index.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/index.html.tmpl"))

// IndexRow is one stored run of the index.
type IndexRow struct {
	// Dir is the run's folder relative to the store, with slashes.
	Dir     string
	Started time.Time
	Results Results
	// Report says whether the run's folder has a report.html.
	Report bool
	// Anomalies counts the anomalies of every checker.
	Anomalies int
	// Err says why the run's results.json could not be read.
	Err string
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

// ScanStore returns every run stored under root (each folder with a
// results.json), newest first. Symbolic links (a scenario's "latest") are
// not followed, so each run is listed once. A results.json that cannot be
// read gives a row with its error, not an error of the scan.
func ScanStore(root string) ([]IndexRow, error) {
	if _, err := os.Stat(root); err != nil {
		return nil, err
	}
	var rows []IndexRow
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable folder is left out
		}
		if e.IsDir() || e.Name() != ResultsFile {
			return nil
		}
		dir := filepath.Dir(p)
		rel, rerr := filepath.Rel(root, dir)
		if rerr != nil {
			return nil
		}
		row := IndexRow{Dir: filepath.ToSlash(rel)}
		res, rerr := ReadResults(dir)
		if rerr != nil {
			row.Err = rerr.Error()
		}
		row.Results = res
		row.Started, _ = time.Parse(time.RFC3339, res.Run.Started)
		if st, err := os.Stat(filepath.Join(dir, ReportFile)); err == nil && !st.IsDir() {
			row.Report = true
		}
		for _, c := range res.Checkers {
			row.Anomalies += len(c.Anomalies)
		}
		rows = append(rows, row)
		return nil
	})
	sort.SliceStable(rows, func(i, j int) bool {
		if !rows[i].Started.Equal(rows[j].Started) {
			return rows[i].Started.After(rows[j].Started)
		}
		return rows[i].Dir > rows[j].Dir
	})
	return rows, err
}

type indexData struct {
	Root  string
	Rows  []IndexRow
	Count map[string]int // by verdict: "true", "false", "unknown"
	Style template.CSS
}

// RenderIndex renders the index page of rows.
func RenderIndex(root string, rows []IndexRow) ([]byte, error) {
	d := indexData{Root: root, Rows: rows, Count: map[string]int{}, Style: reportCSS}
	for _, r := range rows {
		if r.Err == "" {
			d.Count[string(r.Results.Valid)]++
		}
	}
	var buf bytes.Buffer
	if err := indexTmpl.Execute(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteIndex (re)writes root/index.html, listing every run stored under
// root, newest first, with its verdicts and links to its report.
func WriteIndex(root string) error {
	rows, err := ScanStore(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store %s: no such folder", root)
		}
		return fmt.Errorf("store %s: %w", root, err)
	}
	b, err := RenderIndex(strings.TrimSuffix(root, "/"), rows)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(root, IndexFile), b)
}
