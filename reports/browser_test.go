package reports

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// chromiumPath is the Debian package's browser.
const chromiumPath = "/usr/bin/chromium"

var (
	installOnce sync.Once
	installErr  error
)

// needChromium returns the path of Chromium, installing the Debian package
// with scripts/apt-install when it is missing; it skips the test, saying
// why, only when that is impossible.
func needChromium(t testing.TB) string {
	t.Helper()
	installOnce.Do(func() {
		if _, err := os.Stat(chromiumPath); err == nil {
			return
		}
		out, err := exec.Command(filepath.Join("..", "scripts", "apt-install"), "chromium").CombinedOutput()
		if err != nil {
			installErr = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
			return
		}
		_, installErr = os.Stat(chromiumPath)
	})
	if installErr != nil {
		t.Skipf("Chromium is not installed and could not be installed (%v): run make setup", installErr)
	}
	return chromiumPath
}

// browser starts a headless Chromium for the test, stopped at its end.
func browser(t testing.TB) context.Context {
	t.Helper()
	path := needChromium(t)
	parent, cancelParent := context.WithTimeout(context.Background(), 2*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(parent,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // kills the browser and waits for it
		cancelParent()
	})
	return ctx
}

// requests records the URL of every request the page makes.
type requests struct {
	mu   sync.Mutex
	urls []string
}

func (r *requests) listen(t testing.TB, ctx context.Context) {
	t.Helper()
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			r.mu.Lock()
			r.urls = append(r.urls, e.Request.URL)
			r.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("listen: %v", err)
	}
}

func (r *requests) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.urls...)
}

func eval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// TestReportInChromium loads the report of a mutual-exclusion violation in
// headless Chromium: the timeline SVG and its red anomaly are drawn, the
// anomaly list takes the timeline to the anomaly, hovering an op shows its
// record, no request leaves the file, and without JavaScript the verdict,
// the anomaly and the timeline are still there. It saves screenshots in
// the test's artifact directory (go test -artifacts keeps them).
func TestReportInChromium(t *testing.T) {
	r, h := loadGolden(t, "overlapping-holders.jsonl")
	dir := t.TempDir()
	if err := WriteHTML(dir, r, history.NewTable(h)); err != nil {
		t.Fatal(err)
	}
	url := "file://" + filepath.Join(dir, runstore.ReportFile)
	ctx := browser(t)
	var reqs requests
	reqs.listen(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	if got := eval[string](t, ctx, `document.querySelector("h1").textContent`); got != "overlapping-holders: invalid" {
		t.Errorf("heading %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("svg#tl rect.hold").length`); n != 2 {
		t.Errorf("the timeline draws %d holds, want 2", n)
	}
	// The anomaly: a red line through red points at the ops that prove it.
	if n := eval[int](t, ctx, `document.querySelectorAll("svg#tl g.anom circle").length`); n != 3 {
		t.Errorf("the anomaly has %d points, want 3", n)
	}
	if c := eval[string](t, ctx, `getComputedStyle(document.querySelector("svg#tl g.anom polyline")).stroke`); c != "rgb(224, 0, 0)" {
		t.Errorf("the anomaly's line is %q, want red", c)
	}
	// Hovering a point shows the op's full record.
	eval[bool](t, ctx, `document.querySelector('svg#tl circle[data-o="3"]').dispatchEvent(new MouseEvent("mouseover", {bubbles: true}))`)
	if tip := eval[string](t, ctx, `document.getElementById("tip").hidden ? "" : document.getElementById("tip").textContent`); !strings.Contains(tip, h[3].String()) {
		t.Errorf("hovering op 3 shows %q, want its record %s", tip, h[3])
	}
	// Zoom out of the whole run, then the anomaly's link zooms onto it.
	eval[bool](t, ctx, `document.querySelector('[data-z="in"]').click(), true`)
	eval[bool](t, ctx, `document.querySelector('[data-z="in"]').click(), true`)
	eval[bool](t, ctx, `document.querySelector('.goto').click(), true`)
	span := eval[[]float64](t, ctx, `window.locktestReport.span()`)
	if t0, t1 := span[0], span[1]; t0 > 100_000 || t1 < 250_000 {
		t.Errorf("after the anomaly's link the timeline shows [%v, %v] µs, want the anomaly's ops at 0.1–0.25 s", t0, t1)
	}
	if !eval[bool](t, ctx, `document.getElementById("a1").classList.contains("sel")`) {
		t.Error("the anomaly is not selected in the list")
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	out := t.ArtifactDir()
	if err := os.WriteFile(filepath.Join(out, "report.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", filepath.Join(out, "report.png"))

	// Without JavaScript: the verdict, the anomaly and the static timeline.
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}), chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	noJS, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "report-nojs.png"), noJS, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	// Read the static page's DOM without running its script: Evaluate runs
	// in DevTools' own world, which the setting does not stop.
	if got := eval[string](t, ctx, `document.querySelector("h1").textContent + "|" + document.querySelectorAll("svg#tl g.anom circle").length + "|" + document.querySelector(".anomaly strong").textContent + "|" + document.documentElement.classList.contains("js")`); got != "overlapping-holders: invalid|3|overlapping-holds|false" {
		t.Errorf("without JavaScript the page shows %q", got)
	}

	for _, u := range reqs.list() {
		if u != url {
			t.Errorf("the page requested %s; it must need nothing but itself", u)
		}
	}
	if len(reqs.list()) == 0 {
		t.Error("no request was seen at all: the network listener does not work")
	}
}

// TestScreenshotForDocs writes the screenshot of docs/reports.md when
// LOCKTEST_SCREENSHOT is "report.html:out.png" (with an optional third
// field, a CSS selector of the anomaly link to click first); it is
// skipped otherwise.
func TestScreenshotForDocs(t *testing.T) {
	spec := os.Getenv("LOCKTEST_SCREENSHOT")
	if spec == "" {
		t.Skip("set LOCKTEST_SCREENSHOT=report.html:out.png to write the screenshot of docs/reports.md")
	}
	parts := strings.Split(spec, ":")
	if len(parts) < 2 {
		t.Fatalf("LOCKTEST_SCREENSHOT=%q: want report.html:out.png", spec)
	}
	abs, err := filepath.Abs(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1260, 1000), chromedp.Navigate("file://"+abs)); err != nil {
		t.Fatal(err)
	}
	if len(parts) > 2 {
		eval[bool](t, ctx, `(document.querySelector(`+fmt.Sprintf("%q", parts[2])+`) || {click(){}}).click(), true`)
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(parts[1], shot, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSurvivalChartsInChromium: the scoreboard's and the matrix's time to
// failure, drawn by a real browser from the file alone: each chart has a
// size, its curves and bands, and nothing is fetched from the network.
func TestSurvivalChartsInChromium(t *testing.T) {
	dir := t.TempDir()
	board, err := RenderScoreboardHTML(sampleBoard())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scoreboard.html"), board, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteMatrix(dir, testMatrix(filepath.Join(dir, "store"))); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	var reqs requests
	reqs.listen(t, ctx)
	for _, page := range []struct {
		file           string
		charts, curves int
	}{
		{"scoreboard.html", 3, 3}, // the three rows with conclusive runs, one curve each
		{MatrixHTMLFile, 1, 1},    // client pause: the one impl that broke
	} {
		url := "file://" + filepath.Join(dir, page.file)
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatalf("load %s: %v", url, err)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll("svg.survival").length`); n != page.charts {
			t.Errorf("%s: %d survival charts, want %d", page.file, n, page.charts)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll("svg.survival path[fill=none]").length`); n != page.curves {
			t.Errorf("%s: %d curves, want %d", page.file, n, page.curves)
		}
		// Every chart is laid out with a size, and its curve has length.
		if w := eval[float64](t, ctx, `Math.min(...[...document.querySelectorAll("svg.survival")].map(s => s.getBoundingClientRect().width))`); w < 200 {
			t.Errorf("%s: a chart is %v px wide", page.file, w)
		}
		if l := eval[float64](t, ctx, `Math.min(...[...document.querySelectorAll("svg.survival path[fill=none]")].map(p => p.getTotalLength()))`); l < 100 {
			t.Errorf("%s: a curve is %v px long", page.file, l)
		}
	}
	for _, u := range reqs.list() {
		if !strings.HasPrefix(u, "file://") {
			t.Errorf("a page fetched %s", u)
		}
	}
}
