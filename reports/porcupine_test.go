package reports

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// killedHolder is a session-lock history where p1's worker is killed while
// it holds lock x, and p2, waiting since before the kill, gets x once the
// server freed it. Without the kill op it is two holders at once.
func killedHolder(withKill bool) history.History {
	var h history.History
	add := func(typ history.Type, p int, f string, ms int64, v history.Value) {
		h = append(h, history.Op{Index: len(h), Type: typ, Process: p, F: f, Time: ms * 1_000_000, Value: v})
	}
	x := history.Value{Lock: "x"}
	add(history.Invoke, 1, history.Acquire, 10, x)
	add(history.OK, 1, history.Acquire, 12, x)
	add(history.Invoke, 2, history.Acquire, 15, x)
	if withKill {
		add(history.Invoke, history.NemesisProcess, "kill-client", 20, history.Value{})
		add(history.OK, history.NemesisProcess, "kill-client", 25, history.Value{Targets: []string{"p1"}})
	}
	add(history.OK, 2, history.Acquire, 30, x)
	add(history.Invoke, 2, history.Release, 40, x)
	add(history.OK, 2, history.Release, 41, x)
	return h
}

// pageData is what porcupine's page embeds of each partition: the ops and
// the partial linearizations it found.
type pageData struct {
	Partitions []struct {
		History []struct {
			Description string
		}
		PartialLinearizations [][]struct {
			Index int
		}
	}
}

// readPage returns the data porcupine's page at path draws.
func readPage(t *testing.T, path string) pageData {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "const data = "); ok {
			var d pageData
			if err := json.Unmarshal([]byte(rest), &d); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return d
		}
	}
	t.Fatalf("%s has no data", path)
	return pageData{}
}

// linearized reports whether the page shows every partition linearized
// whole.
func (d pageData) linearized() bool {
	for _, p := range d.Partitions {
		whole := false
		for _, l := range p.PartialLinearizations {
			whole = whole || len(l) == len(p.History)
		}
		if !whole {
			return false
		}
	}
	return len(d.Partitions) > 0
}

// TestVisualizationAgreesWithTheVerdict: the page is drawn from the
// porcupine mutex checker's own search, so it shows a linearization
// exactly when the checker says valid — also after a kill, where a model
// that ignores deaths (the report's former copy of the model) finds none.
func TestVisualizationAgreesWithTheVerdict(t *testing.T) {
	for _, tc := range []struct {
		name     string
		h        history.History
		valid    checker.Verdict
		describe string
	}{
		{"a killed holder's lock is freed", killedHolder(true), checker.Valid, "p1 died"},
		{"without the kill, two holders", killedHolder(false), checker.Invalid, "p2 acquire(x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results, vis := checker.RunVisual(context.Background(), history.NewTable(tc.h), MaxVisualizedOps, checker.For("none", false)...)
			r := check(runstore.RunInfo{Name: "kill", Expect: "valid"}, tc.h, results)
			var mutex checker.Result
			for _, c := range r.Checkers {
				if c.Checker == mutexChecker {
					mutex = c
				}
			}
			if mutex.Valid != tc.valid {
				t.Fatalf("%s: %s, want %s (%v)", mutexChecker, mutex.Valid, tc.valid, mutex.Anomalies)
			}
			dir := t.TempDir()
			if err := WriteHTMLVisual(dir, r, history.NewTable(tc.h), vis); err != nil {
				t.Fatal(err)
			}
			d := readPage(t, filepath.Join(dir, LinearizabilityFile))
			if got := d.linearized(); got != (tc.valid == checker.Valid) || vis.Linearized() != got {
				t.Errorf("the page shows a linearization: %v (the checker's picture: %v); the checker says %s", got, vis.Linearized(), mutex.Valid)
			}
			page, _ := os.ReadFile(filepath.Join(dir, LinearizabilityFile))
			if !strings.Contains(string(page), tc.describe) {
				t.Errorf("the page does not describe %q", tc.describe)
			}
		})
	}
}

// TestVisualizationOfALongHistory: a history longer than the page is made
// for is shown by its first windows, and the report says which part.
func TestVisualizationOfALongHistory(t *testing.T) {
	var h history.History
	add := func(typ history.Type, p int, f string, at int64) {
		h = append(h, history.Op{Index: len(h), Type: typ, Process: p, F: f, Time: at, Value: history.Value{Lock: "x"}})
	}
	// p0 and p1 take x in turn, the other always waiting.
	add(history.Invoke, 0, history.Acquire, 1)
	add(history.OK, 0, history.Acquire, 2)
	at := int64(3)
	for k := range 15_000 {
		p, q := k%2, 1-k%2
		add(history.Invoke, q, history.Acquire, at)
		add(history.Invoke, p, history.Release, at+1)
		add(history.OK, p, history.Release, at+2)
		add(history.OK, q, history.Acquire, at+3)
		at += 10
	}
	results, vis := checker.RunVisual(context.Background(), history.NewTable(h), MaxVisualizedOps, checker.For("none", false)...)
	r := check(runstore.RunInfo{Name: "long", Expect: "valid"}, h, results)
	dir := t.TempDir()
	if err := WriteHTMLVisual(dir, r, history.NewTable(h), vis); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("of the %d acquire, release and death ops", 30_001)
	if vis.Ops == 0 || vis.Ops > MaxVisualizedOps || !strings.Contains(vis.Note, want) || !vis.Linearized() {
		t.Errorf("the picture shows %d ops in %d windows, linearized %v: %q", vis.Ops, vis.Windows, vis.Linearized(), vis.Note)
	}
	d := readPage(t, filepath.Join(dir, LinearizabilityFile))
	if len(d.Partitions) != vis.Windows || !d.linearized() {
		t.Errorf("the page has %d partitions, linearized %v; want the %d windows shown", len(d.Partitions), d.linearized(), vis.Windows)
	}
	report, _ := os.ReadFile(filepath.Join(dir, runstore.ReportFile))
	if !strings.Contains(string(report), want) {
		t.Errorf("the report does not say what part the page shows (%q)", vis.Note)
	}
}
