package ssh

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitStoppedScript runs the shell wait of Pause on this host: it
// ends at once for a stopped process, and fails naming the process for
// one that runs on past the limit. The program's name holds ") R ", as a
// thread's name may, which a reader of the third field of /proc's stat
// would take for the state.
func TestWaitStoppedScript(t *testing.T) {
	prog := oddSleep(t)
	cmd := exec.Command(prog, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid

	out, err := exec.Command("sh", "-c", waitStoppedScript(pid, 100*time.Millisecond)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not stopped after 100ms") {
		t.Errorf("a running process: %v, %q; want an error saying it is not stopped", err, out)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", waitStoppedScript(pid, 5*time.Second)).CombinedOutput(); err != nil {
		t.Errorf("a stopped process: %v, %q; want the wait to end", err, out)
	}
	syscall.Kill(pid, syscall.SIGCONT)
}

// TestWaitGoneScript runs the shell wait of a restart after a cut-off
// kill on this host: it says "gone" once a process exits within the
// limit (and at once for a pid that does not exist), and "running" for
// one that runs on past it. The program's name holds ") R (", as in
// TestWaitStoppedScript.
func TestWaitGoneScript(t *testing.T) {
	prog := oddSleep(t)
	run := func(pid int, limit time.Duration) string {
		t.Helper()
		out, err := exec.Command("sh", "-c", waitGoneScript(pid, limit)).CombinedOutput()
		if err != nil {
			t.Fatalf("waitGoneScript(%d): %v, %q", pid, err, out)
		}
		return strings.TrimSpace(string(out))
	}

	long := exec.Command(prog, "60")
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { long.Process.Kill(); long.Wait() })
	if got := run(long.Process.Pid, 200*time.Millisecond); got != "running" {
		t.Errorf("a process that runs on: %q, want running", got)
	}
	if got := run(long.Process.Pid, 0); got != "running" {
		t.Errorf("a process that runs, asked once (no wait): %q, want running", got)
	}

	// A process that exits while the wait goes on; its parent does not
	// reap it, so it ends as a zombie, which counts as gone.
	short := exec.Command(prog, "0.5")
	if err := short.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { short.Wait() })
	if got := run(short.Process.Pid, 10*time.Second); got != "gone" {
		t.Errorf("a process that exits within the limit: %q, want gone", got)
	}

	if err := short.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := run(short.Process.Pid, 10*time.Second); got != "gone" {
		t.Errorf("a pid that no longer exists: %q, want gone", got)
	}
	if got := run(short.Process.Pid, 0); got != "gone" {
		t.Errorf("a pid that no longer exists, asked once (no wait): %q, want gone", got)
	}
}

// oddSleep returns a copy of this host's sleep named "a) R (b": a reader
// of the third field of its /proc stat would take ") R " for its state,
// as a thread's name may hold it. It skips the test on a host without
// sleep.
func oddSleep(t *testing.T) string {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on this host")
	}
	prog := filepath.Join(t.TempDir(), "a) R (b")
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return prog
}
