package procfs

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestWaitStoppedSeesSIGSTOP(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	if ok, err := Stopped(pid); err != nil || ok {
		t.Fatalf("running process: stopped %v, err %v", ok, err)
	}
	if err := WaitStopped(pid, 20*time.Millisecond); err == nil {
		t.Fatal("WaitStopped returned nil for a running process")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := WaitStopped(pid, 5*time.Second); err != nil {
		t.Fatalf("after SIGSTOP: %v", err)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(50 * time.Millisecond)
	if ok, _ := Stopped(pid); ok {
		t.Fatal("still stopped after SIGCONT")
	}
	if _, err := Stopped(1 << 30); err == nil {
		t.Fatal("no error for a pid that does not exist")
	}
}

// TestWaitGroupStoppedSeesTheWholeGroup: a shell and its child in a group
// of their own count as stopped only once both are.
func TestWaitGroupStoppedSeesTheWholeGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer func() { syscall.Kill(-pgid, syscall.SIGKILL); cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := Group(pgid)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d has %v, want the shell and its sleep", pgid, pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pgid, syscall.SIGSTOP); err != nil { // the shell alone
		t.Fatal(err)
	}
	if err := WaitGroupStopped(pgid, 50*time.Millisecond); err == nil {
		t.Fatal("the group counted as stopped with its child running")
	}
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := WaitGroupStopped(pgid, 5*time.Second); err != nil {
		t.Fatalf("after SIGSTOP of the group: %v", err)
	}
	syscall.Kill(-pgid, syscall.SIGCONT)
}

// TestCPUTellsWaitingFromWorking: a sleeping process is S and has used
// almost no CPU; a busy loop is R and has used CPU time.
func TestCPUTellsWaitingFromWorking(t *testing.T) {
	sleeper := exec.Command("sleep", "30")
	busy := exec.Command("sh", "-c", "while :; do :; done")
	for _, c := range []*exec.Cmd{sleeper, busy} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { c.Process.Kill(); c.Wait() }()
	}
	// A just-started process is runnable until it has exec'd and gone to
	// sleep; however loaded the machine, it gets there in time.
	deadline := time.Now().Add(30 * time.Second)
	for {
		state, used, err := CPU(sleeper.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if state == 'S' {
			if used > 100*time.Millisecond {
				t.Errorf("sleep used %v of CPU, want almost none", used)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep: state %c after 30s, want S", state)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var (
		state byte
		used  time.Duration
		err   error
	)
	for {
		state, used, err = CPU(busy.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if used >= 20*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("busy loop: state %c, cpu %v after 30s", state, used)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := CPU(1 << 30); err == nil {
		t.Error("no error for a pid that does not exist")
	}
}

// TestAZombieIsNotWaitedFor: a child that exited and was not reaped runs
// nothing. Stopped says so at once with ErrExited, and WaitStopped does
// not wait out its limit for it (a paused server cannot reap the backend
// that exited just before the pause, and its pause waited 5 s for it).
func TestAZombieIsNotWaitedFor(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	for {
		st, err := State(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if st == 'Z' {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if ok, err := Stopped(pid); ok || !errors.Is(err, ErrExited) {
		t.Fatalf("zombie: stopped %v, err %v; want ErrExited", ok, err)
	}
	done := make(chan error, 1)
	go func() { done <- WaitStopped(pid, time.Hour) }()
	if err := <-done; !errors.Is(err, ErrExited) {
		t.Fatalf("WaitStopped on a zombie: %v, want ErrExited", err)
	}
}
