package docker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/workloads"
)

var (
	imagesMu  sync.Mutex
	imagesFor = map[string]error{} // backend → its build's outcome
)

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
			cfg := testkit.DockerConfig(t, tc.impl)
			cfg.Mode, cfg.Duration, cfg.MaxCriticalSections = tc.mode, 30*time.Second, 40
			if tc.impl == "zk-recipe" {
				cfg.TTL = 4 * time.Second // a long session: no expiry on a loaded machine
			}
			// Every run must be valid. The 20 critical sections are a
			// liveness figure: under stress-ng a Redlock run in containers
			// made 14 (at 04e138c) while the driver saw no stall (the
			// containers can stall apart from it), so a valid run short
			// of them is run again, three runs at most. So is a run that
			// tested nothing (unknown, no acquire succeeded, no anomaly):
			// at c5fa175 five Redis containers answered almost nothing
			// for 47 s of a fault-free run.
			var r runstore.Results
			for attempt := 1; ; attempt++ {
				// Under stress-ng beside the whole suite, 4 of 5 Redis
				// containers were not ready 30 s after their start
				// (e3d7b4b): ReadyRun starts such a run again.
				out, h := testkit.ReadyRun(t, cfg)
				r = out.Results
				testedNothing := r.Valid == checker.Unknown && len(testkit.Kinds(r)) == 0 &&
					slices.ContainsFunc(r.Problems, func(p string) bool { return strings.HasPrefix(p, "no acquire succeeded") })
				if starved := starvedRelease(r, h); starved != "" && attempt < 3 {
					// Beside the whole suite, stress-ng and a shrink of
					// three JVMs (load 20), the ZooKeeper container
					// answered nothing for seconds: a release timed out,
					// its znode stayed while the session lived, and the
					// liveness checker rightly saw the lock stuck. The
					// run tested a starved container, not the provider.
					t.Logf("run %d: %s; running it again", attempt, starved)
					continue
				}
				if r.Valid != checker.Valid && !testedNothing {
					t.Fatalf("verdict %s, want valid; anomalies %v", r.Valid, testkit.Kinds(r))
				}
				cs := r.Stats["critical_sections"]
				if cs >= 20 {
					break
				}
				if attempt == 3 {
					t.Fatalf("%v critical sections in each of 3 runs, want at least 20", cs)
				}
				t.Logf("run %d: valid, %v critical sections, want at least 20; running it again", attempt, cs)
			}
			if !strings.HasPrefix(r.Run.Network, "docker network locktest-") || !strings.Contains(r.Run.Network, "image locktest/") {
				t.Errorf("network %q: want the run's docker network and locktest's image", r.Run.Network)
			}
		})
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
			cfg := testkit.DockerConfig(t, "etcd-mutex")
			cfg.Faults, cfg.Mode = []string{"pause-client"}, tc.mode
			nemesis.PausePoint.Set(&cfg.FaultSettings, workloads.PointBeforeWrite)
			// The paused holder sleeps 4 TTLs: etcd must have revoked its
			// lease (the leader's lessor, through Raft, in containers on a
			// loaded machine) before the woken holder writes. With 2.5 TTLs
			// the write came first under stress-ng, and etcd rightly
			// accepted it (CI, loaded).
			cfg.TTL = time.Second
			nemesis.Pause.Set(&cfg.FaultSettings, 4*time.Second)
			cfg.Interval, cfg.Duration, cfg.Quiet = 500*time.Millisecond, 12*time.Second, time.Second
			shown := func(o *run.Outcome, _ history.History) bool {
				if tc.want == checker.Invalid {
					return o.Results.Valid == tc.want && testkit.Kinds(o.Results)["stale-write"] > 0
				}
				return o.Results.Valid == tc.want && testkit.Result(t, o.Results, "resource").Stats["saved_by_fencing"] > 0
			}
			out, h := testkit.Reproduce(t, cfg, shown)
			if n := testkit.NemesisOps(h, "pause-client", history.OK); n < 1 {
				t.Fatalf("%d client pauses applied", n)
			}
			k := testkit.Kinds(out.Results)
			switch {
			case out.Results.Valid != tc.want:
				t.Fatalf("verdict %s, want %s; anomalies %v", out.Results.Valid, tc.want, k)
			case tc.want == checker.Invalid && k["stale-write"] == 0:
				t.Fatalf("anomalies %v: want a stale write", k)
			case tc.want == checker.Valid && testkit.Result(t, out.Results, "resource").Stats["saved_by_fencing"] < 1:
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
			return !o.IsNemesis() && (o.Type == history.Fail || o.Type == history.Info) && testkit.TimedOut(o.Error)
		}, "ops timed out at the paused node"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			cfg := testkit.DockerConfig(t, "redis-set-nx-px")
			cfg.Faults = []string{tc.fault}
			cfg.TTL, cfg.Timeout = 500*time.Millisecond, 300*time.Millisecond
			cfg.Interval = 500 * time.Millisecond
			cfg.FaultSettings = cfg.FaultSettings.With(nemesis.Window.Is(600*time.Millisecond), nemesis.Down.Is(500*time.Millisecond))
			cfg.Duration, cfg.Quiet = 21*time.Second, 15*time.Second
			// Clients retry a refused acquire after at most 50 ms, not 5: at
			// 5 ms, five clients failing at once against the killed node
			// keep both cores so busy that, with another process loading
			// them too, the Docker daemon takes over 5 s to answer the kill
			// and over 20 s to start the container again.
			cfg.Retry = 50 * time.Millisecond
			// Under stress-ng beside the suite (at 7ff04d5) no kill went in
			// during the 6 s fault phase: the engine had not answered. A
			// run with no fault applied tested nothing and is run again,
			// three runs at most; each fault that went in must be healed.
			var h history.History
			faults, heals := 0, 0
			for attempt := 1; ; attempt++ {
				_, h = testkit.MustRun(t, cfg)
				faults, heals = testkit.NemesisOps(h, tc.fault, history.OK), testkit.NemesisOps(h, tc.heal, history.OK)
				if faults > 0 || attempt == 3 {
					break
				}
				t.Logf("run %d: no %s went in (%v); running it again", attempt, tc.fault, testkit.NemesisSeq(h))
			}
			if faults < 1 || heals < faults {
				t.Fatalf("%d %s, %d %s: %v", faults, tc.fault, heals, tc.heal, testkit.NemesisSeq(h))
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
				t.Errorf("%d %s (want > 0), %d acquired after a heal (want > 0): %v", seen, tc.what, okAfter, testkit.NemesisSeq(h))
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
	cfg := testkit.DockerConfig(t, "redlock")
	if why := dockerNetWhy(); why != "" {
		t.Skip(why)
	}
	cfg.Faults = []string{"isolate+loss"}
	cfg.Mode = workloads.ModeCheckAndSet
	cfg.TTL, cfg.Timeout = time.Second, 500*time.Millisecond
	cfg.Interval = 300 * time.Millisecond
	nemesis.Window.Set(&cfg.FaultSettings, 2*time.Second)
	cfg.Duration, cfg.Quiet = 10*time.Second, 1500*time.Millisecond
	cfg.Seed = 3
	// Every run must be safe, apply its loss and heal each isolate. An
	// acquire granted during an isolate is a liveness figure: under
	// stress-ng none was in either isolate of a run (at bae4ec1, 12
	// critical sections in 526 attempts) while the driver saw no stall, so
	// a run without one is run again, three runs at most.
	for attempt := 1; ; attempt++ {
		out, err := run.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		testkit.AssertNothingLeft(t, out)
		h, err := history.ReadFile(out.Dir + "/history.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if k := testkit.Kinds(out.Results); len(k) > 0 {
			// Under stress-ng (at f5c4cb1) Redlock's five contending
			// clients split the votes after a failed release for the
			// rest of a run: a stuck lock, Redlock's liveness under loss
			// and contention, not what this test is about. It is run
			// again, three runs at most; a safety anomaly fails it.
			if !testkit.LivenessOnly(out.Results) || attempt == 3 {
				t.Fatalf("anomalies %v", k)
			}
			t.Logf("run %d: liveness anomalies only (%v); running it again", attempt, k)
			continue
		}
		if n := testkit.NemesisOps(h, "loss", history.OK); n == 0 {
			t.Fatalf("no loss applied: %v", testkit.NemesisSeq(h))
		}
		isolates, healed, during := testkit.IsolatedAcquires(t, h)
		if isolates == 0 || healed < isolates {
			t.Fatalf("%d isolates, %d healed; want isolates > 0, each healed: %v", isolates, healed, testkit.NemesisSeq(h))
		}
		if during > 0 {
			return
		}
		if attempt == 3 {
			t.Fatalf("no acquire granted during the %d isolates of each of 3 runs: %v", isolates, testkit.NemesisSeq(h))
		}
		t.Logf("run %d: no acquire granted during its %d isolates (%v critical sections); running it again",
			attempt, isolates, out.Results.Stats["critical_sections"])
	}
}

// TestDockerClientIsolate cuts one client, c0, from every Redlock
// container while the other goes on: the clients run on the host, and
// each reaches the nodes from an address of its own on the run's network
// (clusters/clientaddr), so a rule inside the nodes can single one out.
// While c0 is cut none of its acquires is granted and c1's are; the run
// names the clients' addresses, and leaves none of them behind.
func TestDockerClientIsolate(t *testing.T) {
	cfg := testkit.DockerConfig(t, "redlock")
	if why := dockerNetWhy(); why != "" {
		t.Skip(why)
	}
	cfg.Faults, cfg.Clients = []string{"client-isolate"}, 2
	cfg.Targets = map[string][]string{"client-isolate": {"c0", "n1", "n2", "n3", "n4", "n5"}}
	cfg.Mode = workloads.ModeCheckAndSet
	cfg.TTL, cfg.Timeout = time.Second, 300*time.Millisecond
	cfg.Interval = 300 * time.Millisecond
	nemesis.Window.Set(&cfg.FaultSettings, 2*time.Second)
	cfg.Duration, cfg.Quiet = 8*time.Second, 1500*time.Millisecond
	for attempt := 1; ; attempt++ {
		if clientIsolateOnce(t, cfg, attempt) {
			return
		}
	}
}

// clientIsolateOnce makes one run of TestDockerClientIsolate and checks
// it; it returns false when the run should be made again: under
// stress-ng (at 2be92af) c1 was granted nothing during either of the two
// cuts of an 8 s run, which is the starved machine, not the cut. The third
// such run fails.
func clientIsolateOnce(t *testing.T, cfg run.Config, attempt int) bool {
	t.Helper()
	out, err := run.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	testkit.AssertNothingLeft(t, out)
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
	if granted[0] > 0 {
		t.Errorf("%d acquires of p0 were granted while its client host was cut from every node", granted[0])
	}
	if k := testkit.Kinds(out.Results); len(k) > 0 {
		t.Errorf("anomalies %v", k)
	}
	if cuts > 0 && granted[1] == 0 && attempt < 3 && !t.Failed() {
		t.Logf("run %d: %d cuts of c0, and c1 was granted nothing during them (%v critical sections); running it again",
			attempt, cuts, out.Results.Stats["critical_sections"])
		return false
	}
	if cuts == 0 || granted[1] == 0 {
		t.Fatalf("%d cuts of c0, acquires granted during them %v: want cuts and c1's acquires: %v", cuts, granted, testkit.NemesisSeq(h))
	}
	return true
}

// clientCutAcquires counts the client-isolate cuts in h and, per process,
// the acquires invoked while one was in place (from its ok to its heal's
// invocation, by the ops' times) that were granted. Times, not the order
// of the file: a worker stamps its ops and sends them, so an acquire
// stamped just before a cut's ok can be recorded after it.
func clientCutAcquires(h history.History) (cuts int, granted map[int]int) {
	granted = map[int]int{}
	type span struct{ from, to int64 }
	var in []span
	for _, o := range h {
		switch {
		case o.IsNemesis() && o.F == "partition-client-isolate" && o.Type == history.OK:
			in = append(in, span{o.Time, math.MaxInt64})
		case o.IsNemesis() && o.F == "heal-network" && o.Type == history.Invoke && len(in) > 0 && in[len(in)-1].to == math.MaxInt64:
			in[len(in)-1].to = o.Time
		}
	}
	during := func(t int64) bool {
		for _, s := range in {
			if t >= s.from && t < s.to {
				return true
			}
		}
		return false
	}
	invokedIn := map[int]bool{}
	for _, o := range h {
		switch {
		case o.F == history.Acquire && o.Type == history.Invoke:
			invokedIn[o.Process] = during(o.Time)
		case o.F == history.Acquire && o.Type == history.OK && invokedIn[o.Process] && during(o.Time):
			granted[o.Process]++
		}
	}
	return len(in), granted
}

// dockerNetWhy says why network faults are unavailable under docker here.
func dockerNetWhy() string {
	e, err := engine.Open(context.Background(), nil)
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
		change func(*run.Config)
		want   string
		needs  bool // needs a Docker engine
	}{
		{"unknown backend in --image", func(c *run.Config) {
			c.Provider, c.ProviderSettings = docker.Name, provider.Values{"image": "mongo=mongo:7"}
		}, `--image mongo=mongo:7: the docker provider has no backend "mongo"`, false},
		{"--image without docker", func(c *run.Config) { c.ProviderSettings = provider.Values{"image": "redis=redis:7.2"} }, "--image needs --provider docker", false},
		{"unknown provider", func(c *run.Config) { c.Provider = "k8s" }, `--provider must be local, docker or ssh, got "k8s"`, false},
		{"daemon unreachable", func(c *run.Config) { c.Provider = docker.Name }, "docker daemon not reachable at unix:///nonexistent/docker.sock", false},
		{"missing image", func(c *run.Config) {
			c.Provider, c.ProviderSettings = docker.Name, provider.Values{"image": "redis=locktest/no-such-image:never"}
		}, "locktest/no-such-image:never", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs {
				testkit.NeedDocker(t, "redis-set-nx-px")
			}
			cfg := testkit.Config(t, "redis-set-nx-px")
			cfg.Provider = run.Providers[0]
			if tc.name == "daemon unreachable" {
				t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
			}
			tc.change(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := run.Run(ctx, cfg)
			var se *run.SetupError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a run.SetupError containing %q", err, tc.want)
			}
			if tc.needs && !strings.Contains(err.Error(), "locktest images build redis") {
				t.Errorf("err %v does not say how to get an image", err)
			}
		})
	}
}

// starvedRelease says why run r with history h tested a starved container
// rather than the lock: its only anomalies are liveness ones (a stuck
// lock, testkit.LivenessOnly), and a release in it timed out (completed
// info with a deadline exceeded). It returns "" for any other run.
func starvedRelease(r runstore.Results, h history.History) string {
	if !testkit.LivenessOnly(r) {
		return ""
	}
	for _, op := range h {
		if op.F == "release" && op.Type == history.Info && strings.Contains(op.Error, "deadline exceeded") {
			return fmt.Sprintf("a stuck lock after p%d's release timed out at %s (%s)", op.Process, time.Duration(op.Time), op.Error)
		}
	}
	return ""
}
