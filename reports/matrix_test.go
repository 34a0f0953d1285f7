package reports

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// testMatrix is a hand-built matrix of two impls with a cell of every
// status, links inside and outside the page's folder.
func testMatrix(root string) Matrix {
	cols := []MatrixColumn{
		{Key: "mutex-none", Title: "mutex: no fault", Doc: "mutual exclusion without faults."},
		{Key: "mutex-client-pause", Title: "mutex: client pause", Doc: "mutual exclusion under pause-client."},
		{Key: "mutex-clock", Title: "mutex: clock jump", Doc: "mutual exclusion under clock-bump."},
		{Key: "saved-by-fencing", Title: "saved by fencing", Doc: "the client-pause runs again with a fenced store."},
		{Key: "deadlock", Title: "deadlock freedom", Doc: "time until the lock is acquirable again."},
		{Key: "node-loss", Title: "one node lost", Doc: "availability with one node down."},
		{Key: "fencing", Title: "fencing token", Doc: "token and source."},
		{Key: "latency-1", Title: "acquire p50/p99, 1 client", Doc: "latency | percentiles."},
	}
	inStore := filepath.Join(root, "matrix-redis-set-nx-px-client-pause", "20261122T030000", runstore.ReportFile)
	// A held cell with a run that could not show anything: its reason
	// ends with its time to failure, as the matrix package writes it.
	partly := NewSurvival([]stats.Observation{{Time: 8}, {Time: 7.5}})
	cleanPause := NewSurvival([]stats.Observation{{Time: 8}, {Time: 8}})
	return Matrix{
		Header: MatrixHeader{
			Date: time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC), Commit: "b22d6e1", Machine: "2 cores, 23.5 GiB memory",
			Seeds: 2, Duration: 8 * time.Second, Settings: "ttl 500ms, 5 clients", Elapsed: 21*time.Minute + 30*time.Second,
			Store: "/tmp/matrix-store", Command: "locktest matrix --seeds 2", Parallel: 2,
			Versions: runstore.Versions{Locktest: "v0.2.0", Servers: map[string]string{"redis": "7.0.15"}},
		},
		Columns: cols,
		Rows: []MatrixRow{
			{Impl: "redis-set-nx-px", Backend: "redis", Nodes: 1, Doc: "SET NX PX.", Cells: map[string]MatrixCell{
				"mutex-none": {Status: StatusHeld, Value: "0/2 runs", Reason: "no violation in 2 runs",
					Survival: NewSurvival([]stats.Observation{{Time: 8}, {Time: 8}})},
				"mutex-client-pause": {Status: StatusViolated, Value: "2/2 runs", Reason: "stale-write×3",
					Links:    []MatrixLink{{Label: "seed 1", Report: inStore}, {Label: "seed 2", Report: "/elsewhere/report.html"}},
					Survival: NewSurvival([]stats.Observation{{Time: 1.2, Event: true}, {Time: 3.4, Event: true}})},
				"mutex-clock": {Status: StatusInconclusive, Reason: "fault clock-bump: no C compiler"},
				"saved-by-fencing": {Status: StatusHeld, Value: "saved: 0/2 runs lost an update (the lock broke in 2/2)", Runs: 2, Conclusive: 2, Hi: 0.66,
					Reason: "saved by fencing: the lock broke in each of the 2 run(s) counted, and the fenced store rejected 4 stale write(s) and accepted none"},
				"deadlock":  {Status: StatusRecovers, Value: "max 500 ms", Reason: "after 2 kills"},
				"node-loss": {Status: StatusNA, Reason: "a one-node backend"},
				"fencing":   {Status: StatusYes, Value: "yes: Redis INCR | counter", Reason: "10 tokens"},
				"latency-1": {Status: StatusMeasured, Value: "0.06 / 0.15 ms"},
			}},
			{Impl: "etcd-mutex", Backend: "etcd", Nodes: 3, Cells: map[string]MatrixCell{
				"mutex-none": {Status: StatusHeld, Value: "0/2 runs", Runs: 3, Conclusive: 2, Survival: partly,
					Reason: "no violation in 2 run(s); 1 more run(s) inconclusive: no fault was in force while a client held the lock; " + partly.Text()},
				"mutex-clock": {Status: StatusNA, Reason: "etcd nodes are Go programs (not applicable)"},
				"saved-by-fencing": {Status: StatusViolated, Value: "not saved: 1/2 runs lost an update (the lock broke in 2/2)", Runs: 2, Conclusive: 2, Violations: 1, Lo: 0.09, Hi: 0.91,
					Reason: "not saved by fencing: in 1 of 2 runs the fenced store still accepted a stale write"},
				"deadlock":  {Status: StatusStuck, Value: "1 of 2 kills", Reason: "p3 died holding \"lock-0\""},
				"node-loss": {Status: StatusYes, Value: "yes: 52 vs 61 cs/s"},
				"fencing":   {Status: StatusNo, Value: "no"},
			}},
			{Impl: "redis-naive-del", Backend: "redis", Nodes: 1, Cells: map[string]MatrixCell{
				"mutex-client-pause": {Status: StatusHeld, Value: "0/2 runs", Runs: 2, Conclusive: 2, Survival: cleanPause,
					Reason: "no violation in 2 run(s); " + cleanPause.Text()},
				"mutex-clock": {Status: StatusInconclusive, Reason: "fault clock-bump: no C compiler"},
				"node-loss":   {Status: StatusNA, Reason: "a one-node backend"},
			}},
		},
		Seeded: []SeededBug{{
			Impl: "seeded-process-token", Base: "redis-set-nx-px", Bug: "the token comes from a per-process counter",
			Cells: map[string]SeededCell{
				"mutex-none": {Status: SeededCaught, Runs: 2, Caught: 2, Violated: 2, BaseRuns: 2,
					Kinds: map[string]int{"duplicate-token": 3, "token-regression": 1}, Median: 0.0123},
				"mutex-client-pause": {Status: SeededSame, Runs: 2, Violated: 2, BaseRuns: 2, BaseViolated: 2},
				"mutex-clock":        {Status: SeededInconclusive},
				"deadlock":           {Status: SeededMissed, Runs: 2, BaseRuns: 2},
			},
			CaughtBy: []string{"mutex-none"}, Rate8: 612.4, BaseRate8: 587,
		}},
	}
}

func TestMatrixMarkdownGolden(t *testing.T) {
	dir := t.TempDir()
	m := testMatrix(filepath.Join(dir, "store"))
	got := RenderMatrixMarkdown(m, dir)
	// The temporary folder differs from run to run; the link into it is
	// relative and does not contain it.
	if bytes.Contains(got, []byte(dir)) {
		t.Fatalf("the page names its temporary folder %s", dir)
	}
	compareFile(t, filepath.Join("testdata", "matrix.md.golden"), got)
}

func TestMatrixMarkdownCells(t *testing.T) {
	dir := t.TempDir()
	md := string(RenderMatrixMarkdown(testMatrix(filepath.Join(dir, "store")), dir))
	tests := []struct {
		name, want string
	}{
		{"header names the commit", "- commit: b22d6e1\n"},
		{"header names the machine", "- machine: 2 cores, 23.5 GiB memory\n"},
		{"header names seeds and duration", "- seeds per fault cell: 2; workload per run: 8s\n"},
		{"a violation says so with its rate, and links its runs", "| violated: 2/2 runs ([seed 1](store/"},
		{"an inconclusive cell is never safe", "| inconclusive |"},
		{"n/a keeps its reason, one note for the cells of the same reason", "- **one node lost**, `redis-set-nx-px`, `redis-naive-del` (n/a): a one-node backend\n"},
		{"an inconclusive cell says why", "- **mutex: clock jump**, `redis-set-nx-px`, `redis-naive-del` (inconclusive): fault clock-bump: no C compiler\n"},
		{"a cell with runs that could not show anything says why, without its time to failure",
			"- **mutex: no fault**, `etcd-mutex` (held: 0/2 runs): no violation in 2 run(s); 1 more run(s) inconclusive: no fault was in force while a client held the lock\n"},
		{"a stuck lock says whose", "- **deadlock freedom**, `etcd-mutex` (stuck: 1 of 2 kills): p3 died holding \"lock-0\"\n"},
		{"a pipe in a value stays in its cell", `yes: Redis INCR \| counter`},
		{"a link under the page's folder is relative", "[seed 1](store/matrix-redis-set-nx-px-client-pause/20261122T030000/report.html)"},
		{"a missing cell is empty", "| `etcd-mutex` | held: 0/2 runs |  |"},
		{"stuck is stated", "| stuck: 1 of 2 kills |"},
		{"a seeded bug has its row, with the columns that caught it", "| `seeded-process-token` | `redis-set-nx-px` | the token comes from a per-process counter | " +
			"caught 2/2: duplicate-token, token-regression, first after 0.012 s (median) | same as recipe (2/2 vs 2/2) | inconclusive | missed (0/2) | 612 (587) | mutex: no fault |"},
	}
	for _, tt := range tests {
		if !strings.Contains(md, tt.want) {
			t.Errorf("%s: the Markdown lacks %q", tt.name, tt.want)
		}
	}
	if strings.Contains(md, "/elsewhere/") {
		t.Errorf("a link outside the page's folder was written: %s", md)
	}
	// Every table row has as many cells as its table's header.
	header := -1
	for i, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "| ") {
			header = -1
			continue
		}
		w := len(regexp.MustCompile(`[^\\]\|`).FindAllString(l, -1))
		if header < 0 {
			header = w
		} else if w != header {
			t.Errorf("line %d has %d cell borders, its table's header %d", i+1, w, header)
		}
	}
	// The time to failure: per safety column with times, a line per impl
	// that broke, and how many did not.
	for _, want := range []string{"## Time to failure", "### mutex: client pause",
		"| `redis-set-nx-px` | 1.2 s (95% CI 1.2–∞) | 2 of 2 runs broke in 4.6 run-seconds (1565 per hour, at most 4927 at 95%) |\n\nNo violation in the runs of 1 other impl.\n",
		"### mutex: no fault\n\nNo violation in the runs of any of its 2 impls.\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
	// What the table says is not said again.
	for _, unwanted := range []string{"Cells explained", "| `etcd-mutex` | no violation |", "| `redis-naive-del` | no violation |",
		"run-minutes under these faults", "## Notes\n\n- **mutex: client pause**"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("the Markdown has %q", unwanted)
		}
	}
}

func TestWriteMatrixHTMLIsSelfContained(t *testing.T) {
	dir := t.TempDir()
	if err := WriteMatrix(dir, testMatrix(filepath.Join(dir, "store"))); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, MatrixHTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, MatrixMDFile)); err != nil {
		t.Errorf("no matrix.md beside matrix.html: %v", err)
	}
	s := string(page)
	for _, want := range []string{
		"<style>" + string(reportCSS),
		`<td class="s-violated" title="stale-write×3">violated: 2/2 runs<br><a href="store/matrix-redis-set-nx-px-client-pause/20261122T030000/report.html">seed 1</a></td>`,
		`<td class="s-na" title="etcd nodes are Go programs (not applicable)">n/a</td>`,
		`<td class="s-inconclusive" title="fault clock-bump: no C compiler">inconclusive</td>`,
		`<td class="s-stuck"`,
		"b22d6e1", "2 cores, 23.5 GiB memory", "<th>seeds per fault cell</th><td>2</td>",
		"<h2>Time to failure</h2>", `<svg class="survival" viewBox="0 0 300 150"`, "<h3>mutex: client pause</h3>",
		"<h2>Seeded bugs</h2>", "<td><code>seeded-process-token</code></td><td><code>redis-set-nx-px</code></td>",
		"<td>caught 2/2: duplicate-token, token-regression, first after 0.012 s (median)</td>",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("matrix.html lacks %q", want)
		}
	}
	// One chart: only the client-pause column had a violation.
	if n := strings.Count(s, `<svg class="survival"`); n != 1 {
		t.Errorf("%d survival charts, want 1", n)
	}
	// The JSON carries the curves and validates at its version.
	if err := schemacheck.ValidateFile("matrix", filepath.Join(dir, MatrixHeaderFile)); err != nil {
		t.Error(err)
	}
	back, err := ReadMatrix(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sv := back.Rows[0].Cells["mutex-client-pause"].Survival; sv == nil || sv.Violations != 2 || len(sv.Observations) != 2 {
		t.Errorf("the survival read back: %+v", sv)
	}
	if len(back.Seeded) != 1 || back.Seeded[0].Cells["mutex-none"].Kinds["duplicate-token"] != 3 {
		t.Errorf("the seeded bugs read back: %+v", back.Seeded)
	}
	// Nothing is fetched from elsewhere: the only links are relative
	// anchors and the stored runs.
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(s, -1) {
		if strings.Contains(m[1], "//") || strings.HasPrefix(m[1], "/") {
			t.Errorf("matrix.html refers to %q, outside the page", m[1])
		}
	}
	if strings.Contains(s, "/elsewhere/") {
		t.Errorf("a link outside the page's folder was written")
	}
}

func TestMatrixCellText(t *testing.T) {
	tests := []struct {
		cell MatrixCell
		want string
	}{
		{MatrixCell{Status: StatusViolated, Value: "1/2 runs"}, "violated: 1/2 runs"},
		{MatrixCell{Status: StatusNA, Reason: "one node"}, "n/a"},
		{MatrixCell{Status: StatusInconclusive}, "inconclusive"},
		{MatrixCell{Status: StatusMeasured, Value: "3/s"}, "3/s"},
		{MatrixCell{Status: StatusYes, Value: "yes: czxid"}, "yes: czxid"},
		{MatrixCell{Status: StatusNo}, "no"},
	}
	for _, tt := range tests {
		if got := tt.cell.Text(); got != tt.want {
			t.Errorf("%+v: Text() = %q, want %q", tt.cell, got, tt.want)
		}
	}
}

func TestMatrixHeaderRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadMatrixHeader(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing header: %v", err)
	}
	want := testMatrix(dir).Header
	if err := WriteMatrixHeader(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMatrixHeader(dir)
	if err != nil || !got.Date.Equal(want.Date) || got.Commit != want.Commit || got.Elapsed != want.Elapsed || got.Command != want.Command {
		t.Errorf("read back %+v, %v; want %+v", got, err, want)
	}
}
