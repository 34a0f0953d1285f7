package reports

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

//go:embed templates/*.tmpl templates/*.js templates/*.css
var templates embed.FS

var funcs = template.FuncMap{
	"verdictWord": VerdictWord,
	"expectWord": func(e string) string {
		if e == "invalid" {
			return "expected to find a violation"
		}
		return "expected to be valid"
	},
	"join":         strings.Join,
	"replace":      func(s, old, new string) string { return strings.ReplaceAll(s, old, new) },
	"pct":          Percent,
	"stats":        formatStats,
	"sub":          func(a, b int) int { return a - b },
	"isLin":        func(name string) bool { return name == mutexChecker },
	"durUS":        func(u int64) string { return secsLabel(u, 1000) },
	"versionsText": VersionsText,
	"survivalSVG": func(label string, s *Survival) template.HTML {
		return SurvivalSVG(label, []SurvivalCurve{{Survival: s}})
	},
	"stallsText": StallsText,
}

var reportTmpl = template.Must(template.New("report.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/report.html.tmpl"))

func mustRead(name string) string {
	b, err := templates.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time
	}
	return string(b)
}

var (
	reportJS  = template.JS(mustRead("templates/report.js"))
	reportCSS = template.CSS(mustRead("templates/report.css"))
)

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

// Extras are what a report shows from its run's folder besides the
// results and the history. The zero Extras shows none of it.
type Extras struct {
	// Linearizability is the file name of porcupine's visualization, when
	// one was written; LinearizabilityNote says why not, when it was not,
	// or what part of the history it shows, when it is not all.
	Linearizability     string
	LinearizabilityNote string
	// Logs are the files under logs/, relative to the run's folder.
	Logs []string
	// Resource summarizes resource.jsonl; nil when there is none.
	Resource *ResourceSummary
}

// ResourceSummary is what the report shows of the resource store's log.
type ResourceSummary struct {
	Lines int
	// Counts are requests by f and outcome ("write accepted": 12), sorted.
	Counts []Count
	// Rejected are the first maxRejectedShown refused requests.
	Rejected []ResourceEntry
	// Err says why the log could not be read to its end.
	Err string
}

// Count is a labelled number.
type Count struct {
	What string
	N    int
}

// ResourceEntry is one line of resource.jsonl (workloads.StoreEntry).
type ResourceEntry struct {
	F         string  `json:"f"`
	Process   int     `json:"process"`
	Lock      string  `json:"lock"`
	N         int64   `json:"n"`
	Token     *uint64 `json:"token"`
	LockValue string  `json:"lock_value"`
	Reply     struct {
		OK    bool   `json:"ok"`
		N     int64  `json:"n"`
		Time  int64  `json:"time"`
		Error string `json:"error"`
	} `json:"reply"`
}

// TokenText renders the entry's token, or "-".
func (e ResourceEntry) TokenText() string {
	if e.Token == nil {
		return "-"
	}
	return fmt.Sprint(*e.Token)
}

// TimeText renders the entry's arrival time in seconds.
func (e ResourceEntry) TimeText() string { return secsLabel(us(e.Reply.Time), 1000) }

const maxRejectedShown = 50

// anomView is one anomaly of the list, with the records of its ops.
type anomView struct {
	ID, Checker, Kind, Explanation string
	// N is its place among the anomalies the page shows (D.anomalies of
	// the script).
	N   int
	Ops []opView
}

// anomGroup is the anomalies of one kind found by one checker: how many,
// and the first few, which the page shows.
type anomGroup struct {
	Checker, Kind string
	Count         int
	Shown         []anomView
}

// MaxAnomalyExamples is how many anomalies of each kind (per checker) a
// report shows, in its list and on its timeline; it counts the others.
// results.json has them all.
const MaxAnomalyExamples = 20

// shownAnomalies returns the anomalies of rs a report shows, in order —
// the first MaxAnomalyExamples of each checker's kind — with their ids
// (a1, a2, ...), and calls each with its group's index in the groups it
// returns.
func shownAnomalies(rs []checker.Result, each func(a checker.Anomaly, checker, id string)) []anomGroup {
	var groups []anomGroup
	at := map[[2]string]int{}
	n := 0
	for _, r := range rs {
		for _, a := range r.Anomalies {
			k := [2]string{r.Checker, a.Kind}
			g, ok := at[k]
			if !ok {
				g = len(groups)
				at[k] = g
				groups = append(groups, anomGroup{Checker: r.Checker, Kind: a.Kind})
			}
			groups[g].Count++
			if groups[g].Count > MaxAnomalyExamples {
				continue
			}
			n++
			id := fmt.Sprintf("a%d", n)
			groups[g].Shown = append(groups[g].Shown, anomView{ID: id, N: n - 1, Checker: r.Checker, Kind: a.Kind, Explanation: a.Explanation})
			if each != nil {
				each(a, r.Checker, id)
			}
		}
	}
	return groups
}

type opView struct {
	Index  int
	Record string
}

type reportData struct {
	runstore.Results
	Met        bool
	Cluster    string
	Anomalies  []anomGroup
	Timeline   template.HTML
	Latency    template.HTML
	Throughput template.HTML
	Legend     []legendItem
	Pct        []percentileRow
	TL         *timeline
	Notices    *noticeSection
	// Excerpt says that h holds only the first ops of the history (a
	// history too long to hold, checked as a stream): what the timeline,
	// the charts and the percentiles show.
	Excerpt string
	Data    template.JS
	Script  template.JS
	Style   template.CSS
	X       Extras
}

type legendItem struct{ Name, Color string }

// RenderHTML renders the report of a run from its results and history
// alone, without what its folder holds (see RenderReport).
func RenderHTML(r runstore.Results, h *history.Table) ([]byte, error) {
	return RenderReport(r, h, Extras{})
}

// RenderReport renders the report of a run: one self-contained page (its
// styles, script and data inline) with the verdicts, the run's settings,
// the anomalies with the ops that prove them, the lease timeline (drawn as
// SVG in the page, so it shows without JavaScript; the script adds zoom,
// pan and hover), latency and throughput charts, and what x adds.
func RenderReport(r runstore.Results, h *history.Table, x Extras) ([]byte, error) {
	tl := buildTimeline(r.Checkers, h)
	data, err := json.Marshal(tl) // escapes <, > and &, so it cannot end the script
	if err != nil {
		return nil, err
	}
	d := reportData{Results: r, Met: r.Met(), TL: tl, Data: template.JS(data), Script: reportJS, Style: reportCSS, X: x,
		Timeline: timelineSVG(tl), Pct: percentiles(h), Notices: buildNotices(r.Run, h)}
	d.Cluster = ClusterText(r.Run)
	if total := int(r.Stats["ops"]); total > h.Len() {
		d.Excerpt = fmt.Sprintf("This history has %d ops, too many to draw: the timeline, the latency and throughput charts and the percentiles show its first %d, up to %s. The verdicts, the stats and the anomalies cover all of them; results.json lists every anomaly.",
			total, h.Len(), secsLabel(tl.End, 1000))
	}
	if r.Run.Network != "" {
		d.Cluster += ", network: " + r.Run.Network
	}
	if r.Run.Clock != "" {
		d.Cluster += ", clock: " + r.Run.Clock
	}
	if c := r.Run.Cluster; c != nil && c.Reused {
		d.Cluster += fmt.Sprintf(", reused: it served %d runs before this one, started by %s (reset %s)", c.RunsBefore, c.StartedBy, c.Reset)
	}
	lat := latencyData(h)
	d.Latency = latencySVG(tl, lat)
	for i, s := range latencySeries {
		if len(lat[i]) > 0 {
			d.Legend = append(d.Legend, legendItem{s.f + " " + string(s.typ), s.color})
		}
	}
	d.Throughput = throughputSVG(tl, h)
	var ops [][]opView
	d.Anomalies = shownAnomalies(r.Checkers, func(a checker.Anomaly, _, _ string) {
		var vs []opView
		for _, i := range a.Ops {
			rec := fmt.Sprintf("op %d is not in the history", i)
			if i >= 0 && i < h.Len() {
				rec = h.At(i).String()
			}
			vs = append(vs, opView{i, rec})
		}
		ops = append(ops, vs)
	})
	for g := range d.Anomalies {
		for i := range d.Anomalies[g].Shown {
			a := &d.Anomalies[g].Shown[i]
			a.Ops = ops[a.N]
		}
	}
	var buf bytes.Buffer
	if err := reportTmpl.Execute(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ClusterText says in a few words what ran the nodes of run: how many of
// which backend, and as what — local processes, processes on SSH hosts,
// or docker containers (and their image, unless the network, which the
// report shows next to it, names it already). Runs stored before RunInfo had a provider are told
// apart by their network, which names the Docker network under docker.
func ClusterText(run runstore.RunInfo) string {
	provider := run.Provider
	if provider == "" {
		provider = "local"
		if strings.HasPrefix(run.Network, "docker") {
			provider = "docker"
		}
	}
	if provider == "ssh" {
		// The network, shown next to it, names the hosts.
		return fmt.Sprintf("%d × %s (processes on SSH hosts)", run.Nodes, run.Backend)
	}
	if provider != "docker" {
		return fmt.Sprintf("%d × %s (local processes)", run.Nodes, run.Backend)
	}
	what := "docker containers"
	if run.Image != "" && !strings.Contains(run.Network, run.Image) {
		what += ", image " + run.Image
	}
	return fmt.Sprintf("%d × %s (%s)", run.Nodes, run.Backend, what)
}

// WriteHTML renders the report into dir/report.html, with the extras the
// folder holds: links to its logs, a summary of resource.jsonl, and, when
// the porcupine mutex checker ran, porcupine's visualization written to
// dir/linearizability.html, for which it runs that checker on h once more.
// WriteHTMLVisual is for a caller that has the checker's own picture.
func WriteHTML(dir string, r runstore.Results, h *history.Table) error {
	return WriteHTMLVisual(dir, r, h, nil)
}

// WriteHTMLVisual is WriteHTML with vis, the porcupine mutex checker's
// picture of its own search (checker.RunVisual), drawn as it is; nil
// makes one as WriteHTML does.
func WriteHTMLVisual(dir string, r runstore.Results, h *history.Table, vis *checker.Visualization) error {
	x, err := ReadExtras(dir, r, h, vis)
	if err != nil {
		return err
	}
	b, err := RenderReport(r, h, x)
	if err != nil {
		return err
	}
	return runstore.WriteFileAtomic(filepath.Join(dir, runstore.ReportFile), b)
}

// ReadExtras gathers the Extras of the run in dir, writing porcupine's
// visualization vis (made as WriteHTML does when nil) when the porcupine
// mutex checker is among r's.
func ReadExtras(dir string, r runstore.Results, h *history.Table, vis *checker.Visualization) (Extras, error) {
	var x Extras
	for _, c := range r.Checkers {
		if c.Checker != mutexChecker {
			continue
		}
		file, note, err := visualizeMutex(dir, h, vis)
		if err != nil {
			return x, fmt.Errorf("porcupine visualization: %w", err)
		}
		x.Linearizability, x.LinearizabilityNote = file, note
		break
	}
	logs := filepath.Join(dir, runstore.LogsDir)
	_ = filepath.WalkDir(logs, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || len(x.Logs) >= 200 {
			return nil
		}
		if rel, err := filepath.Rel(dir, p); err == nil {
			x.Logs = append(x.Logs, filepath.ToSlash(rel))
		}
		return nil
	})
	x.Resource = readResource(filepath.Join(dir, runstore.ResourceFile))
	return x, nil
}

// readResource summarizes a resource log; nil when there is none.
func readResource(path string) *ResourceSummary {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	s := &ResourceSummary{}
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s.Lines++
		var e ResourceEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			s.Err = fmt.Sprintf("line %d: %v", s.Lines, err)
			break
		}
		what := e.F + " accepted"
		if !e.Reply.OK {
			what = e.F + " rejected"
			if len(s.Rejected) < maxRejectedShown {
				s.Rejected = append(s.Rejected, e)
			}
		}
		counts[what]++
	}
	if err := sc.Err(); err != nil && s.Err == "" {
		s.Err = err.Error()
	}
	for k, n := range counts {
		s.Counts = append(s.Counts, Count{k, n})
	}
	sort.Slice(s.Counts, func(i, j int) bool { return s.Counts[i].What < s.Counts[j].What })
	return s
}
