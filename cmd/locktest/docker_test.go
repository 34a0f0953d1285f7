package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/images"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/gate"
)

// TestDockerInterruptRemovesContainers interrupts docker runs: after
// SIGINT the driver removes its containers and network itself; after
// SIGKILL they are left, and `locktest cleanup` removes them by label. The
// images `locktest images build` made are kept.
func TestDockerInterruptRemovesContainers(t *testing.T) {
	gate.Need(t, "redis-server")
	e := dockertest.Open(t)
	defer e.Close()
	if stdout, stderr, code := locktest(t, "images", "build", "redis"); code != 0 || !strings.Contains(stdout, "locktest/redis:host") {
		t.Fatalf("images build redis: exit %d, %s%s", code, stdout, stderr)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			root := t.TempDir()
			cmd, out := startLocktest(t, "run", "--provider", "docker", "--impl", "redlock", "--faults", "pause-node",
				"--time", "60s", "--clients", "2", "--store", root, "--name", "dock")
			// Wait until the run is under way: its results name the run, and
			// its five containers exist.
			var run string
			var left []engine.Leftover
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) && len(left) < 6 {
				if dirs, _ := filepath.Glob(filepath.Join(root, "dock", "2*")); len(dirs) == 1 && run == "" {
					if r, err := runstore.ReadResults(dirs[0]); err == nil {
						run = r.Run.Lab
					}
				}
				if run != "" {
					all, _ := e.Find(context.Background())
					left = engine.OfRun(all, run)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if len(left) < 6 {
				t.Fatalf("run %q never had its 5 containers and network (%+v): %s", run, left, out.String())
			}
			time.Sleep(time.Second)
			stopLocktest(t, cmd, out, sig)
			if sig == syscall.SIGKILL {
				all, _ := e.Find(context.Background())
				if n := len(engine.Orphans(engine.OfRun(all, run))); n < 6 {
					t.Errorf("after SIGKILL %d orphans of run %s, want its 5 containers and network", n, run)
				}
				stdout, stderr, code := locktest(t, "cleanup")
				if code != 0 {
					t.Fatalf("cleanup: exit %d, %s%s", code, stdout, stderr)
				}
				if !strings.Contains(stdout, "locktest-"+run) {
					t.Logf("cleanup did not list run %s (another test's cleanup may have been first): %s", run, stdout)
				}
			}
			all, _ := e.Find(context.Background())
			if left := engine.OfRun(all, run); len(left) > 0 {
				t.Errorf("after %v the run is still there: %+v", sig, left)
			}
			if bs, _ := images.ListBuilt(context.Background(), e); len(bs) == 0 {
				t.Error("the built images were removed")
			}
		})
	}
}
