package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/internal/testbin"
	"github.com/locktest/locktest/internal/testlab"
)

// TestSSHLabInterruptAndCleanup brings a lab up with `locktest lab up`,
// interrupts a Redlock run over it (Ctrl-C) once it has acquired under a
// partition, and checks that the node logs were collected and that no host
// keeps a file, rule or process of the run; then kills a second run
// outright and checks that `locktest cleanup --provider ssh` removes what
// it left; `locktest lab down` removes the lab.
func TestSSHLabInterruptAndCleanup(t *testing.T) {
	testbin.Need(t, "sshd", "redis-server", "iptables")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e, err := docker.Open(ctx, nil)
	cancel()
	if err != nil {
		t.Skipf("the ssh lab needs a Docker engine: %v", err)
	}
	defer e.Close()
	dir, root := t.TempDir(), t.TempDir()
	if _, stderr, code := locktest(t, "lab", "up", "--dir", dir); code != 0 {
		t.Fatalf("lab up: exit %d: %s", code, stderr)
	}
	t.Cleanup(func() {
		if stdout, stderr, code := locktest(t, "lab", "down", "--dir", dir); code != 0 || !strings.Contains(stdout, "removed lab") {
			t.Errorf("lab down: exit %d: %s%s", code, stdout, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, docker.SSHLabInventory)); err == nil {
			t.Errorf("lab down left %s", docker.SSHLabInventory)
		}
	})
	inventory := filepath.Join(dir, docker.SSHLabInventory)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			name := strings.ToLower(sig.String()[:3])
			cmd, out := startLocktest(t, "run", "--provider", "ssh", "--inventory", inventory, "--impl", "redlock",
				"--faults", "isolate", "--interval", "500ms", "--time", "60s", "--store", root, "--name", name)
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) && !historyShows(root, name, `"type":"ok","process":-1,"f":"partition-isolate"`) {
				time.Sleep(50 * time.Millisecond)
			}
			if !historyShows(root, name, `"type":"ok","process":-1,"f":"partition-isolate"`) {
				cmd.Process.Kill()
				t.Fatalf("no partition within a minute: %s", out.String())
			}
			stopLocktest(t, cmd, out, sig)
			if sig == syscall.SIGKILL {
				stdout, stderr, code := locktest(t, "cleanup", "--provider", "ssh", "--inventory", inventory)
				if code != 0 || !strings.Contains(stdout, "ssh: removed run") {
					t.Fatalf("cleanup: exit %d: %s%s", code, stdout, stderr)
				}
			} else {
				logs, _ := filepath.Glob(filepath.Join(root, name, "2*", "logs", "n5.log"))
				if len(logs) != 1 {
					t.Errorf("the interrupted run collected no log of n5: %s", out.String())
				}
			}
			testlab.AssertClean(t, inventory)
		})
	}
}
