package matrix

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// ProbeFile is the file, in a reentrancy probe's folder, that holds its
// finding, so that a stored matrix can be aggregated again (Load).
const ProbeFile = "probe.json"

func writeProbe(dir string, r Reentrancy) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ProbeFile), append(b, '\n'), 0o644)
}

// parseJobName splits a stored job's folder name, matrix-<impl>-<what>,
// into its impl and what it measured (a class, perf-1, perf-8, deadlock or
// reentrancy), using the registered impl names.
func parseJobName(name string) (impl string, p Probe, c Class, ok bool) {
	rest, found := strings.CutPrefix(name, "matrix-")
	if !found {
		return "", "", "", false
	}
	for _, n := range append(impls.Names(), impls.SeededNames()...) {
		if what, found := strings.CutPrefix(rest, n+"-"); found {
			if p, c, ok := parseWhat(what); ok {
				return n, p, c, true
			}
		}
	}
	// An external client's row: its name is what comes before a known
	// probe or class.
	for _, what := range append([]string{string(ProbePerf1), string(ProbePerf8), string(ProbeDeadlock), string(ProbeReentrant)}, classNames()...) {
		if n, found := strings.CutSuffix(rest, "-"+what); found && n != "" {
			p, c, _ := parseWhat(what)
			return n, p, c, true
		}
	}
	return "", "", "", false
}

// parseWhat reads what a job measured: a probe or a fault class.
func parseWhat(what string) (Probe, Class, bool) {
	switch Probe(what) {
	case ProbePerf1, ProbePerf8, ProbeDeadlock, ProbeReentrant:
		return Probe(what), ClassNone, true
	}
	if slices.Contains(Classes, Class(what)) || Class(what) == ClassClientPauseFenced {
		return ProbeSafety, Class(what), true
	}
	return "", "", false
}

// classNames are the fault classes' names, the fenced client-pause
// variant first (it ends as client-pause's name does not).
func classNames() []string {
	out := []string{string(ClassClientPauseFenced)}
	for _, c := range Classes {
		out = append(out, string(c))
	}
	return out
}

// Load reads the matrix jobs stored under root — the folders
// matrix-<impl>-<what>/<timestamp> that Execute leaves — and measures each
// run again from its results.json and history.jsonl, so a stored matrix
// can be rendered again without running it. Of a job run more than once
// with the same seed, the newest run counts. It returns the results in
// plan order and the fault classes found. A run folder that cannot be read
// gives a result with Err, not an error; a root without any matrix job
// is an error.
func Load(root string) ([]Result, []Class, error) {
	groups, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, err
	}
	type key struct {
		impl string
		p    Probe
		c    Class
		seed int64
	}
	newest := map[key]Result{}
	started := map[key]string{}
	for _, g := range groups {
		impl, p, c, ok := parseJobName(g.Name())
		if !ok || !g.IsDir() {
			continue
		}
		runs, err := os.ReadDir(filepath.Join(root, g.Name()))
		if err != nil {
			return nil, nil, err
		}
		for _, r := range runs {
			if !r.IsDir() { // the "latest" link, an index
				continue
			}
			dir := filepath.Join(root, g.Name(), r.Name())
			j := Job{Impl: impl, Probe: p, Class: c, Seed: 1}
			j.Config.Name, j.Config.Impl = g.Name(), impl
			var res Result
			if p == ProbeReentrant {
				b, err := os.ReadFile(filepath.Join(dir, ProbeFile))
				if err != nil {
					continue // a probe of an older locktest, or one that was interrupted
				}
				var re Reentrancy
				if err := json.Unmarshal(b, &re); err != nil {
					continue
				}
				res = Result{Job: j, Reentrancy: &re, ProbeDir: dir}
			} else {
				rr, err := runstore.ReadResults(dir)
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				j.Seed = rr.Run.Seed
				j.Config.Seed, j.Config.Clients, j.Config.Faults = rr.Run.Seed, rr.Run.Clients, rr.Run.Faults
				j.Config.TTL, _ = time.ParseDuration(rr.Run.TTL)
				j.Config.Duration, _ = time.ParseDuration(rr.Run.Duration)
				res = loadRun(j, dir, rr, err)
			}
			k := key{impl, p, c, j.Seed}
			if old, ok := started[k]; !ok || r.Name() > old {
				newest[k], started[k] = res, r.Name()
			}
		}
	}
	if len(newest) == 0 {
		return nil, nil, fmt.Errorf("%s holds no matrix runs (folders matrix-<impl>-<class>/<time>)", root)
	}
	var out []Result
	var classes []Class
	for _, r := range newest {
		out = append(out, r)
		if r.Job.Probe == ProbeSafety && !slices.Contains(classes, r.Job.Class) {
			classes = append(classes, r.Job.Class)
		}
	}
	order := func(r Result) int {
		switch r.Job.Probe {
		case ProbePerf1:
			return 0
		case ProbePerf8:
			return 1
		case ProbeSafety:
			if r.Job.Class == ClassClientPauseFenced {
				return 2 + slices.Index(Classes, ClassClientPause)
			}
			return 2 + slices.Index(Classes, r.Job.Class)
		case ProbeDeadlock:
			return 2 + len(Classes)
		}
		return 3 + len(Classes)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Job.Impl != b.Job.Impl {
			return a.Job.Impl < b.Job.Impl
		}
		if a.Job.Seed != b.Job.Seed && a.Job.Probe != ProbeReentrant && b.Job.Probe != ProbeReentrant {
			return a.Job.Seed < b.Job.Seed
		}
		return order(a) < order(b)
	})
	sort.Slice(classes, func(i, j int) bool { return slices.Index(Classes, classes[i]) < slices.Index(Classes, classes[j]) })
	return out, classes, nil
}

// loadRun measures one stored run; err is the error of reading its
// results.
func loadRun(j Job, dir string, rr runstore.Results, err error) Result {
	if err != nil {
		return Result{Job: j, Dir: dir, Err: err.Error()}
	}
	h, err := history.ReadFile(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		return Result{Job: j, Dir: dir, Results: rr, Err: "stored history: " + err.Error()}
	}
	return Measure(j, dir, rr, h)
}

// StoredHeader describes a loaded matrix from its runs: the earliest
// start, the time from it to the end of the last run, the version that
// made them, the seeds, and the workload time of the fault runs.
func StoredHeader(rs []Result) reports.MatrixHeader {
	var h reports.MatrixHeader
	var end time.Time
	for _, r := range rs {
		if int(r.Job.Seed) > h.Seeds {
			h.Seeds = int(r.Job.Seed)
		}
		if r.Dir == "" || r.Err != "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, r.Results.Run.Started)
		if err != nil {
			continue
		}
		if h.Date.IsZero() || t.Before(h.Date) {
			h.Date = t
		}
		if d, err := time.ParseDuration(r.Results.Run.Elapsed); err == nil && t.Add(d).After(end) {
			end = t.Add(d)
		}
		if h.Commit == "" {
			h.Commit = r.Results.Run.Version
		}
		if r.Job.Probe == ProbeSafety && r.Job.Config.Duration > h.Duration {
			h.Duration = r.Job.Config.Duration
		}
	}
	if h.Commit == "" {
		h.Commit = runstore.Version()
	}
	if !h.Date.IsZero() && end.After(h.Date) {
		h.Elapsed = end.Sub(h.Date).Round(time.Second)
	}
	return h
}
