package run

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/workloads"
	goredis "github.com/redis/go-redis/v9"
)

// providerEnv makes every run test that goes through testConfig use that
// provider: LOCKTEST_PROVIDER=docker runs the run tests against containers
// (the images are built first). Unset, the tests use the local provider,
// and only the tests of this file use docker.
const providerEnv = "LOCKTEST_PROVIDER"

var (
	imagesMu  sync.Mutex
	imagesFor = map[string]error{} // backend → its build's outcome
)

// needDocker skips the test when no Docker engine answers, and otherwise
// builds (once per test binary, reusing what an earlier run built)
// locktest's image of the backend of impl, so that a machine whose engine
// has no image and no registry can run the tests.
func needDocker(tb testing.TB, impl string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := docker.Open(ctx, nil)
	if err != nil {
		tb.Skipf("docker provider tests: %v", err)
	}
	defer e.Close()
	im, err := impls.Lookup(impl)
	if err != nil {
		tb.Fatal(err)
	}
	imagesMu.Lock()
	defer imagesMu.Unlock()
	berr, done := imagesFor[im.Backend]
	if !done {
		if why := dockerBuildNeeds(im.Backend); why != "" {
			berr = errors.New(why)
		} else {
			t0 := time.Now()
			var bs []docker.BuiltImage
			bs, berr = e.BuildImages(ctx, docker.BuildOptions{Backends: []string{im.Backend}})
			if berr == nil {
				tb.Logf("image %s: reused %v, %d MB, %v", bs[0].Ref, bs[0].Reused, bs[0].Size>>20, time.Since(t0).Round(time.Millisecond))
			}
		}
		imagesFor[im.Backend] = berr
	}
	if berr != nil {
		tb.Skipf("docker provider tests: no %s image: %v", im.Backend, berr)
	}
}

// dockerBuildNeeds says what the host lacks to build a backend's image.
func dockerBuildNeeds(backend string) string {
	switch backend {
	case "redis":
		if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
			return "redis-server not installed (make setup)"
		}
	case "zookeeper":
		if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
			return "zookeeper not installed (make setup)"
		}
	}
	return ""
}

// localOnly skips a test of the local provider's own mechanisms when
// LOCKTEST_PROVIDER runs the tests under docker, saying why.
func localOnly(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(providerEnv) == ProviderDocker {
		t.Skip("local provider only: " + why)
	}
}

// dockerConfig is testConfig under the docker provider.
func dockerConfig(t *testing.T, impl string) Config {
	t.Helper()
	needDocker(t, impl)
	cfg := testConfig(t, impl)
	cfg.Provider = ProviderDocker
	return cfg
}

// assertNothingLeft checks that a docker run left no container and no
// network: everything labelled with its run id is gone.
func assertNothingLeft(t *testing.T, out *Outcome) {
	t.Helper()
	if !strings.HasPrefix(out.Results.Run.Network, "docker") {
		return
	}
	e, err := docker.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	all, err := e.Find(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Results.Run.Lab == "" {
		t.Fatal("the docker run recorded no run id")
	}
	if left := docker.OfRun(all, out.Results.Run.Lab); len(left) > 0 {
		t.Errorf("the run left %+v", left)
	}
}

// Every backend the docker provider runs keeps mutual exclusion without
// faults, with locktest's own images.
func TestDockerNoFaultRunsAreValid(t *testing.T) {
	for _, tc := range []struct {
		impl string
		mode workloads.Mode
	}{
		{"redis-set-nx-px", workloads.ModeFenced},
		{"redlock", workloads.ModeNone},
		{"etcd-mutex", workloads.ModeEtcdGuarded},
		{"zk-recipe", workloads.ModeFenced},
	} {
		t.Run(tc.impl, func(t *testing.T) {
			cfg := dockerConfig(t, tc.impl)
			cfg.Mode, cfg.Duration, cfg.MaxCriticalSections = tc.mode, 30*time.Second, 40
			if tc.impl == "zk-recipe" {
				cfg.TTL = 4 * time.Second // a long session: no expiry on a loaded machine
			}
			out, _ := mustRun(t, cfg)
			r := out.Results
			if r.Valid != checker.Valid {
				t.Errorf("verdict %s, want valid; anomalies %v", r.Valid, kinds(r))
			}
			if cs := r.Stats["critical_sections"]; cs < 20 {
				t.Errorf("%v critical sections, want at least 20", cs)
			}
			if !strings.HasPrefix(r.Run.Network, "docker network locktest-") || !strings.Contains(r.Run.Network, "image locktest/") {
				t.Errorf("network %q: want the run's docker network and locktest's image", r.Run.Network)
			}
		})
	}
}

// TestDockerClockShimMovesANodesClock checks what a clock fault needs of
// the docker provider, with no schedule to depend on: the platform of a
// docker run that asks for clock faults mounts the clock shim into the
// Redlock nodes' containers, and setting a node's offset moves that
// node's clock as Redis itself reads it (TIME), and only that node's, and
// setting it back restores it. (The overlap a forward jump causes is
// TestRedlockClockJumpOverlaps's; under docker no partition can keep one
// client from some nodes, which that construction needs.)
func TestDockerClockShimMovesANodesClock(t *testing.T) {
	cfg := dockerConfig(t, "redlock")
	cfg.Faults = []string{"clock-bump"}
	impl, err := impls.Lookup(cfg.Impl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, lg := t.TempDir(), slog.New(slog.DiscardHandler)
	plat, err := setupPlatform(ctx, cfg, impl, dir, lg)
	t.Cleanup(func() { plat.close(context.Background(), lg) })
	if err != nil {
		t.Fatal(err)
	}
	if plat.clocks == nil {
		t.Fatalf("no clock shim: %s", plat.clockWhy)
	}
	cl, err := startCluster(ctx, cfg, impl, dir, plat, lg)
	if cl != nil {
		t.Cleanup(func() { cl.Stop(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	nodes := cl.Nodes()
	skew := func(n clusters.Node) time.Duration {
		t.Helper()
		rc := goredis.NewClient(&goredis.Options{Addr: n.Addr})
		defer rc.Close()
		at, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatalf("TIME of %s: %v", n.Name, err)
		}
		return time.Until(at)
	}
	const jump = 30 * time.Second
	if err := plat.clocks.Set("n3", jump); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		want := time.Duration(0)
		if n.Name == "n3" {
			want = jump
		}
		if d := skew(n); d < want-5*time.Second || d > want+5*time.Second {
			t.Errorf("%s's clock is %v off the host's, want %v", n.Name, d.Round(time.Millisecond), want)
		}
	}
	if err := plat.clocks.Set("n3", 0); err != nil {
		t.Fatal(err)
	}
	if d := skew(nodes[2]); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("n3's clock is %v off the host's after the reset, want 0", d.Round(time.Millisecond))
	}
}

// TestDockerEtcdClientPause is the GC pause against etcd in containers: a
// client paused before its write past its lease breaks a resource that
// trusts the lock, and cannot break one guarded by etcd itself.
func TestDockerEtcdClientPause(t *testing.T) {
	for _, tc := range []struct {
		mode workloads.Mode
		want checker.Verdict
	}{
		{workloads.ModeNone, checker.Invalid},
		{workloads.ModeEtcdGuarded, checker.Valid},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			cfg := dockerConfig(t, "etcd-mutex")
			cfg.Faults, cfg.Mode = []string{"pause-client"}, tc.mode
			cfg.PausePoint = workloads.PointBeforeWrite
			cfg.TTL, cfg.ClientPause = time.Second, 2500*time.Millisecond
			cfg.Interval, cfg.Duration, cfg.Quiet = 500*time.Millisecond, 10*time.Second, time.Second
			out, h := reproduce(t, cfg, func(o *Outcome, _ history.History) bool { return o.Results.Valid == tc.want })
			if n := nemesisOps(h, "pause-client", history.OK); n < 1 {
				t.Fatalf("%d client pauses applied", n)
			}
			k := kinds(out.Results)
			switch {
			case out.Results.Valid != tc.want:
				t.Fatalf("verdict %s, want %s; anomalies %v", out.Results.Valid, tc.want, k)
			case tc.want == checker.Invalid && k["stale-write"] == 0:
				t.Fatalf("anomalies %v: want a stale write", k)
			case tc.want == checker.Valid && result(t, out.Results, "resource").Stats["saved_by_fencing"] < 1:
				t.Errorf("no write of a paused holder was refused by etcd")
			}
		})
	}
}

// TestDockerNodeFaults kills and restarts, and pauses and resumes, the
// Redis container, one fault kind a run so that each surely happens: each
// fault is recorded and healed; from the fault's start to the end of its
// heal clients cannot reach the killed node and time out at the paused
// one; they acquire again after the heal. The first fault comes at most
// 750 ms into the workload and the nemesis runs 6 s; the 15 s after it are
// fault-free, room for a container's restart and the clients' reconnection,
// which took more than 6 s with both cores loaded by stress-ng.
func TestDockerNodeFaults(t *testing.T) {
	for _, tc := range []struct {
		fault, heal string
		sees        func(history.Op) bool // what a client sees of the fault
		what        string
	}{
		// Connections to a killed container are refused, or its address is
		// gone from the network, or the dying server closed them: no live
		// node answers so.
		{"kill-node", "restart-node", func(o history.Op) bool {
			return o.F == history.Acquire && (o.Type == history.Fail || o.Type == history.Info) &&
				(strings.Contains(o.Error, "dial tcp") || o.Error == "EOF")
		}, "acquires that could not reach the killed node"},
		{"pause-node", "resume-node", func(o history.Op) bool {
			return !o.IsNemesis() && (o.Type == history.Fail || o.Type == history.Info) && timedOut(o.Error)
		}, "ops timed out at the paused node"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			cfg := dockerConfig(t, "redis-set-nx-px")
			cfg.Faults = []string{tc.fault}
			cfg.TTL, cfg.Timeout = 500*time.Millisecond, 300*time.Millisecond
			cfg.Interval, cfg.Window, cfg.NodeDown = 500*time.Millisecond, 600*time.Millisecond, 500*time.Millisecond
			cfg.Duration, cfg.Quiet = 21*time.Second, 15*time.Second
			// Clients retry a refused acquire after at most 50 ms, not 5: at
			// 5 ms, five clients failing at once against the killed node
			// keep both cores so busy that, with another process loading
			// them too, the Docker daemon takes over 5 s to answer the kill
			// and over 20 s to start the container again.
			cfg.Retry = 50 * time.Millisecond
			_, h := mustRun(t, cfg)
			faults, heals := nemesisOps(h, tc.fault, history.OK), nemesisOps(h, tc.heal, history.OK)
			if faults < 1 || heals < faults {
				t.Fatalf("%d %s, %d %s: %v", faults, tc.fault, heals, tc.heal, nemesisSeq(h))
			}
			var seen, okAfter int
			var firstHeal int64 = -1
			in := false // from a fault's invoke to its heal's completion
			for _, o := range h {
				switch {
				case o.IsNemesis() && o.F == tc.fault && o.Type == history.Invoke:
					in = true
				case o.IsNemesis() && o.F == tc.heal && o.Type == history.OK:
					in = false
					if firstHeal < 0 {
						firstHeal = o.Time
					}
				case in && tc.sees(o):
					seen++
				case o.F == history.Acquire && o.Type == history.OK && firstHeal >= 0:
					okAfter++
				}
			}
			if seen == 0 || okAfter == 0 {
				t.Errorf("%d %s (want > 0), %d acquired after a heal (want > 0): %v", seen, tc.what, okAfter, nemesisSeq(h))
			}
		})
	}
}

// TestDockerPartitions isolates a Redlock container by iptables rules
// inside the network namespaces of the containers, and drops packets at
// one node while it is cut: acquires go on on the majority, never granted
// by the isolated node, and the run has no anomaly.
//
// The schedule is pinned: the only fault left is the combined
// isolate+loss, so every injection is an isolate. The first injection
// comes at most 450 ms into the workload and stays 2 s; the workload runs
// 10 s with the last 1.5 s fault-free, so the isolate is in and healed
// well before the nemesis stops even on a loaded machine.
func TestDockerPartitions(t *testing.T) {
	cfg := dockerConfig(t, "redlock")
	if why := dockerNetWhy(); why != "" {
		t.Skip(why)
	}
	cfg.Faults = []string{"isolate+loss"}
	cfg.Mode = workloads.ModeCheckAndSet
	cfg.TTL, cfg.Timeout = time.Second, 500*time.Millisecond
	cfg.Interval, cfg.Window = 300*time.Millisecond, 2*time.Second
	cfg.Duration, cfg.Quiet = 10*time.Second, 1500*time.Millisecond
	cfg.Seed = 3
	out, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, out)
	h, err := history.ReadFile(out.Dir + "/history.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if k := kinds(out.Results); len(k) > 0 {
		t.Errorf("anomalies %v", k)
	}
	if n := nemesisOps(h, "loss", history.OK); n == 0 {
		t.Errorf("no loss applied: %v", nemesisSeq(h))
	}
	isolates, healed, during := isolatedAcquires(t, h)
	if isolates == 0 || healed < isolates || during == 0 {
		t.Errorf("%d isolates, %d healed, %d acquires during them; want isolates > 0, each healed, acquires > 0: %v",
			isolates, healed, during, nemesisSeq(h))
	}
}

// TestDockerClientIsolate cuts one client, c0, from every Redlock
// container while the other goes on: the clients run on the host, and
// each reaches the nodes from an address of its own on the run's network
// (clusters/clientaddr), so a rule inside the nodes can single one out.
// While c0 is cut none of its acquires is granted and c1's are; the run
// names the clients' addresses, and leaves none of them behind.
func TestDockerClientIsolate(t *testing.T) {
	cfg := dockerConfig(t, "redlock")
	if why := dockerNetWhy(); why != "" {
		t.Skip(why)
	}
	cfg.Faults, cfg.Clients = []string{"client-isolate"}, 2
	cfg.Targets = map[string][]string{"client-isolate": {"c0", "n1", "n2", "n3", "n4", "n5"}}
	cfg.Mode = workloads.ModeCheckAndSet
	cfg.TTL, cfg.Timeout = time.Second, 300*time.Millisecond
	cfg.Interval, cfg.Window = 300*time.Millisecond, 2*time.Second
	cfg.Duration, cfg.Quiet = 8*time.Second, 1500*time.Millisecond
	out, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, out)
	if ids := clientaddr.Owned(os.Getpid()); len(ids) > 0 {
		t.Errorf("the run left its client addresses: %v", ids)
	}
	if !strings.Contains(out.Results.Run.Network, "clients from ") {
		t.Errorf("results say network %q, want the clients' addresses", out.Results.Run.Network)
	}
	h, err := history.ReadFile(out.Dir + "/history.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cuts, granted := clientCutAcquires(h)
	if cuts == 0 || granted[1] == 0 {
		t.Fatalf("%d cuts of c0, acquires granted during them %v: want cuts and c1's acquires: %v", cuts, granted, nemesisSeq(h))
	}
	if granted[0] > 0 {
		t.Errorf("%d acquires of p0 were granted while its client host was cut from every node", granted[0])
	}
	if k := kinds(out.Results); len(k) > 0 {
		t.Errorf("anomalies %v", k)
	}
}

// clientCutAcquires counts the client-isolate cuts in h and, per process,
// the acquires invoked while one was in place that were granted.
func clientCutAcquires(h history.History) (cuts int, granted map[int]int) {
	granted = map[int]int{}
	in := false
	invokedIn := map[int]bool{}
	for _, o := range h {
		switch {
		case o.IsNemesis() && o.F == "partition-client-isolate" && o.Type == history.OK:
			cuts++
			in = true
		case o.IsNemesis() && o.F == "heal-network" && o.Type == history.Invoke:
			in = false
		case o.F == history.Acquire && o.Type == history.Invoke:
			invokedIn[o.Process] = in
		case o.F == history.Acquire && o.Type == history.OK && in && invokedIn[o.Process]:
			granted[o.Process]++
		}
	}
	return cuts, granted
}

// dockerNetWhy says why network faults are unavailable under docker here.
func dockerNetWhy() string {
	e, err := docker.Open(context.Background(), nil)
	if err != nil {
		return err.Error()
	}
	defer e.Close()
	return docker.NetworkFaultsReason(e)
}

// Bad docker settings are one-line setup errors that name the culprit.
func TestDockerBadInputIsASetupError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
		needs  bool // needs a Docker engine
	}{
		{"unknown backend in --image", func(c *Config) { c.Provider, c.Images = ProviderDocker, map[string]string{"mongo": "mongo:7"} }, `--image mongo=mongo:7: the docker provider has no backend "mongo"`, false},
		{"--image without docker", func(c *Config) { c.Images = map[string]string{"redis": "redis:7.2"} }, "--image needs --provider docker", false},
		{"unknown provider", func(c *Config) { c.Provider = "k8s" }, `--provider must be local, docker or ssh, got "k8s"`, false},
		{"backend docker lacks", func(c *Config) { c.Provider, c.Impl = ProviderDocker, "mysql-get-lock" }, "needs backend mysql, which the docker provider does not run", false},
		{"daemon unreachable", func(c *Config) { c.Provider = ProviderDocker }, "docker daemon not reachable at unix:///nonexistent/docker.sock", false},
		{"missing image", func(c *Config) {
			c.Provider, c.Images = ProviderDocker, map[string]string{"redis": "locktest/no-such-image:never"}
		}, "locktest/no-such-image:never", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs {
				needDocker(t, "redis-set-nx-px")
			}
			cfg := testConfig(t, "redis-set-nx-px")
			cfg.Provider = ProviderLocal
			if tc.name == "daemon unreachable" {
				t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
			}
			tc.change(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := Run(ctx, cfg)
			var se *SetupError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a SetupError containing %q", err, tc.want)
			}
			if tc.needs && !strings.Contains(err.Error(), "locktest images build redis") {
				t.Errorf("err %v does not say how to get an image", err)
			}
		})
	}
}
