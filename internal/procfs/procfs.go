// Package procfs reads process states from /proc, so that a signal the
// harness sends (SIGSTOP above all, which the kernel applies asynchronously)
// can be known to have taken effect before the harness records it.
package procfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// State returns the state letter of a task from its stat file ('R', 'S',
// 'T' stopped, 't' traced, 'Z' zombie, …).
func State(statPath string) (byte, error) {
	b, err := os.ReadFile(statPath)
	if err != nil {
		return 0, err
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("%s: no state field", statPath)
	}
	return b[i+2], nil
}

// Stopped reports whether every thread of pid is stopped.
func Stopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return false, err
	}
	if len(tasks) == 0 {
		return false, fmt.Errorf("process %d: no tasks in /proc", pid)
	}
	for _, t := range tasks {
		s, err := State(t)
		if err != nil {
			return false, err
		}
		if s != 'T' && s != 't' {
			return false, nil
		}
	}
	return true, nil
}

// WaitStopped polls until every thread of pid is stopped, for at most
// limit. It returns an error if the process cannot be read (it is gone) or
// is still running at the limit.
func WaitStopped(pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := Stopped(pid)
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped after %v", pid, limit)
		}
		time.Sleep(200 * time.Microsecond)
	}
}
