package matrix

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
)

// Made is a matrix that Run made: Matrix aggregates the Ran jobs that
// ran; Err says why the others did not (ctx ended, or a job could not
// run), nil when every job ran.
type Made struct {
	Matrix reports.Matrix
	Ran    int
	Err    error
}

// KeptIdle is how long a matrix keeps a cluster that no run takes
// (run.Clusters.MaxIdle). A kept cluster's servers use the CPU while they
// wait: when the matrix went seed by seed over every impl, part way
// through a 5-seed matrix 90 Redis servers and sentinels, 12 etcd members
// and 9 NATS servers were up, and in a 10 s sample the etcd members took
// 0.34 cores and the Redis processes 0.35, most of them idle, of the 2.
// The plan now goes impl by impl (Plan), so a cluster's next run comes
// within seconds, and one left after its impl's last seed is stopped a
// minute later, which keeps it for the next impls on the same backend;
// an etcd trio idle for a minute uses about what its start costs.
const KeptIdle = time.Minute

// Run runs the jobs of the matrix of o, as many at once as pace allows
// (Execute),
// with done called after each, as shard ("" when unsharded) of command;
// then it writes the matrix's header (Options.Header) into o's store and
// aggregates the results over o's classes. The matrix holds the runs
// made before a job stopped the rest; the error is the header's.
func Run(ctx context.Context, o Options, jobs []Job, pace Pace, shard, command string, done func(i int, r Result)) (Made, error) {
	start := time.Now()
	header := o.Header(ctx, start, 0, shard, command)
	keep := run.NewClusters() // the runs reuse their clusters (run.Clusters)
	keep.MaxIdle = KeptIdle
	defer keep.Close(context.WithoutCancel(ctx))
	jobs = slices.Clone(jobs)
	for i := range jobs {
		// The store's index is written once, when the matrix's pages are
		// (Write's caller), not after each of its hundreds of runs.
		jobs[i].Config.Clusters, jobs[i].Config.NoIndex = keep, true
	}
	results, skipped, runErr := Execute(ctx, jobs, pace, done)
	header.Elapsed = time.Since(start).Round(time.Second)
	header.Parallel, header.Pace, header.Skipped = pace.Most(), pace.Text(), skipped
	header.ClustersStarted, header.ClustersReused = keep.Stats()
	header.ClustersIdled, header.ClustersMaxIdle = keep.Idled(), keep.MaxIdle
	if err := reports.WriteMatrixHeader(o.Base.StoreDir, header); err != nil {
		return Made{}, fmt.Errorf("write matrix header: %w", err)
	}
	return Made{Matrix: Aggregate(header, o.ColumnClasses(), results), Ran: len(results), Err: runErr}, nil
}

// Inconclusive returns the cells of m that are inconclusive, as "IMPL
// COLUMN", sorted.
func Inconclusive(m reports.Matrix) []string {
	var inc []string
	for _, r := range m.Rows {
		for k, c := range r.Cells {
			if c.Status == reports.StatusInconclusive {
				inc = append(inc, r.Impl+" "+k)
			}
		}
	}
	slices.Sort(inc)
	return inc
}

// Summary says in a few words what the run of r showed.
func (r Result) Summary() string {
	switch {
	case r.Reentrancy != nil:
		return "reentrant " + r.Reentrancy.Status + ": " + r.Reentrancy.Reason
	case r.Err != "":
		return "did not run: " + r.Err
	case r.Job.Probe == ProbeDeadlock:
		var parts []string
		for _, rec := range r.Recoveries {
			if rec.Recovered() {
				parts = append(parts, fmt.Sprintf("p%d's lock taken again after %s", rec.Process, rec.After.Round(time.Millisecond)))
			} else {
				parts = append(parts, fmt.Sprintf("p%d's lock not taken again in %s", rec.Process, rec.Observed.Round(time.Millisecond)))
			}
		}
		if len(parts) == 0 {
			return "no lock holder was killed"
		}
		return strings.Join(parts, ", ")
	case r.Fenced != nil && r.Safety.Violated:
		return "not saved by fencing: the store accepted (" + reports.KindsText(r.Safety.Kinds) + ")"
	case r.Fenced != nil && r.Safety.Conclusive:
		return fmt.Sprintf("saved by fencing: the lock broke, the store rejected %d stale write(s), %d faults", r.Fenced.Rejected, r.Safety.Faults)
	case r.Safety.Violated:
		return "violation (" + reports.KindsText(r.Safety.Kinds) + ")"
	case !r.Safety.Conclusive:
		return "inconclusive: " + r.Safety.Reason
	}
	return fmt.Sprintf("no violation, %d faults, %d acquires", r.Safety.Faults, r.Acquired)
}

// From reads the matrix that from holds, for command: a matrix.json as
// it is (file), or, in a folder, the matrix runs stored there aggregated
// again (Again).
func From(from, command string) (m reports.Matrix, file bool, err error) {
	if st, err := os.Stat(from); err == nil && !st.IsDir() {
		m, err := reports.ReadMatrix(from)
		if err != nil {
			return m, true, fmt.Errorf("--from: %v", err)
		}
		return m, true, nil
	}
	m, err = Again(from, command)
	return m, false, err
}

// WriteText writes what matrix --baseline prints of c: how many cells it
// compared, each cell worse than the baseline or no longer shown, and the
// cells whose time to failure it compared.
func (c Comparison) WriteText(w io.Writer) {
	fmt.Fprintf(w, "baseline: %d cells compared, %d worse, %d no longer shown\n", c.Compared, len(c.Worse), len(c.Lost))
	for _, ch := range c.Worse {
		fmt.Fprintf(w, "  worse: %s %s: %s (was %s): %s\n", ch.Impl, ch.Column, ch.After, ch.Before, ch.Why)
	}
	for _, ch := range c.Lost {
		fmt.Fprintf(w, "  no longer shown: %s %s: %s (was %s)\n", ch.Impl, ch.Column, ch.After, ch.Before)
	}
	if len(c.Survival) > 0 {
		fmt.Fprintf(w, "baseline: time to failure compared in %d cells (log-rank test, worse below p = %.2g)\n", len(c.Survival), SurvivalP)
		for _, ch := range c.Survival {
			fmt.Fprintf(w, "  %s %s: %s\n", ch.Impl, ch.Column, ch.Why)
		}
	}
}

// Progress writes on w the line that starts the matrix of o (its jobs,
// impls, seeds, runs at once and store) and returns the done of Run: one
// line on w per finished job, with what it showed (Result.Summary), how
// long it took and how much is left.
func Progress(w io.Writer, o Options, jobs []Job, pace Pace) func(i int, r Result) {
	names := map[string]bool{}
	for _, j := range jobs {
		names[j.Impl] = true
	}
	fmt.Fprintf(w, "matrix: up to %d jobs (%d impls, up to %d seeds: a cell stops when decided), %s, store %s\n", len(jobs), len(names), o.Seeds, paceStart(pace), o.Base.StoreDir)
	start := time.Now()
	return func(i int, r Result) {
		fmt.Fprintf(w, "[%*d/%d%s] %s: %s (%s, %d at once)\n", len(fmt.Sprint(len(jobs))), i, len(jobs), run.ToGo(start, i, len(jobs)-i),
			r.Job.Label(), r.Summary(), r.Elapsed.Round(100*time.Millisecond), pace.Limit())
	}
}

// paceStart says how pace starts: "3 at once", or the measured pace's
// first limit.
func paceStart(p Pace) string {
	if f, ok := p.(*fixed); ok {
		return fmt.Sprintf("%d at once", f.n)
	}
	return fmt.Sprintf("%d at once to start, then as measured", p.Limit())
}
