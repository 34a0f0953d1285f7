package reports

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/locktest/locktest/runstore"
)

// IndexFile is the page, at the root of a store, that lists its runs.
const IndexFile = "index.html"

var indexTmpl = template.Must(template.New("index.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/index.html.tmpl"))

// IndexRow is one stored run of the index.
type IndexRow struct{ runstore.Stored }

// Verdicts renders each checker's verdict in words, "mutual-exclusion
// valid, …".
func (r IndexRow) Verdicts() []string {
	out := make([]string, 0, len(r.Results.Checkers))
	for _, c := range r.Results.Checkers {
		out = append(out, c.Checker+" "+VerdictWord(c.Valid))
	}
	return out
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
	stored, err := runstore.Scan(root)
	rows := make([]IndexRow, len(stored))
	for i, st := range stored {
		rows[i] = IndexRow{st}
	}
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
	return runstore.WriteFileAtomic(filepath.Join(root, IndexFile), b)
}
