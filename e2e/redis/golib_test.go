package redis_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/impls/golib"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
)

// oldRedsync is the redsync release the adapter test builds: the last
// before WithSetNXOnExtend, served by the Go module proxy.
const oldRedsync = "github.com/go-redsync/redsync/v4@v4.11.0"

// needModule skips t unless the go command can fetch mod@version (the Go
// module proxy answers, or the module cache holds it).
func needModule(t *testing.T, pin string) {
	t.Helper()
	gate.Need(t, "go")
	cmd := exec.Command("go", "mod", "download", "-json", pin)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("the go command cannot fetch %s (the Go module proxy is needed): %v: %s", pin, err, strings.TrimSpace(string(out)))
	}
}

// TestLibRunsTheImplAtThatVersion: a run of redlock-3 with --lib
// redsync@v4.11.0 builds the adapter of impls/redlock with that redsync
// (or finds it in the cache: once per version of locktest's sources), runs
// it as an external client, and its results name v4.11.0 as redsync's
// version, from the adapter's build info and from its hello_ok, where a
// run of the same impl without --lib names the version of go.mod.
func TestLibRunsTheImplAtThatVersion(t *testing.T) {
	gate.Need(t, "redis-server")
	needModule(t, oldRedsync)
	cfg := testkit.Config(t, "redlock-3")
	cfg.Libs = []string{oldRedsync}
	cfg.Duration, cfg.Clients = 2*time.Second, 3
	out, _ := testkit.MustRun(t, cfg)
	r := out.Results
	if r.Valid != checker.Valid {
		t.Errorf("verdict %s, want valid: %v", r.Valid, r.Run.Errors)
	}
	if got := r.Run.Versions.Clients["github.com/go-redsync/redsync/v4"]; got != "v4.11.0" {
		t.Errorf("results name redsync %q, want v4.11.0 (all: %v)", got, r.Run.Versions.Clients)
	}
	c := r.Run.Client
	if c == nil || c.Library != "github.com/go-redsync/redsync/v4" || c.Version != "v4.11.0" {
		t.Fatalf("the adapter's hello_ok named %+v, want redsync v4.11.0", c)
	}
	if r.Run.Impl != "redlock-3" || !strings.HasSuffix(c.Command, "/"+golib.Binary+" -impl redlock-3") {
		t.Errorf("impl %q run by %q, want redlock-3 run by the adapter", r.Run.Impl, c.Command)
	}
	if r.Run.Settings["lib"] != oldRedsync {
		t.Errorf("results' settings have lib=%q, want %s", r.Run.Settings["lib"], oldRedsync)
	}
	if _, err := os.Stat(filepath.Join(out.Dir, "logs", "adapter-build.log")); err != nil {
		t.Errorf("the run keeps no log of the adapter's build: %v", err)
	}
}
