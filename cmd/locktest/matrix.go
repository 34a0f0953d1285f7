package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
)

func newMatrixCmd() *cobra.Command {
	o := matrix.DefaultOptions()
	var faults []string
	var out, md, from, shard, baseline, jsonOut string
	var parallel int
	var q bool
	c := &cobra.Command{
		Use:   "matrix",
		Short: "Run every impl against each fault class and write the backend matrix (matrix.html, matrix.md)",
		Long: `matrix runs each impl against the fault classes none, client-pause, node-pause,
kill-restart, partition and clock (resource mode none, so violations show),
plus a holder-kill run for deadlock freedom and fault-free runs with 1 and 8
clients for latency and throughput, and writes one row per impl to
matrix.html, matrix.md and matrix.json (every cell with its counts and 95%
interval). A property a run could not show is n/a or inconclusive with its
reason, never safe. See docs/matrix.md.

Violations are what a matrix finds, not an unexpected verdict: to gate a
build on them, compare with a stored matrix.json (--baseline). --shard splits
the jobs over machines and ` + "`locktest merge`" + ` joins their stores.

Exit codes: 0 the matrix was made; 1 with --baseline, a cell got worse (a
violation or a stuck lock where the baseline had none, or a violation rate
wholly above the baseline's interval); 3 a cell was inconclusive, or with
--baseline a cell the baseline showed to hold could not be shown now, or the
matrix was interrupted; 2 bad usage or a set-up failure.`,
		Example: `  locktest matrix --store /tmp/matrix-store --md docs/matrix.md
  locktest matrix --impls redis-set-nx-px,etcd-mutex --faults none,client-pause --seeds 2 --time 8s
  locktest matrix --from /tmp/matrix-store --md docs/matrix.md
  locktest matrix --seeds 5 --parallel 2 --baseline docs/matrix.json
  locktest matrix --from today/matrix.json --baseline docs/matrix.json
  locktest matrix --seeds 5 --shard 1/3 --store m1   # then: locktest merge m1 m2 m3 --out matrix`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			base, err := matrix.ReadBaseline(baseline)
			if err != nil {
				return usageError{err}
			}
			if parallel < 1 {
				return usageError{fmt.Errorf("--parallel must be at least 1, got %d", parallel)}
			}
			if def, err := run.ProviderNamed(o.Base.Provider); err == nil && def.OneRunAtATime {
				if cmd.Flags().Changed("parallel") && parallel > 1 {
					return usageError{fmt.Errorf("--parallel %d: the %s provider's hosts take one run at a time", parallel, def.Name)}
				}
				parallel = 1
			}
			shardI, shardN, err := parseShard(shard)
			if err != nil {
				return usageError{fmt.Errorf("--shard: %v", err)}
			}
			if jsonOut != "" {
				if err := writableFile(jsonOut); err != nil {
					return usageError{fmt.Errorf("--json: %v", err)}
				}
			}
			if st, err := os.Stat(from); from != "" && err == nil && !st.IsDir() {
				// A matrix.json: compare it, and write its pages where asked.
				m, err := reports.ReadMatrix(from)
				if err != nil {
					return usageError{fmt.Errorf("--from: %v", err)}
				}
				if out != "" || md != "" || jsonOut != "" {
					if out == "" {
						out = filepath.Dir(jsonOut)
					}
					if err := writeMatrix(cmd, m, out, md, jsonOut); err != nil {
						return err
					}
				}
				return matrixOutcome(cmd, m, base, false)
			}
			if from != "" {
				// Aggregate the runs stored in from again, and write the
				// pages into out (default: from) and md.
				m, err := matrix.Again(from, "locktest "+strings.Join(os.Args[1:], " "))
				if err != nil {
					return usageError{err}
				}
				if err := writeMatrix(cmd, m, cmp.Or(out, from), md, jsonOut); err != nil {
					return err
				}
				return matrixOutcome(cmd, m, base, false)
			}
			classes, err := matrix.ParseClasses(faults)
			if err != nil {
				return usageError{fmt.Errorf("--faults: %v", err)}
			}
			o.Classes = classes
			o.Base.StoreDir = filepath.Clean(o.Base.StoreDir)
			jobs, err := matrix.Plan(o)
			if err != nil {
				return usageError{err}
			}
			if shardN > 0 {
				jobs = matrix.Shard(jobs, shardI, shardN)
			}
			if out == "" {
				out = o.Base.StoreDir
			}
			// Every output must be writable before the first of many runs.
			for _, d := range []struct{ flag, dir string }{{"--store", o.Base.StoreDir}, {"--out", out}} {
				if err := os.MkdirAll(d.dir, 0o755); err != nil {
					return usageError{fmt.Errorf("%s: %v", d.flag, err)}
				}
				if err := writableDir(d.dir); err != nil {
					return usageError{fmt.Errorf("%s: %v", d.flag, err)}
				}
			}
			if md != "" {
				if err := writableFile(md); err != nil {
					return usageError{fmt.Errorf("--md: %v", err)}
				}
			}
			start := time.Now()
			header := o.Header(cmd.Context(), start, parallel, shard, "locktest "+strings.Join(os.Args[1:], " "))
			progress := io.Discard
			if !q {
				progress = cmd.ErrOrStderr()
			}
			names := map[string]bool{}
			for _, j := range jobs {
				names[j.Impl] = true
			}
			fmt.Fprintf(progress, "matrix: %d jobs (%d impls, %d seeds), %d at once, store %s\n", len(jobs), len(names), o.Seeds, parallel, o.Base.StoreDir)
			results, runErr := matrix.Execute(cmd.Context(), jobs, parallel, func(i int, r matrix.Result) {
				fmt.Fprintf(progress, "[%*d/%d%s] %s: %s (%s)\n", len(fmt.Sprint(len(jobs))), i, len(jobs), toGo(start, i, len(jobs)-i),
					r.Job.Label(), summary(r), r.Elapsed.Round(100*time.Millisecond))
			})
			header.Elapsed = time.Since(start).Round(time.Second)
			if err := reports.WriteMatrixHeader(o.Base.StoreDir, header); err != nil {
				return fmt.Errorf("write matrix header: %w", err)
			}
			m := matrix.Aggregate(header, classes, results)
			if err := writeMatrix(cmd, m, out, md, jsonOut); err != nil {
				return err
			}
			interrupted := runErr != nil && cmd.Context().Err() != nil
			if runErr != nil && !interrupted {
				return runErr
			}
			if interrupted {
				fmt.Fprintf(cmd.ErrOrStderr(), "matrix interrupted after %d of %d runs (the pages show those)\n", len(results), len(jobs))
			}
			return matrixOutcome(cmd, m, base, interrupted)
		},
	}
	f := c.Flags()
	f.StringSliceVar(&o.Impls, "impls", nil, "impls to measure, comma-separated (default all): "+strings.Join(impls.Names(), ", "))
	f.StringSliceVar(&o.ExternalClients, "client", nil, "external lock clients to measure in rows of their own, comma-separated: names of manifests in clients/ (see docs/clients.md); with it, --impls defaults to none")
	f.StringSliceVar(&faults, "faults", nil, "fault classes (default all; none is always run): "+run.Join(matrix.Classes)+", or the name of any fault, run alone")
	f.IntVar(&o.Seeds, "seeds", o.Seeds, "seeds per run")
	f.IntVar(&parallel, "parallel", 3, "runs at once; the latency and throughput runs still run alone (3 made a 34-job matrix 1.7 times as fast as 1 on 2 cores, with the same cells: docs/matrix-howto.md)")
	f.StringVar(&shard, "shard", "", "make only shard I of N of the jobs (I/N, e.g. 2/4); locktest merge joins the shards' stores")
	f.StringVar(&baseline, "baseline", "", "a stored matrix.json to compare with: exit 1 when a cell got worse")
	f.StringVar(&jsonOut, "json", "", "also write matrix.json here (it is always in --out)")
	f.DurationVar(&o.Duration, "time", o.Duration, "workload time of each run")
	f.DurationVar(&o.TTL, "ttl", o.TTL, "lock lease time of every run")
	f.IntVar(&o.Clients, "clients", o.Clients, "clients of the fault runs")
	f.StringVar(&o.Base.StoreDir, "store", o.Base.StoreDir, "folder of stored runs")
	f.StringVar(&o.Base.Provider, "provider", o.Base.Provider, "where the nodes of every run and probe run: "+strings.Join(run.Providers, " or ")+" (see docs/providers.md)")
	f.StringVar(&out, "out", "", "folder of matrix.html and matrix.md (default: the store)")
	f.StringVar(&md, "md", "", "also write the Markdown matrix to this file (e.g. docs/matrix.md)")
	f.StringVar(&from, "from", "", "run nothing: aggregate the matrix runs already stored in this folder again and write the pages; or take a matrix.json as it is (to compare with --baseline)")
	c.Flags().BoolVarP(&q, "quiet", "q", false, "no progress lines on stderr (by default one line per finished run)")
	return c
}

// mergeMatrix aggregates the runs of several matrix stores, made by the
// shards of one matrix, into one matrix written into out, md and jsonOut,
// and compares it with baseline when given.
func mergeMatrix(cmd *cobra.Command, stores []string, out, md, jsonOut, baseline string) error {
	base, err := matrix.ReadBaseline(baseline)
	if err != nil {
		return usageError{err}
	}
	m, err := matrix.MergeStores(stores, "locktest "+strings.Join(os.Args[1:], " "))
	if err != nil {
		return usageError{err}
	}
	if err := writeMatrix(cmd, m, out, md, jsonOut); err != nil {
		return err
	}
	return matrixOutcome(cmd, m, base, false)
}

// matrixOutcome prints how m compares with base, when given, and returns
// the error the matrix exits with: a verdictError when a cell got worse
// than base, an inconclusiveError when a cell is inconclusive, one base
// showed to hold could not be shown, or the matrix was interrupted.
func matrixOutcome(cmd *cobra.Command, m reports.Matrix, base *reports.Matrix, interrupted bool) error {
	w := cmd.OutOrStdout()
	if base != nil {
		c := matrix.Compare(*base, m)
		fmt.Fprintf(w, "baseline: %d cells compared, %d worse, %d no longer shown\n", c.Compared, len(c.Worse), len(c.Lost))
		for _, ch := range c.Worse {
			fmt.Fprintf(w, "  worse: %s %s: %s (was %s): %s\n", ch.Impl, ch.Column, ch.After, ch.Before, ch.Why)
		}
		for _, ch := range c.Lost {
			fmt.Fprintf(w, "  no longer shown: %s %s: %s (was %s)\n", ch.Impl, ch.Column, ch.After, ch.Before)
		}
		if len(c.Survival) > 0 {
			fmt.Fprintf(w, "baseline: time to failure compared in %d cells (log-rank test, worse below p = %.2g)\n", len(c.Survival), matrix.SurvivalP)
			for _, ch := range c.Survival {
				fmt.Fprintf(w, "  %s %s: %s\n", ch.Impl, ch.Column, ch.Why)
			}
		}
		if len(c.Worse) > 0 {
			return verdictError{fmt.Errorf("%d cells worse than the baseline, e.g. %s %s: %s", len(c.Worse), c.Worse[0].Impl, c.Worse[0].Column, c.Worse[0].Why)}
		}
		if len(c.Lost) > 0 {
			return inconclusiveError{fmt.Errorf("%d cells the baseline showed to hold could not be shown, e.g. %s %s: %s", len(c.Lost), c.Lost[0].Impl, c.Lost[0].Column, c.Lost[0].After)}
		}
	}
	if interrupted {
		return inconclusiveError{errors.New("the matrix was interrupted: its pages show the runs made so far")}
	}
	var inc []string
	for _, r := range m.Rows {
		for k, c := range r.Cells {
			if c.Status == reports.StatusInconclusive {
				inc = append(inc, r.Impl+" "+k)
			}
		}
	}
	if len(inc) > 0 {
		slices.Sort(inc)
		return inconclusiveError{fmt.Errorf("%d cells inconclusive (%s): see the reasons in the matrix", len(inc), strings.Join(inc, ", "))}
	}
	return nil
}

// writeMatrix writes m's pages into the folder out and, when md is set,
// its Markdown into the file md, and prints where they are.
func writeMatrix(cmd *cobra.Command, m reports.Matrix, out, md, jsonOut string) error {
	if err := matrix.Write(m, out, md, jsonOut); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "matrix: %s, %s\n", filepath.Join(out, reports.MatrixHTMLFile), filepath.Join(out, reports.MatrixMDFile))
	return nil
}

// summary says in a few words what one matrix run showed.
func summary(r matrix.Result) string {
	switch {
	case r.Reentrancy != nil:
		return "reentrant " + r.Reentrancy.Status + ": " + r.Reentrancy.Reason
	case r.Err != "":
		return "did not run: " + r.Err
	case r.Job.Probe == matrix.ProbeDeadlock:
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
	case r.Safety.Violated:
		return "violation (" + reports.KindsText(r.Safety.Kinds) + ")"
	case !r.Safety.Conclusive:
		return "inconclusive: " + r.Safety.Reason
	}
	return fmt.Sprintf("no violation, %d faults, %d acquires", r.Safety.Faults, r.Acquired)
}
