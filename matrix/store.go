package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// Shard returns the jobs of shard i of n (1 ≤ i ≤ n): every n-th job,
// from the i-th on, so that the shards of one plan split its jobs.
func Shard(jobs []Job, i, n int) []Job {
	var mine []Job
	for k, j := range jobs {
		if k%n == i-1 {
			mine = append(mine, j)
		}
	}
	return mine
}

// Header is the header of the matrix of o, started at start by command
// with parallel runs at once, as shard ("" when unsharded).
func (o Options) Header(ctx context.Context, start time.Time, parallel int, shard, command string) reports.MatrixHeader {
	return reports.MatrixHeader{
		Date: start, Commit: runstore.Commit(ctx), Machine: runstore.Machine(), Seeds: o.Seeds,
		Duration: o.Duration, Store: absPath(o.Base.StoreDir), Command: command,
		Parallel: parallel, Shard: shard,
		Settings: fmt.Sprintf("ttl %s, %d clients under faults (8 and 1 without), resource mode none%s, holds of up to %s and a retry every up to %s (the timed runs: no work, up to %s), a fault every ~1s for 2s (node down 1s, client pause %s), 1s fault-free at the end",
			o.TTL, o.Clients, o.fencedText(), Work, Retry, PerfRetry, 4*o.TTL),
	}
}

// fencedText is what the header's settings say of the saved-by-fencing
// column: ", fenced for the saved-by-fencing column" when o has it.
func (o Options) fencedText() string {
	if !o.fencedColumn() {
		return ""
	}
	return " (fenced for the saved-by-fencing column)"
}

// Again aggregates the matrix runs stored in from again, for command: the
// header is the stored one of the run that made the store (which knows
// its commit, machine and command), or one made from the runs.
func Again(from, command string) (reports.Matrix, error) {
	results, classes, err := Load(from)
	if err != nil {
		return reports.Matrix{}, fmt.Errorf("--from: %v", err)
	}
	header, err := reports.ReadMatrixHeader(from)
	switch {
	case err == nil:
		header.Command = fmt.Sprintf("%s; aggregated again by %s", header.Command, command)
	case errors.Is(err, os.ErrNotExist):
		header = StoredHeader(results)
		header.Machine, header.Command = runstore.Machine(), command
		for _, r := range results {
			if r.Job.Probe == ProbeSafety && r.Job.Class != ClassNone && r.Dir != "" {
				header.Settings = fmt.Sprintf("ttl %s, %d clients under faults (8 and 1 without), resource mode none; aggregated again from the stored runs",
					r.Job.Config.TTL, r.Job.Config.Clients)
				break
			}
		}
	default:
		return reports.Matrix{}, err
	}
	header.Store = absPath(from)
	return Aggregate(header, classes, results), nil
}

// MergeStores aggregates the runs of several matrix stores, made by the
// shards of one matrix, into one matrix, as command merged them.
func MergeStores(stores []string, command string) (reports.Matrix, error) {
	var all []Result
	var classes []Class
	var header reports.MatrixHeader
	for i, st := range stores {
		results, cs, err := Load(st)
		if err != nil {
			return reports.Matrix{}, fmt.Errorf("merge: %v", err)
		}
		all = append(all, results...)
		for _, c := range cs {
			if !slices.Contains(classes, c) {
				classes = append(classes, c)
			}
		}
		h, err := reports.ReadMatrixHeader(st)
		if err != nil {
			return reports.Matrix{}, fmt.Errorf("merge: %v", err)
		}
		if i == 0 {
			header = h
		}
		header.Elapsed = max(header.Elapsed, h.Elapsed)
	}
	header.Shard, header.Store = "", strings.Join(stores, ", ")
	header.Command = fmt.Sprintf("%s; merged by %s", header.Command, command)
	return Aggregate(header, classes, all), nil
}

// ReadBaseline reads a stored matrix.json to compare with; nil without
// one. A file that cannot be read, or holds no cells (a matrix store's
// header), is refused.
func ReadBaseline(path string) (*reports.Matrix, error) {
	if path == "" {
		return nil, nil
	}
	b, err := reports.ReadMatrix(path)
	if err != nil {
		return nil, fmt.Errorf("--baseline: %v", err)
	}
	if len(b.Rows) == 0 {
		return nil, fmt.Errorf("--baseline %s holds no cells (a matrix store's header, not a matrix.json made by this version)", path)
	}
	return &b, nil
}

// Write writes m's pages into the folder out and, when set, matrix.json
// into jsonOut and its Markdown into the file md.
func Write(m reports.Matrix, out, md, jsonOut string) error {
	if err := reports.WriteMatrix(out, m); err != nil {
		return fmt.Errorf("write matrix: %w", err)
	}
	if jsonOut != "" {
		m.SchemaVersion = reports.MatrixSchemaVersion
		if err := runstore.WriteJSON(jsonOut, m); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if md != "" {
		if err := reports.WriteMatrixMarkdown(md, m); err != nil {
			return fmt.Errorf("write %s: %w", md, err)
		}
	}
	return nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
