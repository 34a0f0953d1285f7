package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/durable"
)

// newNodeDurableCmd is `locktest node durable`: run on a host of the ssh
// provider, it says what a power loss would cut from a node's data files
// now, and with --cut cuts it, after SIGKILLing the node's process group
// with --kill. It prints the cuts as JSON, one object per file. With
// --wait it first waits there for an unsynced write (the ssh provider's
// CutPowerOnWrite) and prints the whole durable.Outcome.
func newNodeDurableCmd() *cobra.Command {
	var r durable.Request
	c := &cobra.Command{
		Use:    "durable --data DIR --record FILE [--kill PID --program NAME] [--cut] [--wait DURATION --command NAME]",
		Short:  "Print (and with --cut make) the cuts a power loss makes to a node's data files (internal, for the ssh provider)",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.Data == "" || r.Record == "" {
				return usageError{errors.New("node durable needs --data and --record")}
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			if r.Wait > 0 {
				// Wait here, where the files are, and give up, doing
				// nothing, when the control host closes our input.
				go func() {
					_, _ = io.Copy(io.Discard, cmd.InOrStdin())
					cancel()
				}()
			}
			out, err := r.Do(ctx)
			switch {
			case err != nil:
				return err
			case r.Wait > 0:
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(out.Cuts)
		},
	}
	c.Flags().StringVar(&r.Data, "data", "", "the node's data directory")
	c.Flags().StringVar(&r.Record, "record", "", "the node's sync record, written by the clock shim")
	c.Flags().IntVar(&r.Kill, "kill", 0, "first SIGKILL this process's group and wait until it is gone")
	c.Flags().StringVar(&r.Program, "program", "", "with --kill: the program the process must be, checked before the signal")
	c.Flags().BoolVar(&r.Cut, "cut", false, "cut the files back to their durable sizes")
	c.Flags().DurationVar(&r.Wait, "wait", 0, "first wait, for at most this long, until the files hold an unsynced write of --command, reading them every few milliseconds (until the standard input closes); print a JSON object with the cuts")
	c.Flags().StringVar(&r.Command, "command", "", "with --wait: the command (as an append-only file logs it in RESP) whose unsynced write to wait for; empty: any unsynced byte")
	return c
}
