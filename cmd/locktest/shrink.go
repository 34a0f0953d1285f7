package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/shrink"
)

func newShrinkCmd() *cobra.Command {
	sf := &shrink.Settings{}
	var quiet bool
	var jsonOut string
	c := &cobra.Command{
		Use:   "shrink RUN",
		Short: "Search for the smallest run that fails as a stored failing run did: fewest faults, weakest, shortest, fewest clients",
		Long: `shrink starts from a stored run that failed (RUN is its folder, with its
results.json and schedule.json) and searches for a smaller run that still
fails the same way: the same checker finds an anomaly of the same kind. It
replays candidates against real servers, made by
  - ending the run soon after its first violation (--grace after it),
  - dropping faults (delta debugging over the schedule, after trying none),
  - moving the faults sooner,
  - fewer clients (1, 2, 3, half) and one lock,
  - weakening each fault that stays: fewer targets, a shorter pause or
    window, a smaller clock jump, less loss or delay, one halving at a time,
until a round of them changes nothing or --budget is spent. A candidate
counts as failing only when --need of --replays replays fail, since real
servers do not fail the same way every time (docs/shrinking.md says what
that means).

Every candidate's schedule and replays are kept in STORE/<name>.shrink/<time>/
with shrink.json, the search's log; schedule.json there is the smallest
schedule. After the search, the smallest schedule is replayed --confirm more
times, stored as STORE/<name>-shrunk/, each report marked with what it was
shrunk from and the story in one sentence. The last lines give the command
that replays it.

Progress (a line per candidate) goes to stderr; the result (the smallest
schedule, its confirmation, the story and the command that replays it) to
stdout, and --json writes shrink.json to a file as well.

Exit codes: 0 when the smallest schedule failed the same way in --need of
its --confirm replays (or --confirm is 0); 1 when the bug no longer
reproduces: no candidate failed the same way, and the stored run's own
schedule, replayed --confirm times, failed the same way in fewer than
--need (the gate of a fix); 3 when a smaller schedule did not confirm, or
the search was interrupted; 2 for a run that did not fail or has no
schedule.json, and for a set-up failure of a replay.`,
		Example: `  locktest shrink store/redis-gc-pause/latest
  locktest shrink store/redlock-clock-jump/latest --budget 20m --replays 5 --need 3`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := sf.Check(); err != nil {
				return usageError{err}
			}
			if err := run.CheckOutputs(run.Output{Flag: "--json", Path: jsonOut}); err != nil {
				return usageError{err}
			}
			return shrinkRun(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), a[0], *sf, quiet, jsonOut)
		},
	}
	f := c.Flags()
	f.IntVar(&sf.Replays, "replays", 3, "replays of each candidate, at most")
	f.IntVar(&sf.Need, "need", 2, "replays of a candidate that must fail the same way for it to count as failing")
	f.IntVar(&sf.Confirm, "confirm", 3, "replays of the smallest schedule after the search, counted whole (0: none)")
	f.DurationVar(&sf.Budget, "budget", 30*time.Minute, "wall time after which the search starts no more replays (0: none)")
	f.DurationVar(&sf.Grace, "grace", 0, "how long a run goes on after its first violation when the search ends it early (0: 1s + the run's ttl)")
	f.StringVar(&sf.Anomaly, "anomaly", "", "the anomaly to keep, KIND or CHECKER:KIND (default: the run's first proven one)")
	f.StringVar(&sf.Store, "store", "store", "folder of stored runs, where the search and its replays go")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr (by default one line per candidate), only the result")
	jsonFlag(c, &jsonOut, "shrink.json, the search's log,", "the search's folder")
	return c
}

// shrinkRun shrinks the failing run arg names, prints the search's
// progress to errOut (unless quiet) and what it and its confirmation found
// to out, and returns a verdictError when the run's own schedule no longer
// fails the same way.
func shrinkRun(ctx context.Context, out, errOut io.Writer, arg string, sf shrink.Settings, quiet bool, jsonOut string) error {
	sh, err := shrink.Prepare(arg, sf)
	if err != nil {
		return usageError{err}
	}
	defer writeShrinkPage(out, sh.Dir(), sf.Store) // shrink.html and the store's index, however the search ends
	from, tg := sh.Start(), sh.Target()
	fmt.Fprintf(errOut, "shrink %s: keeping %s, first proven at %s into the faults; %s\n", sh.From, tg, sh.First.Round(time.Millisecond), shrink.SizeOf(from))
	fmt.Fprintf(errOut, "  search in %s; a candidate fails when %d of %d replays do\n", sh.Dir(), sf.Need, sf.Replays)
	var progress func(shrink.Step)
	if !quiet {
		progress = func(st shrink.Step) { fmt.Fprintln(errOut, "  "+stepLine(st, sh.Elapsed())) }
	}
	logErr := func() {
		if sh.LogErr != nil {
			fmt.Fprintf(errOut, "  shrink.json: %v\n", sh.LogErr)
		}
	}
	if err := sh.Search(ctx, progress); err != nil {
		logErr()
		if sh.Log.Interrupted {
			return inconclusiveError{fmt.Errorf("shrink interrupted after %d replays; %s holds the search so far", sh.Smallest.Replays, sh.Dir())}
		}
		return err
	}
	result := sh.Smallest
	fmt.Fprintf(out, "smallest: %s (from %s), %d replays in %s%s\n", shrink.SizeOf(result.Smallest), shrink.SizeOf(from),
		result.Replays, sh.Elapsed().Round(time.Second), map[bool]string{true: "; the budget ran out"}[sh.Log.BudgetSpent])
	c, err := sh.Confirm(ctx)
	logErr()
	switch {
	case err != nil && ctx.Err() != nil:
		return inconclusiveError{fmt.Errorf("shrink interrupted while confirming; %s holds the search", sh.Dir())}
	case err != nil:
		return err
	}
	if sf.Confirm > 0 {
		fmt.Fprintf(out, "confirmed: failed the same way in %d of %d replays (%s)\n", c.Reproduced, sf.Confirm, filepath.Join(sf.Store, sh.ConfirmName()))
	}
	if c.Story != "" {
		fmt.Fprintf(out, "story: %s\n", c.Story)
	}
	fmt.Fprintf(out, "replay: locktest run --schedule %s\n", sh.SmallestFile)
	if len(c.Runs) > 0 {
		fmt.Fprintf(out, "report: %s\n", filepath.Join(c.Runs[len(c.Runs)-1], runstore.ReportFile))
	}
	if jsonOut != "" {
		if err := runstore.WriteJSON(jsonOut, sh.Log); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if sf.Confirm > 0 && c.Reproduced < sf.Need && result.SmallestID == "" {
		return verdictError{fmt.Errorf("the bug no longer reproduces: no candidate failed the same way, and the run's own schedule did in only %d of %d replays (want %d)", c.Reproduced, sf.Confirm, sf.Need)}
	}
	if sf.Confirm > 0 && c.Reproduced < sf.Need {
		return inconclusiveError{fmt.Errorf("the smallest schedule failed the same way in only %d of %d confirmation replays (want %d)", c.Reproduced, sf.Confirm, sf.Need)}
	}
	return nil
}

// stepLine is a candidate's progress line.
func stepLine(st shrink.Step, since time.Duration) string {
	outcome := "rejected"
	switch {
	case st.Accepted:
		outcome = "ACCEPTED"
	case st.NotRun != "":
		return fmt.Sprintf("%s not run   %s: %s", st.ID, st.Change, st.NotRun)
	}
	return fmt.Sprintf("%s %s %d of %d failed  %-38s %s  [%s]", st.ID, outcome, st.Failures(), len(st.Trials), st.Size, st.Change, since.Round(time.Second))
}
