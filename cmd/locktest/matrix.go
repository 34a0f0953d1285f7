package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/workloads"
)

func newMatrixCmd() *cobra.Command {
	o := matrix.DefaultOptions()
	var faults []string
	var out, md, from, shard, baseline, jsonOut, inventory, junit, planFile string
	var parallel int
	var resource run.Config // --resource, read into o.Resource
	var q, seeded bool
	c := &cobra.Command{
		Use:   "matrix",
		Short: "Run every impl against each fault class and write the backend matrix (matrix.html, matrix.md)",
		Long: `matrix runs each impl against the fault classes none, client-pause, node-pause,
kill-restart, partition, clock and client-clock (resource mode none, so
violations show), the client-pause class again with a fenced resource store
for each impl with fencing tokens (the "saved by fencing" column; --resource
none leaves it out),
plus a holder-kill run for deadlock freedom and fault-free runs with 1 and 8
clients for latency and throughput, and writes one row per impl to
matrix.html, matrix.md and matrix.json (every cell with its counts and 95%
interval). A property a run could not show is n/a or inconclusive with its
reason, never safe. See docs/matrix.md.

Each cell runs up to --seeds seeds, one after the other, and stops once its
seeds decide it (a violation rate shown above 15%, faults that do not apply,
a stuck lock); a cell that held runs them all. Without --parallel, the runs
at once are measured as they go (docs/matrix-howto.md).

Violations are what a matrix finds, not an unexpected verdict: to gate a
build on them, compare with a stored matrix.json (--baseline). --shard splits
the jobs over machines and ` + "`locktest merge`" + ` joins their stores.

Exit codes: 0 the matrix was made; 1 with --baseline, a cell got worse (a
violation or a stuck lock where the baseline had none, or a violation rate
wholly above the baseline's interval); 3 a cell was inconclusive, or with
--baseline a cell the baseline showed to hold could not be shown now, or the
matrix was interrupted; 2 bad usage or a set-up failure.`,
		Example: `  locktest matrix --store /tmp/matrix-store --md docs/matrix.md
  locktest matrix --impl redis-set-nx-px,etcd-mutex --faults none,client-pause --seeds 2 --time 8s
  locktest matrix --from /tmp/matrix-store --md docs/matrix.md
  locktest matrix --seeds 5 --baseline docs/matrix.json
  locktest matrix --from today/matrix.json --baseline docs/matrix.json
  locktest matrix --seeds 5 --shard 1/3 --store m1   # then: locktest merge m1 m2 m3 --out matrix
  locktest matrix --impl redis-set-nx-px --provider ssh --inventory lab/lab.yaml`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyPlan(cmd.Flags(), planFile, "matrix"); err != nil {
				return usageError{err}
			}
			base, err := matrix.ReadBaseline(baseline)
			if err != nil {
				return usageError{err}
			}
			given := cmd.Flags().Changed("parallel")
			if given && parallel < 1 {
				return usageError{fmt.Errorf("--parallel must be at least 1, got %d", parallel)}
			}
			if !given {
				parallel = 2 // the measured pace, unless the provider's hosts take one run at a time
			}
			if parallel, err = run.Parallel(o.Base.Provider, parallel, given); err != nil {
				return usageError{err}
			}
			pace := matrix.Fixed(parallel)
			if !given && parallel > 1 {
				pace = matrix.Measured(0, nil, nil)
			}
			if from != "" && inventory != "" {
				return usageError{errors.New("--inventory: --from runs nothing")}
			}
			for _, n := range deploymentFlags {
				if from != "" && cmd.Flags().Changed(n) {
					return usageError{fmt.Errorf("--%s: --from runs nothing", n)}
				}
			}
			if from == "" {
				// The provider's settings, checked once: a bad inventory
				// would fail every job.
				if err := o.Base.UseProvider(o.Base.Provider, inventory); err != nil {
					return usageError{err}
				}
				if err := o.Base.CheckProvider(); err != nil {
					return usageError{err}
				}
			}
			shardI, shardN, err := parseShard(shard)
			if err != nil {
				return usageError{fmt.Errorf("--shard: %v", err)}
			}
			if err := run.CheckOutputs(run.Output{Flag: "--json", Path: jsonOut}, run.Output{Flag: "--junit", Path: junit}); err != nil {
				return usageError{err}
			}
			if from != "" {
				// Take a matrix.json as it is, or aggregate the runs
				// stored in from again, and write the pages where asked
				// (the runs' pages by default into from).
				m, file, err := matrix.From(from, commandLine())
				if err != nil {
					return usageError{err}
				}
				write := !file || out != "" || md != "" || jsonOut != ""
				if file && out == "" {
					out = filepath.Dir(jsonOut)
				}
				if write {
					if err := writeMatrix(cmd, m, cmp.Or(out, from), md, jsonOut); err != nil {
						return err
					}
				}
				return matrixOutcome(cmd, m, base, false, junit)
			}
			classes, err := matrix.ParseClasses(faults)
			if err != nil {
				return usageError{fmt.Errorf("--faults: %v", err)}
			}
			o.Classes = classes
			if seeded {
				o.AddSeeded()
			}
			o.Resource = resource.Mode
			if err := checkMatrixResource(o, cmd.Flags().Changed("resource")); err != nil {
				return usageError{err}
			}
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
			if err := run.CheckOutputs(run.Output{Flag: "--store", Path: o.Base.StoreDir, Dir: true}, run.Output{Flag: "--out", Path: out, Dir: true},
				run.Output{Flag: "--md", Path: md}); err != nil {
				return usageError{err}
			}
			// A full disk would stop the matrix part way, many minutes in.
			if err := matrix.CheckDisk(o.Base.StoreDir, len(jobs), nil); err != nil {
				return err // exit 2
			}
			matrix.SayLeftOut(cmd.ErrOrStderr(), o) // once the flags are good: a bad one gets one line
			if err := matrix.CheckMachine(o.TTL, run.MachineStall); err != nil {
				if !given {
					return err // exit 2: the machine cannot run this matrix now
				}
				// --parallel N: the user chose; say what the timings are worth.
				fmt.Fprintf(cmd.ErrOrStderr(), "%v (going on: --parallel %d was given)\n", err, parallel)
			}
			progress := io.Discard
			if !q {
				progress = cmd.ErrOrStderr()
			}
			made, err := matrix.Run(cmd.Context(), o, jobs, pace, shard, commandLine(), matrix.Progress(progress, o, jobs, pace))
			if err != nil {
				return err
			}
			m := made.Matrix
			if err := writeMatrix(cmd, m, out, md, jsonOut); err != nil {
				return err
			}
			// The runs left the store's index alone (run.Config.NoIndex):
			// it is written once, with the matrix's pages in place.
			if err := reports.WriteIndex(o.Base.StoreDir); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "matrix: the store's index.html is not rewritten: %v\n", err)
			}
			interrupted := made.Err != nil && cmd.Context().Err() != nil
			if made.Err != nil && !interrupted {
				return made.Err
			}
			if interrupted {
				fmt.Fprintf(cmd.ErrOrStderr(), "matrix interrupted after %d of %d runs (the pages show those)\n", made.Ran, len(jobs))
			}
			return matrixOutcome(cmd, m, base, interrupted, junit)
		},
	}
	f := c.Flags()
	f.StringSliceVar(&o.Impls, "impl", nil, "impls to measure, comma-separated or repeated (default all): "+strings.Join(impls.Names(), ", "))
	f.StringSliceVar(&o.Impls, "impls", nil, "the old name of --impl")
	_ = f.MarkDeprecated("impls", "use --impl, as run and margin do")
	f.BoolVar(&seeded, "seeded", false, "also measure the zoo: every seeded impl (a correct recipe with one bug planted, locktest list --seeded) and the recipes they vary, and say which columns caught each bug (docs/seeded-bugs.md)")
	f.StringSliceVar(&o.ExternalClients, "client", nil, "external lock clients to measure in rows of their own, comma-separated: names of manifests in clients/ (see docs/clients.md); with it, --impl defaults to none")
	f.StringSliceVar(&faults, "faults", nil, "fault classes (default all; none is always run): "+run.Join(matrix.Classes)+", or the name of any fault, run alone")
	f.IntVar(&o.Seeds, "seeds", o.Seeds, "seeds per cell, at most: the runs of each impl under each fault class, each with its own seed; a cell stops once its seeds decide it")
	f.IntVar(&parallel, "parallel", 0, "runs at once (default: measured, from the CPU the runs use and the machine's idle CPU, fewer as soon as a run sees the machine stall: docs/matrix-howto.md); the latency and throughput runs still run alone")
	f.StringVar(&shard, "shard", "", "make only shard I of N of the jobs (I/N, e.g. 2/4); locktest merge joins the shards' stores")
	f.StringVar(&baseline, "baseline", "", "a stored matrix.json to compare with: exit 1 when a cell got worse")
	f.StringVar(&jsonOut, "json", "", "also write matrix.json here (it is always in --out)")
	f.StringVar(&junit, "junit", "", "also write JUnit XML here, one test case per cell: failed when it got worse than --baseline, skipped when inconclusive")
	f.DurationVar(&o.Duration, "time", o.Duration, "workload time of each run")
	f.DurationVar(&o.TTL, "ttl", o.TTL, "lock lease time of every run")
	f.IntVar(&o.Clients, "clients", o.Clients, "clients of the fault runs")
	f.StringVar(&o.Base.StoreDir, "store", o.Base.StoreDir, "folder of stored runs")
	f.StringVar(&o.Base.Provider, "provider", o.Base.Provider, "where the nodes of every run and probe run: "+strings.Join(run.Providers, " or ")+" (see docs/providers.md)")
	planFlag(c, &planFile)
	f.StringVar(&o.Base.Persistence, "persistence", "", "node durability of the backends that have it (the others ignore it), as in a deployment: "+strings.Join(run.Persistences, ", ")+" (default off)")
	resource.Mode = o.Resource
	for _, n := range deploymentFlags {
		s, _ := run.SettingNamed(n)
		v, help := s.Field(&o.Base), s.Help()
		if n == "resource" {
			v, help = s.Field(&resource), "the resource store of the saved-by-fencing column: "+run.Join(matrix.ResourceModes)+
				" (fenced: the client-pause runs again with a fenced store for every impl whose leases carry a fencing token; none: no such column). The mutex columns always run with none, so that violations show"
		} else {
			help += "; in a matrix, every run whose backend or impl reads it gets it, and one that no run reads is refused"
		}
		f.Var(v, n, help)
	}
	f.StringVar(&inventory, "inventory", "", "the ssh provider's inventory file (locktest lab up writes one), with --provider ssh")
	f.StringVar(&out, "out", "", "folder of matrix.html and matrix.md (default: the store)")
	f.StringVar(&md, "md", "", "also write the Markdown matrix to this file (e.g. docs/matrix.md)")
	f.StringVar(&from, "from", "", "run nothing: aggregate the matrix runs already stored in this folder again and write the pages; or take a matrix.json as it is (to compare with --baseline)")
	c.Flags().BoolVarP(&q, "quiet", "q", false, "no progress lines on stderr (by default one line per finished run)")
	return c
}

// mergeMatrix aggregates the runs of several matrix stores, made by the
// shards of one matrix, into one matrix written into out, md and jsonOut,
// and compares it with baseline when given; junit, when given, receives
// its cells as JUnit XML.
func mergeMatrix(cmd *cobra.Command, stores []string, out, md, jsonOut, baseline, junit string) error {
	base, err := matrix.ReadBaseline(baseline)
	if err != nil {
		return usageError{err}
	}
	m, err := matrix.MergeStores(stores, commandLine())
	if err != nil {
		return usageError{err}
	}
	if err := writeMatrix(cmd, m, out, md, jsonOut); err != nil {
		return err
	}
	return matrixOutcome(cmd, m, base, false, junit)
}

// matrixOutcome prints how m compares with base, when given, and returns
// the error the matrix exits with: a verdictError when a cell got worse
// than base, an inconclusiveError when a cell is inconclusive, one base
// showed to hold could not be shown, or the matrix was interrupted.
func matrixOutcome(cmd *cobra.Command, m reports.Matrix, base *reports.Matrix, interrupted bool, junit string) error {
	var c matrix.Comparison
	if base != nil {
		c = matrix.Compare(*base, m)
	}
	if junit != "" {
		worse := map[string]string{}
		for _, w := range c.Worse {
			worse[w.Impl+" "+w.Column] = w.Why
		}
		b, err := reports.RenderMatrixJUnit(m, worse)
		if err == nil {
			err = runstore.WriteFileAtomic(junit, b)
		}
		if err != nil {
			return fmt.Errorf("--junit: %w", err)
		}
	}
	if n := m.Header.Seeds; n > 0 {
		// What a held cell is worth at these seeds, so that nobody gates
		// on a smoke test.
		seeds := "seeds"
		if n == 1 {
			seeds = "seed"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "matrix: at %d %s a cell that held may still break in up to %s of runs (its 95%% interval)\n",
			n, seeds, reports.Percent(stats.Wilson(0, n).Hi))
	}
	if base != nil {
		c.WriteText(cmd.OutOrStdout())
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
	if inc := matrix.Inconclusive(m); len(inc) > 0 {
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

// deploymentFlags are the flags of `locktest matrix` that are run's (the
// same setting of run.Settings: meaning, type and syntax), which set up
// the matrix's runs as a deployment is: the store of the saved-by-fencing
// column, the docker provider's images, the cluster and impl params.
var deploymentFlags = []string{"resource", "image", "cluster-opt", "impl-opt"}

// checkMatrixResource refuses a --resource fenced given where it changes
// nothing: a matrix without the client-pause class, or whose impls all
// grant no fencing token (an external client's tokens are known once it
// is probed: its cell then says).
func checkMatrixResource(o matrix.Options, given bool) error {
	if !given || o.Resource != workloads.ModeFenced {
		return nil
	}
	if len(o.Classes) > 0 && !slices.Contains(o.Classes, matrix.ClassClientPause) {
		return errors.New("--resource fenced changes nothing in this matrix: its saved-by-fencing column reruns the client-pause class, and --faults leaves it out")
	}
	jobs, err := matrix.Plan(o)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(jobs, func(j matrix.Job) bool { return j.Class == matrix.ClassClientPauseFenced }) {
		return errors.New("--resource fenced changes nothing in this matrix: none of its impls grants fencing tokens (locktest list says which do)")
	}
	return nil
}
