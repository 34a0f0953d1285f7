package reports

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"path/filepath"
	"sort"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

//go:embed templates/*.tmpl
var templates embed.FS

var reportTmpl = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	"verdictWord": VerdictWord,
	"expectWord": func(e string) string {
		if e == "invalid" {
			return "expected to find a violation"
		}
		return "expected to be valid"
	},
	"join":  strings.Join,
	"stats": formatStats,
	"sub":   func(a, b int) int { return a - b },
}).ParseFS(templates, "templates/report.html.tmpl"))

// VerdictWord says a verdict in words: valid, invalid or unknown.
func VerdictWord(v checker.Verdict) string {
	switch v {
	case checker.Valid:
		return "valid"
	case checker.Invalid:
		return "invalid"
	}
	return "unknown"
}

func formatStats(s map[string]float64) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, trimFloat(s[k])))
	}
	return strings.Join(parts, ", ")
}

func trimFloat(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.3f", f)
}

type reportData struct {
	Results
	Met bool
	// Ops maps a history index to its rendered op, for the ops that
	// anomalies name.
	Ops map[int]string
}

// RenderHTML renders the plain report of a run: verdicts, anomalies with
// the ops that prove them, the run's settings and links to its files.
func RenderHTML(r Results, h history.History) ([]byte, error) {
	d := reportData{Results: r, Met: r.Met(), Ops: map[int]string{}}
	for _, c := range r.Checkers {
		for _, a := range c.Anomalies {
			for _, i := range a.Ops {
				if i >= 0 && i < len(h) {
					d.Ops[i] = h[i].String()
				} else {
					d.Ops[i] = fmt.Sprintf("op %d is not in the history", i)
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := reportTmpl.Execute(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteHTML renders the report into dir/report.html.
func WriteHTML(dir string, r Results, h history.History) error {
	b, err := RenderHTML(r, h)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ReportFile), b)
}
