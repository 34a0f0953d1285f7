package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/durable"
	"github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/internal/procfs"
)

// newNodeDurableCmd is `locktest node durable`: run on a host of the ssh
// provider, it says what a power loss would cut from a node's data files
// now, and with --cut cuts it, after SIGKILLing the node's process group
// with --kill. It prints the cuts as JSON, one object per file. With
// --wait it first waits there for an unsynced write (the ssh provider's
// CutPowerOnWrite) and prints an ssh.WaitResult.
func newNodeDurableCmd() *cobra.Command {
	var data, record, program, command string
	var kill int
	var wait time.Duration
	var cut bool
	c := &cobra.Command{
		Use:    "durable --data DIR --record FILE [--kill PID --program NAME] [--cut] [--wait DURATION --command NAME]",
		Short:  "Print (and with --cut make) the cuts a power loss makes to a node's data files (internal, for the ssh provider)",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if data == "" || record == "" {
				return usageError{errors.New("node durable needs --data and --record")}
			}
			var res ssh.WaitResult
			if wait > 0 {
				// Wait here, where the files are, and give up, doing
				// nothing, when the control host closes our input.
				ctx, cancel := context.WithCancel(cmd.Context())
				defer cancel()
				go func() {
					_, _ = io.Copy(io.Discard, cmd.InOrStdin())
					cancel()
				}()
				plan := func() ([]durable.Cut, error) { return durable.PlanDir(data, record) }
				found, err := durable.WaitForWrite(ctx, data, plan, command, wait)
				if err != nil {
					res.Untouched = err.Error()
					if ctx.Err() != nil {
						res.Untouched = "the control host gave up the wait"
					}
					return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
				}
				res.Found = found
			}
			if kill > 0 {
				// A running node without a record never had the shim
				// that writes it: refuse, changing nothing, rather than
				// cut what it did sync.
				if _, err := os.Stat(record); err != nil {
					return fmt.Errorf("the node has no sync record %s: neither the clock shim nor the node program's sync tracer, which write it, ran in it", record)
				}
				if err := killGroup(kill, program); err != nil {
					return err
				}
			}
			cuts, err := durable.PlanDir(data, record)
			if err != nil {
				return err
			}
			if cut {
				if err := durable.Apply(data, cuts); err != nil {
					return fmt.Errorf("cut the files of %s: %w", data, err)
				}
			}
			if cuts == nil {
				cuts = []durable.Cut{}
			}
			if wait > 0 {
				res.Cuts = cuts
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(cuts)
		},
	}
	c.Flags().StringVar(&data, "data", "", "the node's data directory")
	c.Flags().StringVar(&record, "record", "", "the node's sync record, written by the clock shim")
	c.Flags().IntVar(&kill, "kill", 0, "first SIGKILL this process's group and wait until it is gone")
	c.Flags().StringVar(&program, "program", "", "with --kill: the program the process must be, checked before the signal")
	c.Flags().BoolVar(&cut, "cut", false, "cut the files back to their durable sizes")
	c.Flags().DurationVar(&wait, "wait", 0, "first wait, for at most this long, until the files hold an unsynced write of --command, reading them every few milliseconds (until the standard input closes); print a JSON object with the cuts")
	c.Flags().StringVar(&command, "command", "", "with --wait: the command (as an append-only file logs it in RESP) whose unsynced write to wait for; empty: any unsynced byte")
	return c
}

// killGroup SIGKILLs the process group that pid leads (a daemonized server
// leads its own session) once its command line names program, and waits
// until pid is gone or a zombie.
func killGroup(pid int, program string) error {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if program != "" && !strings.Contains(string(cmdline), program) {
		return fmt.Errorf("pid %d is not a %s", pid, program)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		// Not a group leader: kill the process alone.
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := procfs.State(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || st == 'Z' || st == 'X' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still runs 5 s after SIGKILL", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
