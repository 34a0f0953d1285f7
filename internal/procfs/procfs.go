// Package procfs reads process states from /proc, so that a signal the
// harness sends (SIGSTOP above all, which the kernel applies asynchronously)
// can be known to have taken effect before the harness records it.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// ErrExited is Stopped's error for a process that has exited but is not
// yet reaped (a zombie): it can be neither running nor stopped.
var ErrExited = errors.New("exited (a zombie, not yet reaped)")

// Stopped reports whether every live thread of pid is stopped. A thread
// that has exited (state Z or X) runs nothing and is passed over; a
// process all of whose threads have exited is an error wrapping
// ErrExited.
func Stopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return false, err
	}
	if len(tasks) == 0 {
		return false, fmt.Errorf("process %d: no tasks in /proc", pid)
	}
	stopped := 0
	for _, t := range tasks {
		s, err := State(t)
		if err != nil {
			return false, err
		}
		switch s {
		case 'T', 't':
			stopped++
		case 'Z', 'X':
		default:
			return false, nil
		}
	}
	if stopped == 0 {
		return false, fmt.Errorf("process %d: %w", pid, ErrExited)
	}
	return true, nil
}

// Group returns the pids of the live processes of the process group pgid.
func Group(pgid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue // gone meanwhile
		}
		// After the command name: state, ppid, pgrp.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		var state byte
		var ppid, pgrp, pid int
		if _, err := fmt.Sscanf(string(b[i+2:]), "%c %d %d", &state, &ppid, &pgrp); err != nil || pgrp != pgid || state == 'Z' {
			continue
		}
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(st)), "%d", &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// WaitGroupStopped polls until every thread of every process of the
// process group pgid is stopped, for at most limit. It returns an error if
// the group has no process or is still running at the limit.
func WaitGroupStopped(pgid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		pids, err := Group(pgid)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return fmt.Errorf("process group %d: no process", pgid)
		}
		all := true
		for _, p := range pids {
			if ok, err := Stopped(p); err == nil && !ok {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d not stopped after %v", pgid, limit)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// WaitStopped polls until every thread of pid is stopped, for at most
// limit. It returns an error at once if the process cannot be read (it is
// gone) or has exited (ErrExited), and one if it is still running at the
// limit.
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

// StartTime returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/<pid>/stat), or "" if it cannot be read. With the
// pid it names a process for good: a recycled pid starts at another time.
func StartTime(pid int) string {
	f, err := statFields(pid)
	// f[0] is field 3 (state); field 22 is f[19].
	if err != nil || len(f) < 20 {
		return ""
	}
	return f[19]
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name (field 2, which may hold spaces and ends at the last ')'): f[0] is
// field 3, the state.
func statFields(pid int) ([]string, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("%s: no command name", path)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// ticksPerSecond is USER_HZ, the unit of the times of /proc/<pid>/stat:
// 100 on every Linux locktest runs on (its ABI fixes it for user space).
const ticksPerSecond = 100

// CPU returns the state letter of process pid and the CPU time it has
// used, user and system (fields 3, 14 and 15 of /proc/<pid>/stat): enough
// to tell a process that waits (S, little CPU) from one that was not given
// the CPU to get anywhere (R, little CPU) or one that works (much CPU).
func CPU(pid int) (state byte, used time.Duration, err error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	// Fields 14 and 15 are f[11] and f[12].
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q: not numbers", pid, f[11], f[12])
	}
	return f[0][0], time.Duration(ut+st) * time.Second / ticksPerSecond, nil
}
