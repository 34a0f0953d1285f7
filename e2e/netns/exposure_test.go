package netns_test

import (
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/listeners"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testexe"
)

// mariadbFallback is the name of a MariaDB socket whose node directory is
// too long for a socket address (see clusters/local).
var mariadbFallback = regexp.MustCompile(`/locktest-mariadb-[0-9a-f]{16}\.sock$`)

// exposure is what TestExposure saw of a run while it went.
type exposure struct {
	sockets map[string]listeners.Socket // by pid, protocol and address
	// workers are the worker processes seen, by pid, with what is wrong
	// with their standard input and output ("" when both are pipes).
	workers map[int]string
	// writable are the world-writable files and folders of the store.
	writable map[string]bool
}

// TestExposure lists, while a real run goes, the sockets that the run's
// processes — the driver with its resource store, the servers, the workers —
// accept traffic on, each in its own network namespace, and asserts that
// none binds beyond loopback or the run's own namespace addresses (never
// 0.0.0.0 or ::), that Unix sockets lie inside the run's folder, that the
// workers talk to the driver over pipes and listen on nothing, and that no
// file or folder the run writes into the store is world-writable. One run
// is on loopback; the others put their nodes and clients into network
// namespaces. The test runs with umask 0, so that the run's files are
// private because the run makes them so, not because the caller's umask did.
func TestExposure(t *testing.T) {
	for _, tc := range []struct {
		impl string
		net  string
		// servers are the commands that must be seen listening: the check
		// must have looked at the servers, not at nothing.
		servers []string
		need    func(t *testing.T)
	}{
		{"redis-set-nx-px", run.NetLoopback, []string{"redis-server"}, func(t *testing.T) { gate.Need(t, "redis-server") }},
		{"zk-recipe", run.NetNamespaces, []string{"java"}, func(t *testing.T) { needNetns(t); testkit.NeedZooKeeper(t) }},
		{"mysql-get-lock", run.NetNamespaces, []string{"mariadbd"}, func(t *testing.T) { needNetns(t); testkit.NeedImplBackend(t, "mysql-get-lock") }},
	} {
		t.Run(tc.impl+"-"+tc.net, func(t *testing.T) {
			tc.need(t)
			// Under a umask that lets anyone write, the run must still
			// create nothing world-writable.
			defer syscall.Umask(syscall.Umask(0))
			// The local provider's servers, whatever LOCKTEST_PROVIDER says.
			cfg := run.DefaultConfig()
			cfg.Impl, cfg.Net, cfg.Seed, cfg.StoreDir = tc.impl, tc.net, 7, t.TempDir()
			cfg.WorkerCommand, cfg.WorkerEnv = testexe.Worker()
			cfg.Duration = 6 * time.Second
			if tc.impl == "zk-recipe" {
				cfg.TTL = 4 * time.Second // a session that outlasts a loaded machine's hiccups
			}
			out, seen := watchRun(t, cfg)

			var allowed []netip.Prefix
			if tc.net == run.NetNamespaces {
				sub, ok := strings.CutPrefix(out.Results.Run.Network, "netns ")
				p, err := netip.ParsePrefix(sub)
				if !ok || err != nil {
					t.Fatalf("network %q: want the run's namespaces, \"netns <subnet>\"", out.Results.Run.Network)
				}
				allowed = []netip.Prefix{p}
			}
			var socks []listeners.Socket
			for _, s := range seen.sockets {
				socks = append(socks, s)
			}
			slices.SortFunc(socks, func(a, b listeners.Socket) int { return strings.Compare(a.String(), b.String()) })
			t.Logf("sockets of the run: %v", socks)
			for _, s := range listeners.Exposed(socks, allowed, []string{out.Dir}) {
				if mariadbFallback.MatchString(s.Path) && filepath.Dir(s.Path) == os.TempDir() && s.Comm == "mariadbd" {
					// A run folder too deep for a socket address (this
					// test's is): the server's socket, which locktest does
					// not use, goes to the temporary folder.
					continue
				}
				t.Errorf("exposed beyond loopback and the run's namespaces (%v) or its folder: %v", allowed, s)
			}
			assertLooked(t, socks, tc.servers, cfg.Clients, seen.workers)
			for w, bad := range seen.workers {
				if bad != "" {
					t.Errorf("worker pid %d: %s", w, bad)
				}
			}
			for _, f := range worldWritable(t, cfg.StoreDir) {
				seen.writable[f] = true
			}
			for f := range seen.writable {
				t.Errorf("world-writable in the store: %s", f)
			}
		})
	}
}

// watchRun runs cfg and, until it ends, looks every 200ms at the sockets
// of every process below this one (the run's), at its workers' standard
// input and output and at the store's file modes.
func watchRun(t *testing.T, cfg run.Config) (*run.Outcome, exposure) {
	t.Helper()
	seen := exposure{sockets: map[string]listeners.Socket{}, workers: map[int]string{}, writable: map[string]bool{}}
	done := testkit.StartRun(cfg)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			if r.Err != nil {
				t.Fatalf("run: %v", r.Err)
			}
			return r.Out, seen
		case <-tick.C:
		}
		pids, err := listeners.Descendants(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			socks, err := listeners.Of(pid)
			if err != nil && !os.IsNotExist(err) && !strings.Contains(err.Error(), "no such process") {
				t.Logf("pid %d: %v", pid, err) // exited meanwhile, most likely
			}
			for _, s := range socks {
				seen.sockets[fmt.Sprintf("%d %s %s %s", s.PID, s.Proto, s.Addr, s.Path)] = s
			}
			if pid != os.Getpid() && isWorker(pid, self) {
				seen.workers[pid] = workerPipes(pid, socks)
			}
		}
		for _, f := range worldWritable(t, cfg.StoreDir) {
			seen.writable[f] = true
		}
	}
}

// isWorker reports whether pid runs this test binary as a worker.
func isWorker(pid int, self string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || exe != self {
		return false
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && slices.Contains(strings.Split(string(env), "\x00"), "LOCKTEST_TEST_WORKER=1")
}

// workerPipes says what is wrong with a worker: a standard input or output
// that is not a pipe, or a socket it accepts traffic on; "" if nothing.
func workerPipes(pid int, socks []listeners.Socket) string {
	var bad []string
	for fd, name := range []string{"stdin", "stdout"} {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
		if err != nil {
			return "" // exited meanwhile
		}
		if !strings.HasPrefix(l, "pipe:") {
			bad = append(bad, fmt.Sprintf("%s is %s, not a pipe", name, l))
		}
	}
	for _, s := range socks {
		bad = append(bad, "listens on "+s.String())
	}
	return strings.Join(bad, "; ")
}

// assertLooked fails the test if the watch did not see what every run has:
// the resource store in this process, each of servers listening, and the
// workers.
func assertLooked(t *testing.T, socks []listeners.Socket, servers []string, clients int, workers map[int]string) {
	t.Helper()
	if !slices.ContainsFunc(socks, func(s listeners.Socket) bool { return s.PID == os.Getpid() }) {
		t.Errorf("no listener of the driver (the resource store) among %v", socks)
	}
	for _, comm := range servers {
		if !slices.ContainsFunc(socks, func(s listeners.Socket) bool { return s.Comm == comm && s.Proto != "unix" }) {
			t.Errorf("no %s listening among %v", comm, socks)
		}
	}
	if len(workers) < clients {
		t.Errorf("saw %d workers, want %d", len(workers), clients)
	}
}

// worldWritable returns the files and folders below root that anyone may
// write. Symbolic links (always 0777) are not writable through; Unix
// sockets are judged by where they lie (listeners.Exposed): their mode is
// what lets clients connect, and the servers give it (MariaDB always 0777).
func worldWritable(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // removed meanwhile (a half-made file of a server)
		}
		if path == root {
			return nil // the caller's folder, not the run's
		}
		if d.Type()&(fs.ModeSymlink|fs.ModeSocket) != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Mode().Perm()&0o002 != 0 {
			out = append(out, fmt.Sprintf("%s (%v)", path, info.Mode()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
