// Command locktest is a Jepsen-style correctness harness for distributed
// locks. This file holds only the CLI: flags, wiring and exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"

	// The command picks the lock drivers: every impl of locktest.
	_ "github.com/locktest/locktest/impls/all"
)

// Exit codes, the same for run, check, debate and matrix, as the root
// command's help and the README state them.
const (
	exitOK           = 0 // as expected: valid, or the expected anomaly reproduced
	exitVerdict      = 1 // an unexpected verdict: a violation where safety was expected, or the reverse
	exitSetup        = 2 // bad usage or a set-up failure
	exitInconclusive = 3 // it could not test what it meant to (the reason is printed)
)

// usageError marks bad flags or arguments.
type usageError struct{ error }

// verdictError marks a run or check whose verdict was not the expected one.
type verdictError struct{ error }

// inconclusiveError marks a run, check, debate or matrix that could not
// test what it meant to: a fault never applied, a run stopped early, a
// checker that gave up, too few seeds for the stated rate.
type inconclusiveError struct{ error }

// exitCode maps an error of a command to the process's exit code.
func exitCode(err error) int {
	var ve verdictError
	var ie inconclusiveError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ve):
		return exitVerdict
	case errors.As(err, &ie):
		return exitInconclusive
	}
	return exitSetup
}

// outcomeError is the error a run's or a check's results give: nil when
// they meet the run's expectation, an inconclusiveError with the first
// problem when the verdict is unknown, else a verdictError.
func outcomeError(res runstore.Results) error {
	switch {
	case res.Met():
		return nil
	case res.Valid == checker.Unknown:
		return inconclusiveError{fmt.Errorf("inconclusive, expected %s: %s", res.Run.Expect, res.UnknownWhy())}
	}
	return verdictError{fmt.Errorf("the run was %s, expected %s", reports.VerdictWord(res.Valid), res.Run.Expect)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first Ctrl-C stops the run in order; a second one kills
		// locktest at once (its children die with it; `locktest cleanup`
		// removes a network lab it leaves).
		<-ctx.Done()
		stop()
	}()
	root := newRoot()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	// One line, whatever the error carries (a server's log tail, say).
	fmt.Fprintln(os.Stderr, "locktest:", strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " | ")), " "))
	stop()
	os.Exit(exitCode(err))
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "locktest",
		Short: "A Jepsen-style correctness harness for distributed locks",
		Long: `locktest starts real lock services, runs lock clients against them as separate
processes, injects real faults, records every operation, and decides from the
recorded history alone whether mutual exclusion held and whether fencing tokens
protected the shared resource.

Exit codes, the same for every command that decides something:
  0  as expected: valid, or the anomaly a run expects was reproduced; a
     search's gate held
  1  an unexpected verdict: a violation where safety was expected, or safety
     where a violation was expected; or a gate failed (matrix and merge
     --baseline: a cell got worse; margin: the lock broke on the safe side
     of its stated bound or --gate; shrink: the bug no longer reproduces)
  2  bad usage or a set-up failure (a missing server, a port in use)
  3  inconclusive: it could not test what it meant to (a fault never applied,
     no root for partitions, a run stopped by Ctrl-C, too few seeds for the
     stated rate); the reason is printed`,
		Version:       runstore.Version(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("locktest version {{.Version}}\n")
	root.InitDefaultVersionFlag()
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRunCmd(), newCheckCmd(), newReportCmd(), newIndexCmd(), newListCmd(), newWorkerCmd(), newNodeCmd(), newCleanupCmd(),
		newMatrixCmd(), newDebateCmd(), newMergeCmd(), newImagesCmd(), newLabCmd(), newShrinkCmd(), newMarginCmd(), newFlagsCmd(),
	)
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{plainSettingError(err)} })
	}
	return root
}

// args wraps a cobra positional-args check so its error counts as usage.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// commandLine is the command as it was given, which a run, a scoreboard
// and a matrix record of how they were made.
func commandLine() string { return "locktest " + strings.Join(os.Args[1:], " ") }
