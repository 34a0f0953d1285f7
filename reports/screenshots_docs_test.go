package reports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/locktest/locktest/runstore"
)

// TestPageScreenshotsForDocs writes the screenshots of the pages other
// than a run's report, the index and a shrink's that docs/reports.md
// shows, when LOCKTEST_PAGE_SCREENSHOTS is "STORE:DIR": from the store,
// DIR/report-scoreboard.png (its newest debate's scoreboard),
// DIR/report-matrix.png (its newest matrix), DIR/report-margin.png (its
// newest margin search) and DIR/report-shrunk.png (the top of the report
// of a confirmation of its newest shrink, with its "shrunk from" box);
// and, from the tests' hand-built matrix (testMatrix), which has seeded
// bugs, DIR/report-seeded.png (the matrix page's seeded bugs). It is
// skipped otherwise.
func TestPageScreenshotsForDocs(t *testing.T) {
	spec := os.Getenv("LOCKTEST_PAGE_SCREENSHOTS")
	if spec == "" {
		t.Skip("set LOCKTEST_PAGE_SCREENSHOTS=STORE:DIR to write the screenshots of docs/reports.md")
	}
	store, out, ok := strings.Cut(spec, ":")
	if !ok {
		t.Fatalf("LOCKTEST_PAGE_SCREENSHOTS=%q: want STORE:DIR", spec)
	}
	x, err := ScanIndex(store)
	if err != nil {
		t.Fatal(err)
	}
	first := func(kind string, es []IndexEntry) string {
		if len(es) == 0 || es[0].Page == "" || !strings.HasSuffix(es[0].Page, ".html") {
			t.Fatalf("%s holds no %s with a page", store, kind)
		}
		return filepath.Join(store, filepath.FromSlash(es[0].Page))
	}
	shrunk := ""
	if len(x.Shrinks) > 0 {
		for _, r := range x.Shrinks[0].Trials {
			if r.Results.Run.Shrunk != nil && r.Report {
				shrunk = filepath.Join(store, filepath.FromSlash(r.Dir), runstore.ReportFile)
				break
			}
		}
	}
	if shrunk == "" {
		t.Fatalf("%s holds no confirmation of a shrink with a report", store)
	}
	hand := t.TempDir()
	if err := WriteMatrix(hand, testMatrix(filepath.Join(hand, "store"))); err != nil {
		t.Fatal(err)
	}
	// The seeded bugs' heading at the top of the window.
	const toSeeded = `window.scrollTo(0, [...document.querySelectorAll("h2")].find(h => h.textContent == "Seeded bugs").getBoundingClientRect().top + window.scrollY - 12)`
	ctx := browser(t)
	for _, shot := range []struct {
		page, file, js string
		height         int64
	}{
		{first("debate", x.Debates), "report-scoreboard.png", "", 1180},
		{first("matrix", x.Matrices), "report-matrix.png", "", 1120},
		{first("margin search", x.Margins), "report-margin.png", "", 1060},
		{shrunk, "report-shrunk.png", "", 250},
		{filepath.Join(hand, MatrixHTMLFile), "report-seeded.png", toSeeded, 260},
	} {
		abs, err := filepath.Abs(shot.page)
		if err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1260, shot.height), chromedp.Navigate("file://"+abs)); err != nil {
			t.Fatal(err)
		}
		if shot.js != "" {
			eval[bool](t, ctx, shot.js+`, true`)
		}
		b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, shot.file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
