package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
)

func newCheckCmd() *cobra.Command {
	var profile, jsonOut string
	var stream bool
	c := &cobra.Command{
		Use:   "check DIR",
		Short: "Re-check a stored run's history and rewrite its results.json and report.html",
		Long: `check reads DIR/history.jsonl (DIR may also be the history file itself), runs
every checker on it — the porcupine mutex model too when the locks are not
leases (no acquire carries a valid_until) — prints how long reading took and
each verdict with how long its checker took, and rewrites results.json and
report.html beside the history.

A malformed history (bad JSON, a value of the wrong type, an unknown field or
op type, an index out of place, a negative time, a process's ops out of time
order, a double invoke, a completion without its invoke) is refused with its
line number and reason (exit 2), and nothing is rewritten. A last line cut
short (no newline: the machine crashed or the disk filled while it was
written) is not: the ops before it are checked, and the cut line is a run
problem, so the verdict is at best unknown.

A run whose results.json says it did not finish (its driver was killed, or
crashed, before it checked) is never valid, whatever its history's prefix
shows: invalid (exit 1) when the prefix holds a violation, else unknown
(exit 3), as for a run stopped by Ctrl-C or SIGTERM.

A history of 256 MB or more whose locks are leases and that has no lost-lock
notices (or any such history, with --stream) is checked as a stream: it is
read once or twice for its facts and once more into the checkers, which keep
only what is still open, so the check takes tens of MB however long the run
was; its report draws the first 200,000 ops and says so. Any other history is
held whole, and refused (exit 2) when this machine has too little memory for
it.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := run.CheckOutputs(run.Output{Flag: "--json", Path: jsonOut}); err != nil {
				return usageError{err}
			}
			if profile != "" {
				stop, err := run.Profile(profile, "check")
				if err != nil {
					return usageError{fmt.Errorf("--profile: %v", err)}
				}
				defer stop()
			}
			dir, res, err := run.Recheck(cmd.Context(), a[0], stream, cmd.OutOrStdout())
			var ns run.NotStreamable
			switch {
			case errors.As(err, &ns):
				return usageError{fmt.Errorf("--stream: %v", ns)}
			case err != nil:
				return err
			}
			reports.WriteRunText(cmd.OutOrStdout(), dir, res, true)
			if err := writeResultsJSON(jsonOut, res); err != nil {
				return err
			}
			return outcomeError(res)
		},
	}
	c.Flags().StringVar(&profile, "profile", "", "folder for a CPU profile (check.cpu.pprof) and the heap (check.heap.pprof) of this check")
	c.Flags().StringVar(&jsonOut, "json", "", "also write the rewritten results.json here (it is always beside the history)")
	c.Flags().BoolVar(&stream, "stream", false, "check the history as a stream, whatever its size (one of 256 MB or more is, when its locks are leases): less memory, no porcupine picture, and a report of its first ops")
	return c
}

func newReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Re-render a stored run's report.html from its history and results.json",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			report, err := run.Redraw(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", report)
			return nil
		},
	}
}
