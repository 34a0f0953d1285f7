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

	// The command picks the lock drivers: every impl of locktest.
	_ "github.com/locktest/locktest/impls/all"
)

// Exit codes, as the root command's help and the README state them.
const (
	exitOK      = 0 // every checker valid, or the expected anomaly reproduced
	exitVerdict = 1 // an unexpected verdict
	exitSetup   = 2 // bad usage or a set-up failure
)

// usageError marks bad flags or arguments.
type usageError struct{ error }

// verdictError marks a run or check whose verdict was not the expected one.
type verdictError struct{ error }

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
	var ve verdictError
	if errors.As(err, &ve) {
		stop()
		os.Exit(exitVerdict)
	}
	stop()
	os.Exit(exitSetup)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "locktest",
		Short: "A Jepsen-style correctness harness for distributed locks",
		Long: `locktest starts real lock services, runs lock clients against them as separate
processes, injects real faults, records every operation, and decides from the
recorded history alone whether mutual exclusion held and whether fencing tokens
protected the shared resource.

Exit codes: 0 valid (or the expected anomaly was reproduced), 1 an unexpected
verdict, 2 bad usage or a set-up failure.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRunCmd(), newCheckCmd(), newReportCmd(), newIndexCmd(), newListCmd(), newWorkerCmd(), newNodeCmd(), newCleanupCmd(),
		newMatrixCmd(), newDebateCmd(), newImagesCmd(), newLabCmd(),
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
