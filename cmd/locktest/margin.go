package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locktest/locktest/margin"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

func newMarginCmd() *cobra.Command {
	rf := &runFlags{cfg: run.DefaultConfig()}
	mf := &margin.Settings{}
	var jsonOut string
	c := &cobra.Command{
		Use:   "margin",
		Short: "Find how large a fault (or how short a lease) breaks a lock: the boundary as an interval, beside the lock's stated bound",
		Long: `margin searches for the boundary of one fault magnitude or lock setting,
--vary NAME=FROM..TO: a pause, a node's time down, a partition's window, a
clock jump, a delay, the TTL, or how many nodes a fault hits (targets). Every
run injects one pinned fault --at its offset (no random choice), so that the
value varied is the only thing that changes. It runs --trials trials at
--grid evenly spaced values of the range, then bisects between the last value
at which no trial failed and the first at which one did, until the bracket is
--resolution wide. A trial fails when its run finds a safety violation (any
checker but liveness); a run whose fault did not go in, or that tested
nothing, is run again and not counted.

It prints the boundary as an interval ("breaks at pause ≥ 944ms (between
938ms, 0 of 5 failed, and 950ms, 2 of 5 failed)") and, beside it, the bound
the lock itself states: the TTL less the time from the acquire to the pause
for a lease, Redlock's validity (TTL − elapsed − (TTL × 0.01 + 2ms)), the
ZooKeeper session timeout, the etcd lease TTL, the TTL for a restart without
persistence. Every trial's run is kept in STORE/<name>.margin/<time>/,
with margin.json and margin.html (the violation rate against the value, with
95% Wilson intervals, the bracket and the stated bound, on one chart).

The search is judged against a gate: --gate VALUE, or else the lock's
stated bound. The gate fails when a trial broke the lock on the safe side
of it (below it; above it for a TTL, a restart delay or a clock rate) by
more than the resolution, which stands for how far a real fault may land
from the value planned. Progress goes to stderr; the result (the boundary,
the stated bound, the gate and the report) to stdout, and --json writes
margin.json to a file as well.

Exit codes: 0 when the search ended and its gate held (or it has none); 1
when the gate failed; 3 when --budget ran out or it was interrupted; 2 for
bad input and a run that could not start.`,
		Example: `  locktest margin --impl redis-set-nx-px --faults pause-client --vary pause=0s..3s --ttl 1s
  locktest margin --impl redlock --faults clock-bump --vary clock-bump=0s..5s --target clock-bump=n1
  locktest margin --impl redlock --faults kill-node --persistence off --vary down=0s..3s
  locktest margin --impl redis-set-nx-px --faults pause-client --pause 1s --vary ttl=200ms..3s`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyPlan(cmd.Flags(), rf.plan, "margin"); err != nil {
				return usageError{err}
			}
			m, err := prepareMargin(cmd.Flags(), rf, *mf)
			if err != nil {
				return err
			}
			if err := run.CheckOutputs(run.Output{Flag: "--json", Path: jsonOut}); err != nil {
				return usageError{err}
			}
			if err := m.MakeDir(); err != nil {
				return usageError{err}
			}
			return marginRun(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), m, *mf, rf.quiet, jsonOut)
		},
	}
	defineMarginFlags(c, rf, mf, &jsonOut)
	return c
}

// defineMarginFlags declares the flags of `locktest margin`: a run's own
// and the search's.
func defineMarginFlags(c *cobra.Command, rf *runFlags, mf *margin.Settings, jsonOut *string) {
	rf.define(c)
	jsonFlag(c, jsonOut, "margin.json", "the search's folder")
	// margin's progress is a line per value tried, not a run's log.
	c.Flags().Lookup("quiet").Usage = "no progress on stderr (by default one line per value tried), only the result"
	f := c.Flags()
	f.StringVar(&mf.Vary, "vary", "", "the one parameter to vary, NAME=FROM..TO: "+strings.Join(slices.Sorted(maps.Keys(margin.Varied)), ", "))
	f.IntVar(&mf.Trials, "trials", 5, "counted trials at each value")
	f.IntVar(&mf.Grid, "grid", 5, "evenly spaced values of the range the coarse pass runs (both ends included)")
	f.DurationVar(&mf.Resolution, "resolution", 50*time.Millisecond, "the bisection stops at a bracket this narrow (for targets: neighbouring counts)")
	f.DurationVar(&mf.At, "at", time.Second, "when the fault goes in, from the start of the workload")
	f.DurationVar(&mf.Budget, "budget", time.Hour, "wall time after which no more runs start (0: none)")
	f.StringVar(&mf.Gate, "gate", "", "the value, in --vary's unit, the lock must hold at: exit 1 when it breaks on the safe side of it by more than the resolution (default: the lock's stated bound)")
	for _, n := range []string{"vary", "trials", "grid", "resolution", "at", "budget", "gate"} {
		_ = f.SetAnnotation(n, groupAnnotation, []string{"Margin"})
	}
	// The spelling --fault NAME is --faults NAME.
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "fault" {
			return "faults"
		}
		return pflag.NormalizedName(name)
	})
}

// prepareMargin checks the flags of a margin search and returns it, with
// no folder made yet: the run's own settings as `locktest run` checks them
// (run.Config.Prepared), then the search's.
func prepareMargin(f changer, rf *runFlags, mf margin.Settings) (*margin.Study, error) {
	if _, err := mf.Param(); err != nil {
		return nil, usageError{err} // the search's own flags first
	}
	cfg, err := rf.config(f)
	if err != nil {
		return nil, err
	}
	m, err := margin.Prepare(cfg, mf, f.Changed)
	if err != nil {
		return nil, usageError{err}
	}
	return m, nil
}

// marginRun runs the search m, prints its progress to errOut (unless
// quiet) and its result to out, and returns a verdictError when its gate
// failed.
func marginRun(ctx context.Context, out, errOut io.Writer, m *margin.Study, mf margin.Settings, quiet bool, jsonOut string) error {
	// The header comes with the first run that started: a search whose
	// first run cannot start prints nothing but its error.
	p := m.Param()
	resolution := p.Format(m.Resolution())
	if p.Kind == margin.Count {
		resolution = "neighbouring counts"
	}
	started := time.Now()
	header := func() {
		if quiet {
			return
		}
		fmt.Fprintf(errOut, "margin of %s under %s, varying %s from %s to %s: %d trials at %d values, then bisection to %s\n", m.Lock(), m.Fault(),
			p.Name, p.Format(p.From), p.Format(p.To), mf.Trials, mf.Grid, resolution)
		fmt.Fprintf(errOut, "  runs in %s\n", m.Dir())
	}
	var progress func(margin.Point)
	if !quiet {
		progress = func(pt margin.Point) {
			how := "grid"
			if pt.Bisect {
				how = "bisect"
			}
			fmt.Fprintf(errOut, "  %-6s %s %-8s %d of %d failed  (95%% CI %s–%s)  [%s]\n", how, p.Name, pt.Label, pt.Failures, pt.Counted(),
				reports.Percent(pt.Low), reports.Percent(pt.High), time.Since(started).Round(time.Second))
		}
	}
	doc, err := m.Run(ctx, header, progress)
	var ns margin.NotStarted
	switch {
	case errors.As(err, &ns):
		return usageError{ns.Err}
	case doc.Interrupted && errors.Is(err, ctx.Err()):
		return inconclusiveError{fmt.Errorf("margin interrupted after %d runs; %s holds what it decided", doc.Runs, m.Dir())}
	case err != nil && !errors.Is(err, margin.ErrBudget):
		return err
	}
	if n := len(doc.OffPlan); n > 0 {
		fmt.Fprintf(errOut, "warning: %d of %d runs applied a %s more than %s off the value planned, which the search counts at the value planned (a loaded machine stretches faults; search again on a quiet one): %s\n",
			n, doc.Runs, p.Name, doc.Resolution, strings.Join(doc.OffPlan[:min(n, 3)], "; "))
	}
	fmt.Fprintf(out, "%s\n", doc.Summary)
	if doc.Bound != nil {
		fmt.Fprintf(out, "stated bound: %s (%s)\n", doc.Bound.Label, doc.Bound.Rule)
	}
	if g := doc.Gate; g != nil {
		word := "held"
		if g.Failed {
			word = "FAILED: " + g.Why
		}
		fmt.Fprintf(out, "gate: %s %s (within %s): %s\n", g.Source, g.Label, g.Tolerance, word)
	}
	fmt.Fprintf(out, "report: %s\n", filepath.Join(m.Dir(), reports.MarginHTMLFile))
	if jsonOut != "" {
		if err := runstore.WriteJSON(jsonOut, doc); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	switch {
	case doc.Gate != nil && doc.Gate.Failed:
		return verdictError{fmt.Errorf("margin gate failed: %s", doc.Gate.Why)}
	case doc.BudgetSpent:
		return inconclusiveError{fmt.Errorf("the budget ran out after %d runs, before the bracket was %s wide", doc.Runs, doc.Resolution)}
	}
	return nil
}
