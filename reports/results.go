// Package reports turns a checked history into what people read: the
// results.json of a run and its HTML report. It reads only histories and
// checker results, never a live system.
package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// The file names of a stored run directory.
const (
	HistoryFile  = "history.jsonl"
	ResultsFile  = "results.json"
	ReportFile   = "report.html"
	ResourceFile = "resource.jsonl"
)

// RunInfo describes how a run was made, so it can be reproduced.
type RunInfo struct {
	Name        string   `json:"name"`
	Impl        string   `json:"impl"`
	ImplDoc     string   `json:"impl_doc,omitempty"`
	Backend     string   `json:"backend"`
	Nodes       int      `json:"nodes"`
	Faults      []string `json:"faults"`
	Clients     int      `json:"clients"`
	Locks       int      `json:"locks"`
	TTL         string   `json:"ttl"`
	Duration    string   `json:"duration"`
	Seed        int64    `json:"seed"`
	Mode        string   `json:"resource_mode"`
	PausePoint  string   `json:"pause_point,omitempty"`
	ClientPause string   `json:"client_pause,omitempty"`
	// Targets, ClockDirection, Partition and Stagger are the fault settings
	// that pin a scenario's faults: what each fault may hit, which way clock
	// faults jump, the explicit partition, the wait between combined parts.
	Targets        map[string][]string `json:"targets,omitempty"`
	ClockDirection string              `json:"clock_direction,omitempty"`
	Partition      [][]string          `json:"partition,omitempty"`
	Stagger        string              `json:"stagger,omitempty"`
	// Provider is what ran the nodes: "local" (processes on the host) or
	// "docker" (containers); empty in the results of older runs.
	Provider string `json:"provider,omitempty"`
	// Image is the container image the nodes ran, under the docker
	// provider.
	Image string `json:"image,omitempty"`
	// Network says where nodes and clients ran: "loopback", the network
	// namespaces' subnet, or the run's Docker network.
	Network string `json:"network,omitempty"`
	// Lab is the id of the run's network lab; every namespace, link and
	// rule it made carries it (see `locktest cleanup`).
	Lab string `json:"lab,omitempty"`
	// Clock says whether nodes ran under the clock shim, or why not.
	Clock       string `json:"clock,omitempty"`
	Command     string `json:"command"`
	Version     string `json:"version"`
	Started     string `json:"started"` // wall-clock start, RFC 3339
	Elapsed     string `json:"elapsed"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Expect is the verdict the run was expected to give: "valid" (the
	// default) or "invalid" (a scenario meant to reproduce an anomaly).
	Expect string `json:"expect"`
	// Errors are problems of the run itself (a fault that could not be
	// healed, a worker protocol error) that make its history suspect.
	Errors []string `json:"errors,omitempty"`
}

// Results is the content of results.json.
type Results struct {
	Run   RunInfo         `json:"run"`
	Valid checker.Verdict `json:"valid"`
	// Problems are reasons the run tested less than it meant to: the run's
	// own errors, no successful acquire, faults asked for but none applied.
	// Any problem makes a valid verdict unknown.
	Problems []string           `json:"problems,omitempty"`
	Checkers []checker.Result   `json:"checkers"`
	Stats    map[string]float64 `json:"stats"`
}

// Summarize computes the history-wide stats of a run: ops, critical
// sections (acquire ok) and the faults injected (nemesis oks of the faults
// named in faults, whose ops the fault registry names).
func Summarize(faults []string, h history.History) map[string]float64 {
	faults = FaultParts(faults)
	s := map[string]float64{"ops": float64(len(h))}
	for _, o := range h {
		switch {
		case o.IsNemesis() && o.Type == history.OK && slices.Contains(faults, faultOf(o.F)):
			s["faults_injected"]++
		case o.F == history.Acquire && o.Type == history.OK:
			s["critical_sections"]++
		}
	}
	if n := len(h); n > 0 {
		s["seconds"] = float64(h[n-1].Time) / 1e9
	}
	return s
}

// Check assembles the results of the checkers rs on h. A run with problems
// (see Results.Problems) is at best unknown: it did not test what it meant
// to.
func Check(info RunInfo, h history.History, rs []checker.Result) Results {
	r := Results{Run: info, Valid: checker.Overall(rs), Checkers: rs, Stats: Summarize(info.Faults, h)}
	r.Problems = append(r.Problems, info.Errors...)
	if r.Stats["critical_sections"] == 0 {
		r.Problems = append(r.Problems, "no acquire succeeded: the run tested nothing")
	}
	if len(info.Faults) > 0 && r.Stats["faults_injected"] == 0 {
		r.Problems = append(r.Problems, "no fault was applied: run longer or lower --interval")
	} else {
		r.Problems = append(r.Problems, neverApplied(info.Faults, h)...)
	}
	if len(r.Problems) > 0 {
		r.Valid = checker.Merge(r.Valid, checker.Unknown)
	}
	return r
}

// faultOf returns the name of the fault whose injection op has f, or f
// when no fault has (a heal, or an op of a fault this build does not have).
func faultOf(f string) string {
	if k, ok := history.FaultOfOp(f); ok {
		return k.Name
	}
	return f
}

// FaultParts splits combined faults ("partition+clock-bump") into their
// parts, each once, in order: the history records each part as its own op.
func FaultParts(faults []string) []string {
	var out []string
	for _, f := range faults {
		for _, p := range strings.Split(f, "+") {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// neverApplied names the faults that the nemesis tried to inject, every
// time without success: the run did not test what it asked for.
func neverApplied(faults []string, h history.History) []string {
	faults = FaultParts(faults)
	tried, applied := map[string]bool{}, map[string]bool{}
	for _, o := range h {
		if !o.IsNemesis() {
			continue
		}
		f := faultOf(o.F)
		if !slices.Contains(faults, f) {
			continue
		}
		switch o.Type {
		case history.Invoke:
			tried[f] = true
		case history.OK:
			applied[f] = true
		}
	}
	var out []string
	for _, f := range faults {
		if tried[f] && !applied[f] {
			out = append(out, fmt.Sprintf("fault %s was tried but never applied (see its failed ops)", f))
		}
	}
	return out
}

// Met reports whether the results match the run's expectation.
func (r Results) Met() bool {
	if r.Run.Expect == "invalid" {
		return r.Valid == checker.Invalid
	}
	return r.Valid == checker.Valid
}

// WriteResults writes dir/results.json.
func WriteResults(dir string, r Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ResultsFile), append(b, '\n'))
}

// ReadResults reads dir/results.json. A missing file gives zero results and
// an error satisfying errors.Is(err, os.ErrNotExist).
func ReadResults(dir string) (Results, error) {
	var r Results
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", filepath.Join(dir, ResultsFile), err)
	}
	return r, nil
}

// writeFileAtomic writes via a temporary file and a rename, so a reader
// never sees half a file.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		_ = os.Remove(tmp) // a part of it, on a full disk
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
