package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

func newCheckCmd() *cobra.Command {
	var profile string
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
			if profile != "" {
				stop, err := run.Profile(profile, "check")
				if err != nil {
					return usageError{fmt.Errorf("--profile: %v", err)}
				}
				defer stop()
			}
			start := time.Now()
			if done, err := checkStream(cmd, a[0], start, stream); done {
				return err
			}
			dir, h, info, err := loadRun(a[0])
			var cut *history.LineError
			switch {
			case errors.As(err, &cut) && errors.Is(err, history.ErrTruncated):
				// (A second check finds the problem in results.json already.)
				if p := fmt.Sprintf("history: line %d was cut short (%v); the %d ops before it were checked",
					cut.Line, history.ErrTruncated, h.Len()); !slices.Contains(info.Errors, p) {
					info.Errors = append(info.Errors, p)
				}
			case err != nil:
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "read %d ops in %s\n", h.Len(), time.Since(start).Round(time.Millisecond))
			checked := time.Now()
			d := checker.Decide(cmd.Context(), h, run.FactsOf(info), reports.MaxVisualizedOps)
			return storeCheck(cmd, dir, info, d, h, checked, "the checkers side by side", "report")
		},
	}
	c.Flags().StringVar(&profile, "profile", "", "folder for a CPU profile (check.cpu.pprof) and the heap (check.heap.pprof) of this check")
	c.Flags().BoolVar(&stream, "stream", false, "check the history as a stream, whatever its size (one of 256 MB or more is, when its locks are leases): less memory, no porcupine picture, and a report of its first ops")
	return c
}

func newReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Re-render a stored run's report.html from its history and results.json",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			var h *history.Table
			dir, path := runPaths(a[0])
			var err error
			if st, serr := os.Stat(path); serr == nil && st.Size() >= run.StreamFrom {
				// A history this large is drawn from its first ops, as
				// its check drew it when it streamed it.
				h, err = history.ReadTableHead(cmd.Context(), path, run.ReportOps)
			} else {
				dir, h, _, err = loadRun(a[0])
			}
			if err != nil && !errors.Is(err, history.ErrTruncated) {
				return err
			}
			res, err := runstore.ReadResults(dir)
			if err != nil {
				return fmt.Errorf("%v (run `locktest check %s` first)", err, dir)
			}
			if err := reports.WriteHTML(dir, res, h); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(dir, runstore.ReportFile))
			return nil
		},
	}
}

// loadRun reads the history of a stored run and the run's description from
// its results.json, if there is one. When results.json says the run did not
// finish (runstore.Head.Unfinished), the description's errors name
// runstore.UnfinishedChecked, so the run's verdict is at best unknown. A history whose last line was cut short
// is returned (without that line) with its error, which wraps
// history.ErrTruncated in a *history.LineError; any other bad history is
// an error alone.
func loadRun(arg string) (dir string, h *history.Table, info runstore.RunInfo, err error) {
	dir, path := runPaths(arg)
	if err := run.FitMemory(path); err != nil {
		return "", nil, info, err
	}
	h, herr := history.ReadTable(path)
	if herr != nil && !errors.Is(herr, history.ErrTruncated) {
		return "", nil, info, herr
	}
	info, err = loadInfo(dir)
	if err != nil {
		return "", nil, info, err
	}
	return dir, h, info, herr
}

// runPaths returns the run folder and the history file that arg, either
// of them, names.
func runPaths(arg string) (dir, path string) {
	dir, path = arg, filepath.Join(arg, runstore.HistoryFile)
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		dir, path = filepath.Dir(arg), arg
	}
	return dir, path
}

// loadInfo reads the run's description from dir's results.json, as
// loadRun says.
func loadInfo(dir string) (info runstore.RunInfo, err error) {
	prev, rerr := runstore.ReadHead(dir)
	switch {
	case rerr == nil:
		info = prev.Run
		// A run whose driver stopped before checking (killed, crashed, cut
		// off by a job's timeout) left a prefix of its history: never
		// valid, whatever the prefix shows. The problem stays among the
		// run's errors, so that a second check finds it too.
		if prev.Unfinished() && !slices.Contains(info.Errors, runstore.UnfinishedChecked) {
			info.Errors = append(info.Errors, runstore.UnfinishedChecked)
		}
	case errors.Is(rerr, os.ErrNotExist):
		info = runstore.RunInfo{Name: filepath.Base(dir), Expect: "valid"} // resource mode unknown: check everything
	default:
		return info, rerr
	}
	return info, nil
}

// checkStream checks the run arg names as a stream when its history is
// large enough (run.StreamFile), and then reports done: it reads the
// history for its facts, checks it (checker.DecideFile), and rewrites
// results.json and the report, which draws the history's first
// run.ReportOps ops. Otherwise it does nothing, and the history is held
// whole.
func checkStream(cmd *cobra.Command, arg string, start time.Time, force bool) (done bool, err error) {
	dir, path := runPaths(arg)
	stream, ff, err := run.StreamFile(cmd.Context(), path, force)
	switch {
	case force && err == nil && !stream:
		return true, usageError{fmt.Errorf("--stream: %s cannot be checked as a stream: %v", path, ff.Streamable())}
	case !stream || err != nil:
		return false, nil
	}
	info, err := loadInfo(dir)
	if err != nil {
		return true, err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "read the facts of %d ops in %s; checking them as a stream\n", ff.Ops, time.Since(start).Round(time.Millisecond))
	checked := time.Now()
	d, h, err := run.DecideStream(cmd.Context(), path, run.FactsOf(info), ff, nil)
	if err != nil {
		return true, err
	}
	return true, storeCheck(cmd, dir, info, d, h, checked, "the checkers on one stream", fmt.Sprintf("report of the first %d ops", h.Len()))
}

// storeCheck writes the results of the check of the run in dir, made as
// info and decided as d (from checked on, how), and its report, drawn
// from h (what), says so and prints the verdicts; its error is the
// verdict's exit.
func storeCheck(cmd *cobra.Command, dir string, info runstore.RunInfo, d checker.Decision, h *history.Table, checked time.Time, how, what string) error {
	res := runstore.New(info, d)
	if err := runstore.WriteResults(dir, res); err != nil {
		return err
	}
	rendered := time.Now()
	if err := reports.WriteHTMLVisual(dir, res, h, d.Visual); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "checked in %s (%s), %s written in %s\n",
		rendered.Sub(checked).Round(time.Millisecond), how, what, time.Since(rendered).Round(time.Millisecond))
	printResults(cmd.OutOrStdout(), dir, res, true)
	return outcomeError(res)
}
