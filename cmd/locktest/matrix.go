package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

func newMatrixCmd() *cobra.Command {
	o := matrix.DefaultOptions()
	var faults []string
	var out, md, from string
	var q bool
	c := &cobra.Command{
		Use:   "matrix",
		Short: "Run every impl against each fault class and write the backend matrix (matrix.html, matrix.md)",
		Long: `matrix runs each impl against the fault classes none, client-pause, node-pause,
kill-restart, partition and clock (resource mode none, so violations show),
plus a holder-kill run for deadlock freedom and fault-free runs with 1 and 8
clients for latency and throughput, and writes one row per impl to
matrix.html and matrix.md. A property a run could not show is n/a or
inconclusive with its reason, never safe. See docs/matrix.md.`,
		Example: `  locktest matrix --store /tmp/matrix-store --md docs/matrix.md
  locktest matrix --impls redis-set-nx-px,etcd-mutex --faults none,client-pause --seeds 2 --time 8s
  locktest matrix --from /tmp/matrix-store --md docs/matrix.md`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from != "" {
				return rebuildMatrix(cmd, from, out, md)
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
			header := reports.MatrixHeader{
				Date: start, Commit: runstore.Commit(cmd.Context()), Machine: runstore.Machine(), Seeds: o.Seeds,
				Duration: o.Duration, Store: absPath(o.Base.StoreDir), Command: "locktest " + strings.Join(os.Args[1:], " "),
				Settings: fmt.Sprintf("ttl %s, %d clients under faults (8 and 1 without), resource mode none, a fault every ~1s for 2s (node down 1s, client pause %s), 1s fault-free at the end",
					o.TTL, o.Clients, 4*o.TTL),
			}
			progress := io.Discard
			if !quiet(cmd.Flags(), q) {
				progress = cmd.ErrOrStderr()
			}
			names := map[string]bool{}
			for _, j := range jobs {
				names[j.Impl] = true
			}
			fmt.Fprintf(progress, "matrix: %d jobs (%d impls, %d seeds), store %s\n", len(jobs), len(names), o.Seeds, o.Base.StoreDir)
			results, runErr := matrix.Execute(cmd.Context(), jobs, func(i int, r matrix.Result) {
				fmt.Fprintf(progress, "[%*d/%d] %s: %s (%s)\n", len(fmt.Sprint(len(jobs))), i, len(jobs), r.Job.Label(), summary(r), r.Elapsed.Round(100*time.Millisecond))
			})
			header.Elapsed = time.Since(start).Round(time.Second)
			if err := reports.WriteMatrixHeader(o.Base.StoreDir, header); err != nil {
				return fmt.Errorf("write matrix header: %w", err)
			}
			if err := writeMatrix(cmd, matrix.Aggregate(header, classes, results), out, md); err != nil {
				return err
			}
			if runErr != nil {
				return fmt.Errorf("matrix interrupted after %d of %d runs (the pages show those): %w", len(results), len(jobs), runErr)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringSliceVar(&o.Impls, "impls", nil, "impls to measure, comma-separated (default all): "+strings.Join(impls.Names(), ", "))
	f.StringSliceVar(&o.ExternalClients, "client", nil, "external lock clients to measure in rows of their own, comma-separated: names of manifests in clients/ (see docs/clients.md); with it, --impls defaults to none")
	f.StringSliceVar(&faults, "faults", nil, "fault classes (default all; none is always run): "+run.Join(matrix.Classes)+", or the name of any fault, run alone")
	f.IntVar(&o.Seeds, "seeds", o.Seeds, "seeds per run")
	f.DurationVar(&o.Duration, "time", o.Duration, "workload time of each run")
	f.DurationVar(&o.TTL, "ttl", o.TTL, "lock lease time of every run")
	f.IntVar(&o.Clients, "clients", o.Clients, "clients of the fault runs")
	f.StringVar(&o.Base.StoreDir, "store", o.Base.StoreDir, "folder of stored runs")
	f.StringVar(&o.Base.Provider, "provider", o.Base.Provider, "where the nodes of every run and probe run: "+strings.Join(run.Providers, " or ")+" (see docs/providers.md)")
	f.StringVar(&out, "out", "", "folder of matrix.html and matrix.md (default: the store)")
	f.StringVar(&md, "md", "", "also write the Markdown matrix to this file (e.g. docs/matrix.md)")
	f.StringVar(&from, "from", "", "run nothing: aggregate the matrix runs already stored in this folder again and write the pages")
	quietFlag(c, &q, "no progress lines on stderr")
	return c
}

// rebuildMatrix aggregates the matrix runs stored in from again and
// writes the pages into out (default: from) and md.
func rebuildMatrix(cmd *cobra.Command, from, out, md string) error {
	results, classes, err := matrix.Load(from)
	if err != nil {
		return usageError{fmt.Errorf("--from: %v", err)}
	}
	if out == "" {
		out = from
	}
	again := "locktest " + strings.Join(os.Args[1:], " ")
	header, err := reports.ReadMatrixHeader(from)
	switch {
	case err == nil:
		// The header of the run that made the store, which knows its
		// commit, machine and command.
		header.Command = fmt.Sprintf("%s; aggregated again by %s", header.Command, again)
	case errors.Is(err, os.ErrNotExist):
		header = matrix.StoredHeader(results)
		header.Machine, header.Command = runstore.Machine(), again
		for _, r := range results {
			if r.Job.Probe == matrix.ProbeSafety && r.Job.Class != matrix.ClassNone && r.Dir != "" {
				header.Settings = fmt.Sprintf("ttl %s, %d clients under faults (8 and 1 without), resource mode none; aggregated again from the stored runs",
					r.Job.Config.TTL, r.Job.Config.Clients)
				break
			}
		}
	default:
		return err
	}
	header.Store = absPath(from)
	return writeMatrix(cmd, matrix.Aggregate(header, classes, results), out, md)
}

// writeMatrix writes m's pages into the folder out and, when md is set,
// its Markdown into the file md, and prints where they are.
func writeMatrix(cmd *cobra.Command, m reports.Matrix, out, md string) error {
	if err := reports.WriteMatrix(out, m); err != nil {
		return fmt.Errorf("write matrix: %w", err)
	}
	if md != "" {
		if err := reports.WriteMatrixMarkdown(md, m); err != nil {
			return fmt.Errorf("write %s: %w", md, err)
		}
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

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
