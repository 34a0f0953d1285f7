package procfs

import (
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
