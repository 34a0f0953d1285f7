package testkit

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CLI is the locktest command, built once for a package's tests, which
// run it as a user would.
type CLI struct {
	// Bin is the path of the built binary.
	Bin string
}

// BuildCLI builds the locktest command into a new temporary folder; a
// package's TestMain calls it, and remove, which deletes the folder, when
// its tests are done.
func BuildCLI() (cli CLI, remove func(), err error) {
	dir, err := os.MkdirTemp("", "locktest-bin")
	if err != nil {
		return CLI{}, nil, err
	}
	bin := filepath.Join(dir, "locktest")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/locktest/locktest/cmd/locktest").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return CLI{}, nil, errors.New("build locktest: " + err.Error() + "\n" + string(out))
	}
	return CLI{Bin: bin}, func() { os.RemoveAll(dir) }, nil
}

// Run runs the command with args, env added to this process's
// environment, and returns its stdout, its stderr and its exit code; a
// command that cannot be run fails t.
func (c CLI) Run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("run locktest: %v", err)
	return "", "", -1
}

// Start starts the command with args, its stdout and stderr going to the
// returned buffer; it is killed when the test ends.
func (c CLI) Start(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(c.Bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, &out
}

// Stop sends sig to a command Start started and waits for it to exit; it
// fails t (and kills the command) when it still runs 120 s later. The
// bound guards against a hang, not a speed: an interrupted run heals its
// faults and stops its nodes, over SSH for the ssh lab, and under
// stress-ng that took over 30 s (at bae4ec1). A stop that took over 10 s
// is logged with its time.
func Stop(t *testing.T, cmd *exec.Cmd, out *bytes.Buffer, sig os.Signal) {
	t.Helper()
	start := time.Now()
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		if took := time.Since(start); took > 10*time.Second {
			t.Logf("locktest took %v to stop after %v", took.Round(time.Millisecond), sig)
		}
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("locktest did not stop within 120s of %v: %s", sig, out.String())
	}
}

// HistoryShows reports whether the history of the one run stored as
// root/name has a granted acquire and holds every one of parts.
func HistoryShows(root, name string, parts ...string) bool {
	dirs, _ := filepath.Glob(filepath.Join(root, name, "2*", "history.jsonl"))
	if len(dirs) != 1 {
		return false
	}
	b, err := os.ReadFile(dirs[0])
	if err != nil {
		return false
	}
	s := string(b)
	if !strings.Contains(s, `"type":"ok","process":`) || !strings.Contains(s, `"f":"acquire"`) {
		return false
	}
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
