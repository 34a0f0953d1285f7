package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/gate"
)

// startRedis starts a cluster in a fresh temporary directory and stops it
// when the test ends.
func startRedis(t *testing.T, opts Options) *Processes {
	t.Helper()
	gate.Need(t, "redis-server")
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	r, err := NewProcesses(backend.Redis, opts)
	return started(t, r, err, 15*time.Second)
}

// client returns a Redis client for n with short timeouts and no retries.
func client(t *testing.T, n clusters.Node) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{
		Addr:                     n.Addr,
		Protocol:                 2,
		DisableIdentity:          true,
		DialTimeout:              2 * time.Second,
		ReadTimeout:              2 * time.Second,
		WriteTimeout:             2 * time.Second,
		MaxRetries:               -1,
		DialerRetries:            1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func ping(t *testing.T, n clusters.Node) error {
	t.Helper()
	// Generous: parallel tests load the machine; a paused node still
	// answers nothing within it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return client(t, n).Ping(ctx).Err()
}

func procGone(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, os.ErrNotExist)
}

// stopped is a cluster whose processes can be listed and stopped.
type stopped interface {
	Pids() map[string]int
	Stop(ctx context.Context) error
}

// stopChecked stops c and fails t unless Stop succeeds, no process c had
// is left, and a second Stop succeeds too (Stop is idempotent).
func stopChecked(t *testing.T, c stopped) {
	t.Helper()
	pids := c.Pids()
	if err := c.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	for name, pid := range pids {
		if pid != 0 && !procGone(pid) {
			t.Errorf("node %s: /proc/%d still exists after Stop", name, pid)
		}
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// started starts c, which a New returned with err, within timeout, and
// stops it with stopChecked when the test ends. It fails t if the New or
// the Start failed.
func started[C interface {
	stopped
	Start(ctx context.Context) error
}](t *testing.T, c C, err error, timeout time.Duration) C {
	t.Helper()
	gate.Servers(t, fmt.Sprintf("a cluster (%T)", c))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopChecked(t, c) })
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStartPingStop(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			t.Parallel()
			r := startRedis(t, Options{Nodes: nodes})
			ns := r.Nodes()
			if len(ns) != nodes {
				t.Fatalf("got %d nodes, want %d", len(ns), nodes)
			}
			addrs := map[string]bool{}
			for i, n := range ns {
				if want := fmt.Sprintf("n%d", i+1); n.Name != want {
					t.Errorf("node %d named %q, want %q", i, n.Name, want)
				}
				if addrs[n.Addr] {
					t.Errorf("address %s used twice", n.Addr)
				}
				addrs[n.Addr] = true
				if err := ping(t, n); err != nil {
					t.Errorf("PING %s: %v", n.Name, err)
				}
				for _, f := range []string{"redis.conf", "redis.log", "data"} {
					if _, err := os.Stat(filepath.Join(filepath.Dir(n.LogPath), f)); err != nil {
						t.Errorf("%s: %v", n.Name, err)
					}
				}
			}
			pids := r.Pids()
			if len(pids) != nodes {
				t.Fatalf("Pids = %v", pids)
			}
			for name, pid := range pids {
				if pid == 0 || procGone(pid) {
					t.Fatalf("node %s: pid %d not running", name, pid)
				}
			}
			stopChecked(t, r)
			for name, pid := range r.Pids() {
				if pid != 0 {
					t.Errorf("node %s: Pids reports %d after Stop", name, pid)
				}
			}
		})
	}
}

func TestKillRestart(t *testing.T) {
	for _, tc := range []struct {
		persistence string
		survives    bool
	}{
		{"", false},
		{backend.PersistenceAlways, true},
		// A process kill loses nothing the server wrote, synced or not: the
		// page cache keeps it (TestPowerLossLosesWhatWasNotSynced).
		{backend.PersistenceEverysec, true},
	} {
		t.Run("persistence="+tc.persistence, func(t *testing.T) {
			t.Parallel()
			r := startRedis(t, Options{Nodes: 3, Persistence: tc.persistence})
			ctx := context.Background()
			n := r.Nodes()[1]
			c := client(t, n)
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			pid := r.Pids()[n.Name]
			if err := r.Kill(ctx, n); err != nil {
				t.Fatal(err)
			}
			if !procGone(pid) {
				t.Fatalf("/proc/%d still exists after Kill", pid)
			}
			if got := r.Pids()[n.Name]; got != 0 {
				t.Fatalf("Pids reports %d after Kill", got)
			}
			if err := ping(t, n); err == nil {
				t.Fatal("PING answered after Kill")
			}
			if err := r.Kill(ctx, n); err != nil {
				t.Errorf("second Kill: %v", err)
			}
			// The other nodes are untouched.
			for _, o := range []clusters.Node{r.Nodes()[0], r.Nodes()[2]} {
				if err := ping(t, o); err != nil {
					t.Errorf("PING %s after killing %s: %v", o.Name, n.Name, err)
				}
			}
			if err := r.Restart(ctx, n); err != nil {
				t.Fatal(err)
			}
			if r.Nodes()[1].Addr != n.Addr {
				t.Fatalf("restarted on %s, was %s", r.Nodes()[1].Addr, n.Addr)
			}
			newPid := r.Pids()[n.Name]
			if newPid == 0 || newPid == pid {
				t.Fatalf("pid after restart %d (before %d)", newPid, pid)
			}
			if err := r.Restart(ctx, n); err != nil {
				t.Errorf("Restart of a running node: %v", err)
			}
			if r.Pids()[n.Name] != newPid {
				t.Errorf("Restart of a running node replaced it")
			}
			c2 := client(t, n)
			v, err := c2.Get(ctx, "k").Result()
			switch {
			case tc.survives && err != nil:
				t.Errorf("key lost across kill with persistence %q: %v", tc.persistence, err)
			case !tc.survives && !errors.Is(err, goredis.Nil):
				t.Errorf("key survived kill without persistence: %q, %v", v, err)
			}
		})
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	r := startRedis(t, Options{})
	ctx := context.Background()
	n := r.Nodes()[0]
	if err := r.Pause(ctx, n); err != nil {
		t.Fatal(err)
	}
	err := ping(t, n)
	var nerr net.Error
	if err == nil || !(errors.As(err, &nerr) && nerr.Timeout() || errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("PING of a paused node: %v, want a timeout", err)
	}
	if err := r.Resume(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, n); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
	if err := r.Resume(ctx, n); err != nil {
		t.Errorf("second Resume: %v", err)
	}
	// A paused node still stops promptly: Stop thaws it after SIGTERM.
	if err := r.Pause(ctx, n); err != nil {
		t.Fatal(err)
	}
	pid := r.Pids()[n.Name]
	start := time.Now()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Not a speed goal: a node left frozen would be SIGKILLed only after
	// the whole grace period, which is what this guards against.
	if d := time.Since(start); d >= stopGrace {
		t.Errorf("Stop of a paused node took %v: it waited out the grace period", d)
	}
	if !procGone(pid) {
		t.Errorf("/proc/%d still exists after Stop", pid)
	}
	if err := r.Pause(ctx, n); err == nil {
		t.Error("Pause of a stopped node succeeded")
	}
	if err := r.Pause(ctx, clusters.Node{Name: "n9"}); err == nil {
		t.Error("Pause of an unknown node succeeded")
	}
}

func TestStopStart(t *testing.T) {
	t.Parallel()
	r := startRedis(t, Options{Nodes: 2})
	ctx := context.Background()
	before := r.Nodes()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i, n := range r.Nodes() {
		if n.Addr != before[i].Addr {
			t.Errorf("%s moved from %s to %s", n.Name, before[i].Addr, n.Addr)
		}
		if err := ping(t, n); err != nil {
			t.Errorf("PING %s: %v", n.Name, err)
		}
	}
}

func TestCollectLogs(t *testing.T) {
	t.Parallel()
	assertLogsCollected(t, startRedis(t, Options{Nodes: 2}), "Ready to accept connections")
}

// assertLogsCollected collects c's logs into a fresh folder and fails t
// unless each node's log is there, named for the node, and holds marker,
// a line the backend's server writes when it starts.
func assertLogsCollected(t *testing.T, c fullCluster, marker string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "logs")
	if err := c.CollectLogs(out); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		b, err := os.ReadFile(filepath.Join(out, n.Name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), marker) {
			t.Errorf("%s.log does not hold %q (%d bytes):\n%.2000s", n.Name, marker, len(b), b)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	gate.Need(t, "redis-server")
	for _, opts := range []Options{
		{},
		{Dir: "x", Nodes: -1},
		{Dir: "x", Persistence: "sometimes"},
	} {
		if _, err := NewProcesses(backend.Redis, opts); err == nil {
			t.Errorf("NewProcesses(redis, %+v) succeeded", opts)
		}
	}
}

// fakeServer puts a program called redis-server, which runs script, first
// in the PATH for the test. Not parallel: it sets the PATH.
func fakeServer(t *testing.T, script string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "redis-server"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// A node that exits during start-up is reported with the end of its log.
func TestEarlyExitQuotesLog(t *testing.T) {
	fakeServer(t, "#!/bin/sh\necho 'FATAL CONFIG FILE ERROR: something is wrong' >&2\nexit 1\n")
	r, err := NewProcesses(backend.Redis, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	err = r.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "something is wrong") || !strings.Contains(err.Error(), "exited during start-up") {
		t.Fatalf("err = %v, want the log's last lines", err)
	}
}

// Start gives up when the context ends before the node answers.
func TestStartTimeout(t *testing.T) {
	fakeServer(t, "#!/bin/sh\nexec sleep 30\n")
	r, err := NewProcesses(backend.Redis, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = r.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("err = %v, want not ready", err)
	}
	for name, pid := range r.Pids() {
		if pid != 0 {
			t.Errorf("node %s left running as %d", name, pid)
		}
	}
}

// A node whose automatically picked port is taken before it binds is
// started again on another port. Not parallel: it replaces pickPort.
func TestPortRaceRetried(t *testing.T) {
	gate.Need(t, "redis-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPort = func() (int, error) {
		calls++
		if calls == 1 {
			return taken, nil
		}
		return freePort()
	}
	t.Cleanup(func() { pickPort = freePort })
	var logs strings.Builder
	r, err := NewProcesses(backend.Redis, Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := r.Nodes()[0]
	if n.Addr == l.Addr().String() || calls != 2 {
		t.Fatalf("node on %s after %d picks; the taken port was %d", n.Addr, calls, taken)
	}
	if err := ping(t, n); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"port taken", "node started", "node=n1", "pid=", "addr=" + n.Addr} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}
