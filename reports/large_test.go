package reports

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// largeHistory simulates a run of procs clients contending for one lease
// lock for dur, as redis-set-nx-px with the default settings makes it: an
// acquire takes about a millisecond and fails when the lock is taken, a
// failed client retries after 5 ms, a holder reads, writes, works 5 ms and
// releases; every few seconds the nemesis pauses a client for 2 s.
func largeHistory(procs int, dur time.Duration) history.History {
	rng := rand.New(rand.NewPCG(1, 2))
	h := make(history.History, 0, 3_300_000)
	add := func(o history.Op) {
		o.Index = len(h)
		h = append(h, o)
	}
	const ms = int64(time.Millisecond)
	type proc struct {
		next  int64
		step  int
		token uint64
		value string
	}
	ps := make([]proc, procs)
	for i := range ps {
		ps[i].next = int64(i) * ms / 3
	}
	var holder = -1
	var token uint64
	var n int64
	nemNext, nemStep, paused := 3000*ms, 0, -1
	end := int64(dur)
	lat := func() int64 {
		if rng.IntN(500) == 0 {
			return 30*ms + rng.Int64N(100*ms)
		}
		return 300_000 + rng.Int64N(1500_000)
	}
	for {
		// The next event: a client's or the nemesis's.
		p := -1
		for i := range ps {
			if p < 0 || ps[i].next < ps[p].next {
				p = i
			}
		}
		if nemNext <= ps[p].next {
			t := nemNext
			if t > end {
				break
			}
			switch nemStep {
			case 0:
				add(history.Op{Type: history.Invoke, Process: -1, F: "pause-client", Time: t})
			case 1:
				paused = rng.IntN(procs)
				add(history.Op{Type: history.OK, Process: -1, F: "pause-client", Time: t,
					Value: history.Value{Targets: []string{"p" + itoa(paused)}, Duration: 2000 * ms, Point: "random"}})
				ps[paused].next = max(ps[paused].next, t+2000*ms)
				nemNext += 2000*ms - ms
			case 2:
				add(history.Op{Type: history.Invoke, Process: -1, F: "resume-client", Time: t})
			case 3:
				add(history.Op{Type: history.OK, Process: -1, F: "resume-client", Time: t, Value: history.Value{Targets: []string{"p" + itoa(paused)}}})
				nemNext += 3000*ms + rng.Int64N(2000*ms)
			}
			nemStep = (nemStep + 1) % 4
			nemNext += ms
			continue
		}
		c := &ps[p]
		t := c.next
		if t > end {
			break
		}
		switch c.step {
		case 0:
			add(history.Op{Type: history.Invoke, Process: p, F: history.Acquire, Time: t, Value: history.Value{Lock: "x"}})
			c.next, c.step = t+lat(), 1
		case 1:
			if holder >= 0 {
				add(history.Op{Type: history.Fail, Process: p, F: history.Acquire, Time: t, Value: history.Value{Lock: "x"}, Error: "not acquired"})
				c.next, c.step = t+5*ms, 0
				break
			}
			holder, token = p, token+1
			c.token, c.value = token, "p"+itoa(p)+"-"+itoa(int(token))
			add(history.Op{Type: history.OK, Process: p, F: history.Acquire, Time: t, Value: history.Value{Lock: "x",
				Token: history.Tok(token), LockValue: c.value, ValidUntil: t + 1000*ms, Node: "n1"}})
			c.next, c.step = t+50_000, 2
		case 2:
			add(history.Op{Type: history.Invoke, Process: p, F: history.Write, Time: t, Value: history.Value{Lock: "x", Token: history.Tok(c.token), LockValue: c.value, N: history.Num(n + 1)}})
			c.next, c.step = t+400_000, 3
		case 3:
			n++
			add(history.Op{Type: history.OK, Process: p, F: history.Write, Time: t, Value: history.Value{Lock: "x", Token: history.Tok(c.token), LockValue: c.value, N: history.Num(n), StoreTime: t - 200_000}})
			c.next, c.step = t+5*ms, 4
		case 4:
			add(history.Op{Type: history.Invoke, Process: p, F: history.Release, Time: t, Value: history.Value{Lock: "x", Token: history.Tok(c.token), LockValue: c.value}})
			c.next, c.step = t+lat(), 5
		case 5:
			holder = -1
			add(history.Op{Type: history.OK, Process: p, F: history.Release, Time: t, Value: history.Value{Lock: "x", Removed: c.value}})
			c.next, c.step = t+5*ms, 0
		}
	}
	return h
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// largeReport renders the report of a 10-minute run at 16 clients, with
// two anomalies made up from its ops so that the page draws them.
func largeReport(t testing.TB) ([]byte, history.History) {
	t.Helper()
	h := largeHistory(16, 10*time.Minute)
	var oks []int
	for i := range h {
		if h[i].F == history.Acquire && h[i].Type == history.OK {
			oks = append(oks, i)
		}
	}
	rs := []checker.Result{
		{Checker: "mutual-exclusion", Valid: checker.Invalid, Stats: map[string]float64{"holds": float64(len(oks))},
			Anomalies: []checker.Anomaly{
				{Kind: "overlapping-holds", Ops: []int{oks[1000], oks[1001]}, Explanation: "made up for the benchmark"},
				{Kind: "overlapping-holds", Ops: []int{oks[len(oks)/2], oks[len(oks)/2+1]}, Explanation: "made up for the benchmark"},
			}},
		{Checker: "resource", Valid: checker.Valid, Anomalies: []checker.Anomaly{}},
		{Checker: "fencing-tokens", Valid: checker.Valid, Anomalies: []checker.Anomaly{}},
		{Checker: "liveness", Valid: checker.Valid, Anomalies: []checker.Anomaly{}},
	}
	info := runstore.RunInfo{Name: "large", Impl: "redis-set-nx-px", Backend: "redis", Nodes: 1, Faults: []string{"pause-client"},
		Clients: 16, Locks: 1, TTL: "1s", Duration: "10m0s", Mode: "fenced", Expect: "valid"}
	b, err := RenderHTML(check(info, h, rs), history.NewTable(h))
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// maxLargeReportBytes bounds the page of a 10-minute run at 16 clients.
const maxLargeReportBytes = 12 << 20

// TestLargeReportSize checks that the page of a 10-minute run at 16
// clients stays small: its data grows with the holds, not with the ops.
func TestLargeReportSize(t *testing.T) {
	if testing.Short() {
		t.Skip("renders a 10-minute history")
	}
	b, h := largeReport(t)
	t.Logf("%d ops: report.html is %.1f MB", len(h), float64(len(b))/(1<<20))
	if len(b) > maxLargeReportBytes {
		t.Errorf("report.html of a 10-minute run at 16 clients is %d bytes, more than %d", len(b), maxLargeReportBytes)
	}
}

// BenchmarkRenderLarge measures rendering the report of a 10-minute run at
// 16 clients.
func BenchmarkRenderLarge(b *testing.B) {
	h := largeHistory(16, 10*time.Minute)
	r := check(runstore.RunInfo{Name: "large", Expect: "valid"}, h, checker.Run(b.Context(), history.NewTable(h), checker.ForMode("fenced")...))
	b.ResetTimer()
	var size int
	for b.Loop() {
		out, err := RenderHTML(r, history.NewTable(h))
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size)/(1<<20), "MB")
	b.ReportMetric(float64(len(h)), "ops")
}

// BenchmarkLoadLargeInChromium measures how long headless Chromium takes to
// open the report of a 10-minute run at 16 clients: from the navigation's
// start to the end of its load event, by the page's own Navigation Timing,
// which includes parsing, the static SVG, the script and its first
// redraw; and, as wall time seen from Go, until the page is loaded.
func BenchmarkLoadLargeInChromium(b *testing.B) {
	page, h := largeReport(b)
	path := filepath.Join(b.TempDir(), runstore.ReportFile)
	if err := os.WriteFile(path, page, 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := browser(b)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		b.Fatal(err)
	}
	var load, script float64
	b.ResetTimer()
	for b.Loop() {
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate("file://"+path)); err != nil {
			b.Fatal(err)
		}
		load += eval[float64](b, ctx, `performance.getEntriesByType("navigation")[0].loadEventEnd`)
		script += eval[float64](b, ctx, `document.querySelectorAll("svg#tl rect").length`)
	}
	b.ReportMetric(load/float64(b.N), "ms-to-loaded")
	b.ReportMetric(script/float64(b.N), "svg-rects")
	b.ReportMetric(float64(len(page))/(1<<20), "MB")
	b.ReportMetric(float64(len(h)), "ops")
}
