package durable

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/procfs"
)

// Request is what the node program's durability command (`locktest node
// durable`, which the ssh provider runs on a node's host) is asked: the
// node's data directory and sync record, and what to do there.
type Request struct {
	// Data is the node's data directory, Record its sync record (EnvFile).
	Data, Record string
	// Kill, when not 0, is the pid of the node's process, whose group is
	// SIGKILLed (KillGroup) before the files are planned; Program is the
	// program its command line must name.
	Kill    int
	Program string
	// Cut cuts the files back to their durable sizes (Apply); without it
	// the cuts are only planned.
	Cut bool
	// Wait, when not 0, first waits for at most this long until the files
	// hold an unsynced write of Command (WaitForWrite; "" any unsynced
	// byte).
	Wait    time.Duration
	Command string
}

// Outcome is what a Request did: the cuts a power loss makes (made, with
// Cut), whether the write it waited for came (Found) or the wait's limit
// did, or why it did nothing (Untouched: its wait ended first, with an
// error or because ctx ended, and nothing was done to the node). With
// --wait, `locktest node durable` prints it as JSON, and the ssh
// provider's CutPowerOnWrite reads it from there.
type Outcome struct {
	Cuts      []Cut  `json:"cuts"`
	Found     bool   `json:"found"`
	Untouched string `json:"untouched,omitempty"`
}

// Do does what r asks, in order: the wait, the kill, the plan and the cut.
// A running node without a sync record never had the shim or the sync
// tracer that writes it: Do refuses to kill it, changing nothing, rather
// than cut what it did sync. Its Cuts are never nil once planned.
func (r Request) Do(ctx context.Context) (Outcome, error) {
	var out Outcome
	if r.Wait > 0 {
		plan := func() ([]Cut, error) { return PlanDir(r.Data, r.Record) }
		found, err := WaitForWrite(ctx, r.Data, plan, r.Command, r.Wait)
		if err != nil {
			out.Untouched = err.Error()
			if ctx.Err() != nil {
				out.Untouched = "the control host gave up the wait"
			}
			return out, nil
		}
		out.Found = found
	}
	if r.Kill > 0 {
		if _, err := os.Stat(r.Record); err != nil {
			return out, fmt.Errorf("the node has no sync record %s: neither the clock shim nor the node program's sync tracer, which write it, ran in it", r.Record)
		}
		if err := KillGroup(r.Kill, r.Program); err != nil {
			return out, err
		}
	}
	cuts, err := PlanDir(r.Data, r.Record)
	if err != nil {
		return out, err
	}
	if r.Cut {
		if err := Apply(r.Data, cuts); err != nil {
			return out, fmt.Errorf("cut the files of %s: %w", r.Data, err)
		}
	}
	if cuts == nil {
		cuts = []Cut{}
	}
	out.Cuts = cuts
	return out, nil
}

// KillGroup SIGKILLs the process group that pid leads (a daemonized server
// leads its own session) once its command line names program, and waits
// until pid is gone or a zombie.
func KillGroup(pid int, program string) error {
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
