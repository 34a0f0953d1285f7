package ssh_test

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/provider"
	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/procfs"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testexe"
	"github.com/locktest/locktest/testkit/testlab"
	"github.com/locktest/locktest/workloads"
	xssh "golang.org/x/crypto/ssh"
)

// sshConfig is testkit.Config under the ssh provider, on the lab's hosts.
func sshConfig(t *testing.T, impl, inventory string) run.Config {
	t.Helper()
	cfg := testkit.Config(t, impl)
	cfg.Provider, cfg.ProviderSettings = sshp.Name, provider.Values{"inventory": inventory}
	return cfg
}

// TestSSHLabRuns runs Redlock over the SSH lab: fault-free, with a node
// paused, with a node killed and restarted (with the append-only file
// fsynced at every write, so the restart remembers), and with a node
// isolated by iptables; and a fault-free etcd mutex. Each fault is pinned to n1 and must really happen
// and be undone; each run is valid, as the same runs are on the local
// provider; and afterwards no host keeps a file, rule or process of the
// run. The replicated Redis backends (sshReplicated), bad hosts
// (sshBadHosts) and the cleanup of a dead run (sshCleanup) are tried on
// the same lab.
func TestSSHLabRuns(t *testing.T) {
	inventory := testlab.Shared(t)
	for _, tc := range []struct {
		name, impl, fault, heal string
		persistence             string
		// target pins the fault; n1 when empty.
		target string
		// open, when set, says why the run's verdict is not asserted:
		// it depends on timing the test does not control.
		open string
	}{
		{name: "no-faults", impl: "redlock"},
		{name: "pause-node", impl: "redlock", fault: "pause-node", heal: "resume-node"},
		{name: "kill-node", impl: "redlock", fault: "kill-node", heal: "restart-node", persistence: "always"},
		{name: "isolate", impl: "redlock", fault: "isolate", heal: "heal-network"},
		// etcd members are this test binary, uploaded to the hosts. (A
		// member's kill can end in a duplicate token here as on local,
		// depending on timing, so the etcd run is fault-free.)
		{name: "etcd-no-faults", impl: "etcd-mutex"},
		// The isolation of whichever member leads when the fault goes in
		// (roles read over the lab's network): every cut must hit the
		// leader and be healed.
		{name: "etcd-isolate-leader", impl: "etcd-mutex", fault: "isolate", heal: "heal-network", target: "leader",
			open: "a release that times out while the leader is cut can be followed by the same session's acquire " +
				"with its old key's create revision, a duplicate-token, depending on timing (as kill-node on local; " +
				"TestRunRecordsIsolatedLeader asserts no verdict either)"},
		// ZooKeeper peers are the hosts' own JVMs (the lab's image has
		// this host's Java and Debian's jars): fault-free, and the
		// leader killed and restarted, with the fenced resource of the
		// catalogue's zk-partitions-and-leader-kills.
		{name: "zookeeper-no-faults", impl: "zk-recipe"},
		{name: "zookeeper-kill-leader", impl: "zk-recipe", fault: "kill-node", heal: "restart-node", target: "leader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.impl, "zk-") {
				gate.Need(t, "java")
			}
			cfg := sshConfig(t, tc.impl, inventory)
			if tc.impl == "zk-recipe" {
				cfg.Mode = workloads.ModeFenced
			}
			if tc.impl == "etcd-mutex" {
				cfg.NodeCommand, cfg.NodeEnv = testexe.Node()
			}
			cfg.Duration, cfg.MaxCriticalSections = 20*time.Second, 40
			// Leases of 5 s: a holder descheduled for 2 s on a loaded
			// machine must not outlive its lease, which would be a real
			// stale write that no fault caused.
			cfg.TTL = 5 * time.Second
			if tc.fault != "" {
				cfg.Faults = []string{tc.fault}
				cfg.Targets = map[string][]string{tc.fault: {cmp.Or(tc.target, "n1")}}
				cfg.Persistence = tc.persistence
				cfg.Interval = 500 * time.Millisecond
				cfg.FaultSettings = cfg.FaultSettings.With(nemesis.Down.Is(500*time.Millisecond), nemesis.Window.Is(600*time.Millisecond))
				// A fault phase of 7 s: room for the first fault, one
				// every 500 ms, on a loaded machine (an SSH command to a
				// starved host took up to 4.5 s under stress-ng).
				cfg.Duration, cfg.Quiet, cfg.MaxCriticalSections = 11*time.Second, 4*time.Second, 0
			}
			// Under stress-ng the machine stalled for seconds (the isolate
			// took 3.7 s to go in over SSH, the unlocks of redsync's failed
			// attempts timed out and left their keys, and no acquire won a
			// quorum for 5.5 s: stuck-lock): a run that misses its verdict
			// during a stall of a second or more is run again, as is one
			// whose fault did not go in or that lost a host while a host
			// answered its keepalives a second late or more (the lab's
			// containers stall apart from the driver: at 94e275f all five
			// hosts went 15 s without answering while the driver's timer
			// ran on time).
			out, h := testkit.SteadyRun(t, cfg, time.Second, steadyLab(tc.open))
			r := out.Results
			open := tc.open
			if open == "" && strings.HasPrefix(tc.impl, "redlock") && testkit.LivenessOnly(r) {
				// Under stress-ng (at ee89495) all five lab hosts timed out
				// an unlock together for a second, with no stall of the
				// driver: the failed attempts' keys stayed their 5 s, and
				// Redlock's contending clients split the votes again and
				// again (docs/reliability.md, Open). That is Redlock's
				// liveness on a slow network, not what this test is about;
				// any safety anomaly still fails it.
				open = "Redlock's split votes on a slow lab leave a stuck lock, a liveness anomaly"
			}
			wantValid(t, r, open)
			if !strings.HasPrefix(r.Run.Network, "ssh hosts h1 ") || !strings.Contains(r.Run.Network, "rtt") || !strings.Contains(r.Run.Network, "host keys checked") {
				t.Errorf("network %q: want the hosts, their round trips and the host key check", r.Run.Network)
			}
			if tc.fault != "" {
				faults := 0
				for _, o := range h {
					if o.IsNemesis() && strings.Contains(o.F, tc.fault) && o.Type == history.OK {
						faults++
					}
				}
				heals := testkit.NemesisOps(h, tc.heal, history.OK)
				if faults < 1 || heals < 1 {
					t.Errorf("%d %s, %d %s applied: %v", faults, tc.fault, heals, tc.heal, testkit.NemesisSeq(h))
				}
				if tc.target == "leader" {
					assertLeaderHit(t, h, tc.fault)
				}
			}
			if b, err := os.ReadFile(filepath.Join(out.Dir, "logs", "n1.log")); err != nil || !strings.Contains(string(b), map[string]string{"redlock": "Ready to accept connections", "etcd-mutex": "serving client traffic", "zk-recipe": "QuorumPeerMain"}[tc.impl]) {
				t.Errorf("logs/n1.log is not the node's log collected from its host (err %v)", err)
			}
			testlab.AssertClean(t, inventory)
		})
	}
	t.Run("replicated", func(t *testing.T) { sshReplicated(t, inventory) })
	t.Run("bad-hosts", func(t *testing.T) { sshBadHosts(t, inventory) })
	t.Run("clock-shim-refused", func(t *testing.T) { sshClockShimRefused(t, inventory) })
	t.Run("cleanup", func(t *testing.T) { sshCleanup(t, inventory) })
	t.Run("interrupted-start", func(t *testing.T) { sshInterruptedStart(t, inventory) })
}

// cancelOn is a log handler that cancels a context at the first record
// whose message is msg.
type cancelOn struct {
	slog.Handler
	msg    string
	cancel context.CancelFunc
}

func (h cancelOn) Enabled(context.Context, slog.Level) bool { return true }

func (h cancelOn) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.cancel()
	}
	return nil
}

// sshInterruptedStart interrupts the start of a redis-cluster on the lab
// (six nodes on five hosts) the moment the first node has started, while
// the others' start commands are under way, as a Ctrl-C would: Start must
// fail with the cancellation, and Stop must then find every server that
// did start, so that nothing is left on the hosts.
func sshInterruptedStart(t *testing.T, inventory string) {
	_, conns := testlab.Dial(t, inventory)
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lg := slog.New(cancelOn{Handler: slog.DiscardHandler, msg: "ssh node started", cancel: cancel})
	runID := sshp.NewRunID()
	cl, err := sshp.New(sshp.Options{Backend: "redis-cluster", Conns: conns, Inventory: inv, RunID: runID, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("start: %v, want it cancelled", err)
	}
	stop, stopCancel := context.WithTimeout(context.Background(), time.Minute)
	defer stopCancel()
	if err := cl.Stop(stop); err != nil {
		t.Error(err)
	}
	if err := sshp.RemoveRunDirs(stop, conns, runID); err != nil {
		t.Error(err)
	}
	testlab.AssertClean(t, inventory)
}

// sshReplicated runs the replicated Redis backends over the lab, each
// with six processes on the lab's five hosts, so that one host runs two
// (on ports of their own): redis-replicated (a master, two replicas and
// three sentinels) and redis-cluster (three masters, three replicas),
// fault-free and valid; redis-replicated with the master killed, over
// Sentinel's failover (the node down 2 s, twice Sentinel's down-after, the
// append-only file fsynced at every write), and redis-cluster with a
// master paused (600 ms, well within a node timeout of 5 s, so no
// failover), each fault pinned to the role master, recorded with that
// role, and undone. The paused cluster stays valid; the killed Sentinel
// master's verdict is not asserted: a grant that the master acknowledged
// and its replicas never got is lost in the failover, depending on timing
// (the catalogue's claim 8). Every node's log is collected, the sentinels'
// too, and afterwards no host keeps a file, rule or process of the run.
func sshReplicated(t *testing.T, inventory string) {
	for _, tc := range []struct {
		name, impl, fault, heal string
		params                  map[string]string
		// open says why the verdict is not asserted.
		open string
		// log is a node whose collected log must hold want.
		log, want string
	}{
		{name: "sentinel-no-faults", impl: "redis-replicated", log: "s3", want: "+monitor master locktest"},
		{name: "sentinel-kill-master", impl: "redis-replicated", fault: "kill-node", heal: "restart-node",
			log: "n1", want: "Ready to accept connections",
			open: "a grant the master acknowledged and its replicas never got is lost in the failover, depending on timing (claim 8)"},
		{name: "cluster-no-faults", impl: "redis-cluster", log: "n6", want: "Cluster state changed: ok"},
		{name: "cluster-pause-master", impl: "redis-cluster", fault: "pause-node", heal: "resume-node",
			params: map[string]string{"node-timeout": "5s"}, log: "n6", want: "Cluster state changed: ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sshConfig(t, tc.impl, inventory)
			cfg.ClusterParams = tc.params
			cfg.Duration, cfg.MaxCriticalSections, cfg.TTL = 10*time.Second, 40, 5*time.Second
			if tc.fault != "" {
				cfg.Faults = []string{tc.fault}
				cfg.Targets = map[string][]string{tc.fault: {"master"}}
				cfg.Persistence = "always"
				cfg.Interval = 500 * time.Millisecond
				cfg.FaultSettings = cfg.FaultSettings.With(nemesis.Down.Is(2*time.Second), nemesis.Window.Is(600*time.Millisecond))
				// 8 s of faults: under stress-ng, with the other lab
				// beside it, reading the roles and sending the pause over
				// SSH took 3.5 s, past the end of a 4 s fault phase.
				cfg.Duration, cfg.Quiet, cfg.MaxCriticalSections = 10*time.Second, 2*time.Second, 0
			}
			// A run that lost a host, or whose fault did not go in, while
			// a host answered its keepalives a second late or more is run
			// again (as in TestSSHLabRuns).
			out, h := testkit.SteadyRun(t, cfg, time.Second, steadyLab(tc.open))
			r := out.Results
			wantValid(t, r, tc.open)
			if tc.fault != "" {
				faults := 0
				for _, o := range h {
					if !o.IsNemesis() || o.Type != history.OK || o.F != tc.fault {
						continue
					}
					faults++
					if len(o.Value.Targets) != 1 || o.Value.Roles[o.Value.Targets[0]] != "master" {
						t.Errorf("%s of %v recorded roles %v, want its node as master", o.F, o.Value.Targets, o.Value.Roles)
					}
				}
				if heals := testkit.NemesisOps(h, tc.heal, history.OK); faults < 1 || heals < 1 {
					t.Errorf("%d %s, %d %s applied: %v", faults, tc.fault, heals, tc.heal, testkit.NemesisSeq(h))
				}
			}
			driver, _ := os.ReadFile(filepath.Join(out.Dir, "logs", "driver.log"))
			if !strings.Contains(string(driver), `msg="ssh nodes ready" backend=`) || !strings.Contains(string(driver), "nodes=6 hosts=5") {
				t.Errorf("the driver log does not say six nodes were ready on five hosts")
			}
			if b, err := os.ReadFile(filepath.Join(out.Dir, "logs", tc.log+".log")); err != nil || !strings.Contains(string(b), tc.want) {
				t.Errorf("logs/%s.log does not hold %q: it is not the node's log from its host (err %v)", tc.log, tc.want, err)
			}
			testlab.AssertClean(t, inventory)
		})
	}
}

// steadyLab is the expectation by which the lab's runs are run again
// during a stall (testkit.SteadyRun): no problem (every fault went in, no
// host lost) and, unless open says why the verdict is not asserted, a
// valid verdict.
func steadyLab(open string) func(runstore.Results) bool {
	return func(r runstore.Results) bool {
		return len(r.Problems) == 0 && (open != "" || testkit.IsValid(r))
	}
}

// wantValid wants the run of r valid; when open says why its verdict
// depends on timing the test does not control, it only logs the verdict.
func wantValid(t *testing.T, r runstore.Results, open string) {
	t.Helper()
	if open != "" {
		t.Logf("verdict %s, anomalies %v (not asserted: %s)", r.Valid, testkit.Kinds(r), open)
	} else if r.Valid != checker.Valid {
		t.Errorf("verdict %s, want valid; anomalies %v, problems %v", r.Valid, testkit.Kinds(r), r.Problems)
	}
}

// assertLeaderHit checks that every fault of the history that went in
// recorded its node as the leader when it was picked.
func assertLeaderHit(t *testing.T, h history.History, fault string) {
	t.Helper()
	for _, o := range h {
		if !o.IsNemesis() || o.Type != history.OK || !strings.Contains(o.F, fault) {
			continue
		}
		cut, _, _ := strings.Cut(strings.Join(o.Value.Targets, " "), "|")
		if len(o.Value.Roles) != 1 || o.Value.Roles[cut] != backend.EtcdLeader {
			t.Errorf("%s of %s recorded roles %v, want %s=leader", o.F, cut, o.Value.Roles, cut)
		}
	}
}

// TestSSHLabFaultsShowViolations runs, over the SSH lab, a fault that
// breaks a lock resting on leases alone, pinned to a process and to a
// point, and checks that the run is invalid for the fault's reason, as the
// same run is on the local provider: Redlock's GC pause, a client paused
// right after its acquire, four leases long, writes after the next holder.
// The catalogue's claims 1, 2, 6 and 7 run over the lab in cmd/locktest's
// TestSSHLabInterruptAndCleanup (claims 2 and 6 with the clients on
// addresses of their own, on two sides of a partition). Afterwards no
// host keeps a file, rule or process of the run.
func TestSSHLabFaultsShowViolations(t *testing.T) {
	inventory := testlab.Shared(t)
	for _, tc := range []struct {
		name, impl, fault string
		setup             func(*run.Config)
		// kinds are the anomalies of which the run must show one.
		kinds []string
	}{
		{name: "redlock-gc-pause", impl: "redlock", fault: "pause-client", kinds: []string{"stale-write", "lost-update"}, setup: func(c *run.Config) {
			c.Mode, c.TTL, c.Work = workloads.ModeNone, 300*time.Millisecond, 5*time.Millisecond
			c.FaultSettings = c.FaultSettings.With(nemesis.PausePoint.Is(workloads.PointAfterAcquire), nemesis.Pause.Is(1200*time.Millisecond))
			c.Targets = map[string][]string{"pause-client": {"p0"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sshConfig(t, tc.impl, inventory)
			// Two clients, as in Kleppmann's figure: with three, Redlock's
			// attempts over the lab split the votes again and again under
			// stress-ng, and p0 got no lock to be paused with for 9 s
			// (stuck-lock, the pause not applied) in three seeds.
			cfg.Faults, cfg.Clients = []string{tc.fault}, 2
			cfg.Interval, cfg.Duration, cfg.Quiet = time.Second, 14*time.Second, 4*time.Second
			tc.setup(&cfg)
			shown := func(out *run.Outcome, h history.History) bool {
				k := testkit.Kinds(out.Results)
				for _, want := range tc.kinds {
					if k[want] > 0 {
						return out.Results.Valid == checker.Invalid
					}
				}
				return false
			}
			out, h := testkit.Reproduce(t, cfg, shown)
			if n := testkit.NemesisOps(h, tc.fault, history.OK); n < 1 {
				t.Fatalf("no %s applied: %v", tc.fault, testkit.NemesisSeq(h))
			}
			if !shown(out, h) {
				t.Errorf("verdict %s, anomalies %v, problems %v: want invalid with one of %v", out.Results.Valid, testkit.Kinds(out.Results), out.Results.Problems, tc.kinds)
			}
			testlab.AssertClean(t, inventory)
		})
	}
}

// TestSSHLabLostHostIsNotValid runs Redlock over the lab and, in the
// middle of the run, kills every SSH session of h2 (the node n2's host)
// from outside the run: the run's connection to h2 is gone. With isolate
// pinned to n1 (cut once the history shows the first isolation), the heals
// that follow cannot remove the run's rules on h2; with no fault at all,
// nothing is left to apply there, yet the run no longer controls one of
// its hosts. Either way the run must never be valid (unknown, or invalid
// when it saw a violation too), with a one-line problem naming h2, and keep what it recorded; the other hosts
// keep nothing of it. (h2 keeps its node, rules and directory: no
// connection of the run reaches it any more, and its owner, this test,
// still runs; the lab's removal takes them.)
func TestSSHLabLostHostIsNotValid(t *testing.T) {
	for _, faults := range []string{"isolate", ""} {
		t.Run("faults="+faults, func(t *testing.T) {
			// A lab of its own: h2 keeps the last case's node on its port.
			// The two labs run at once: the test asserts no timing.
			t.Parallel()
			inventory := testlab.Up(t)
			cfg := sshConfig(t, "redlock", inventory)
			cfg.TTL = 5 * time.Second
			// The cut comes at the first isolation or section. Under
			// stress-ng, with the other lab beside it, applying isolate's
			// rules on the five hosts took more than 8 s, past the end of
			// a 12 s run's fault phase: the phase is 20 s.
			cfg.Duration, cfg.Quiet = 24*time.Second, 4*time.Second
			// The moment to cut h2: the first isolation, or, with no
			// fault, the first grant to any client. (The first grant to
			// p0 came 10.7 s into a 12 s run under stress-ng: five
			// clients contend, and the cut came after the run's end.)
			mark := regexp.MustCompile(`"type":"ok","process":-1,"f":"partition-isolate"`)
			if faults != "" {
				cfg.Faults, cfg.Targets = []string{faults}, map[string][]string{faults: {"n1"}}
				cfg.Interval = 500 * time.Millisecond
				nemesis.Window.Set(&cfg.FaultSettings, 600*time.Millisecond)
			} else {
				cfg.Faults, mark = nil, regexp.MustCompile(`"type":"ok","process":\d+,"f":"acquire"`)
			}
			// Connected before the run, so that the cut follows the mark
			// at once, not after an SSH handshake on a loaded machine.
			ctx, conns := testlab.Dial(t, inventory)
			var done <-chan testkit.RunResult
			for attempt := 1; done == nil; attempt++ {
				cfg.Name = "lost-host-" + strconv.Itoa(attempt)
				done = testkit.StartRun(cfg)
				why := waitForMark(cfg, done, mark)
				if why == "" {
					break
				}
				// Under stress-ng (at 423b5df) the lab's hosts answered
				// nothing for 15 to 25 s at once, both labs of this
				// test together, from the run's start: no grant came in
				// the 24 s run, and the other lab's start failed. The
				// run said so (unknown, a host's lost keepalive); this
				// test, which needs the mark before it can cut h2,
				// runs it once more.
				if attempt == 2 || !strings.Contains(why, "keepalive") {
					t.Fatalf("the run ended before %s (the test proves nothing): %s", mark, why)
				}
				t.Logf("the run ended before %s while the lab stalled; running it again: %s", mark, why)
				done = nil
			}
			// The command's own session dies with the others: its error is
			// expected. sshd itself is the container's pid 1, which a signal from
			// inside does not kill, so the host stays reachable for the checks.
			conns[1].Run(ctx, "for f in /proc/[0-9]*/cmdline; do grep -qa -e '^sshd' -e '^/usr/sbin/sshd' $f 2>/dev/null && p=${f#/proc/} && kill -KILL ${p%/cmdline}; done")
			r := <-done
			if r.Err != nil {
				t.Fatalf("run: %v", r.Err)
			}
			res := r.Out.Results
			// Never valid. Unknown, unless a violation was seen before or
			// beside the loss (CI run 30, loaded: a holder stalled past its
			// lease while n1 was cut), which the run rightly reports.
			switch {
			case res.Valid == checker.Valid:
				t.Errorf("verdict valid, want unknown: the run lost h2")
			case res.Valid == checker.Invalid:
				t.Logf("verdict invalid (anomalies %v), and the run lost h2", testkit.Kinds(res))
			}
			named := false
			for _, p := range res.Problems {
				named = named || strings.Contains(p, "ssh h2") && !strings.Contains(p, "\n")
			}
			if !named {
				t.Errorf("problems %q: want one naming h2's lost connection", res.Problems)
			}
			h, err := r.Out.History()
			if err != nil || len(h) == 0 || faults != "" && testkit.NemesisOps(h, "partition-isolate", history.OK) < 1 {
				t.Errorf("the recorded history was not kept whole (%d ops, err %v)", len(h), err)
			}
			// h2 came back (its sshd is pid 1): the run dialed it again at
			// its end and left nothing there either.
			testlab.AssertClean(t, inventory)
		})
	}
}

// waitForMark waits until a run of cfg's name has mark in its history
// and returns "", or returns why the run ended first: its error, or its
// verdict and problems.
func waitForMark(cfg run.Config, done <-chan testkit.RunResult, mark *regexp.Regexp) string {
	marked := func() bool {
		files, _ := filepath.Glob(filepath.Join(cfg.StoreDir, cfg.Name, "2*", "history.jsonl"))
		for _, f := range files {
			if b, _ := os.ReadFile(f); mark.Match(b) {
				return true
			}
		}
		return false
	}
	ended := func(r testkit.RunResult) string {
		if r.Err != nil {
			return r.Err.Error()
		}
		return fmt.Sprintf("verdict %s, problems %q", r.Out.Results.Valid, r.Out.Results.Problems)
	}
	for !marked() {
		select {
		case r := <-done:
			return ended(r)
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case r := <-done:
		return "it ended right after the mark: " + ended(r)
	default:
		return ""
	}
}

// sshClockShimRefused gives h1 a working directory on /dev/shm, which
// Docker mounts noexec, so h1's loader refuses to preload the clock shim
// uploaded there: clock-bump must then be unavailable with h1's reason,
// never applied, and the run not valid; the run still runs, and leaves
// nothing there.
func sshClockShimRefused(t *testing.T, inventory string) {
	ctx, conns := testlab.Dial(t, inventory)
	const workdir = "/dev/shm/locktest-test"
	if out, err := conns[0].Run(ctx, "grep ' /dev/shm ' /proc/mounts"); err != nil || !strings.Contains(out, "noexec") {
		t.Skipf("h1's /dev/shm is not mounted noexec (%q, %v): no host here refuses the shim", out, err)
	}
	b, err := os.ReadFile(inventory)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(inventory)
	text := strings.Replace(string(b), "  - name: h1\n", "  - name: h1\n    workdir: "+workdir+"\n", 1)
	text = strings.NewReplacer("key: id_ed25519", "key: "+filepath.Join(dir, "id_ed25519"), "known_hosts: known_hosts", "known_hosts: "+filepath.Join(dir, "known_hosts")).Replace(text)
	shm := filepath.Join(t.TempDir(), "shm.yaml")
	if err := os.WriteFile(shm, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := sshConfig(t, "redis-set-nx-px", shm)
	cfg.Faults, cfg.Targets = []string{"clock-bump"}, map[string][]string{"clock-bump": {"n1"}}
	cfg.Duration, cfg.TTL = 6*time.Second, 5*time.Second
	// Not testkit.MustRun: this run has a problem by design.
	out, h := testkit.RunHistory(t, cfg)
	r := out.Results
	refused := false
	for _, p := range r.Problems {
		refused = refused || strings.Contains(p, "clock-bump") && strings.Contains(p, "host h1 cannot preload the clock shim")
	}
	if !refused || r.Valid == checker.Valid {
		t.Errorf("verdict %s, problems %q: want clock-bump unavailable with h1's reason, and the run not valid", r.Valid, r.Problems)
	}
	if n := testkit.NemesisOps(h, "clock-bump", history.OK); n != 0 {
		t.Errorf("%d clock-bumps applied on a node whose host refused the shim", n)
	}
	if left, err := conns[0].Run(ctx, "ls -A "+workdir+" 2>/dev/null; true"); err != nil || strings.TrimSpace(left) != "" {
		t.Errorf("h1 keeps %q in %s (err %v)", left, workdir, err)
	}
	conns[0].Run(ctx, "rmdir "+workdir)
	testlab.AssertClean(t, inventory)
}

// sshCleanup leaves on h1 what a killed driver would (a run directory whose
// owner is a process that is gone, a redis-server started there, a
// sentinel started by the name redis-sentinel, a node program named as the
// uploaded etcd member's with its node.pid, an iptables rule with the
// run's comment) next to a run directory of this live process, and checks
// that Cleanup removes the first whole and keeps the second.
func sshCleanup(t *testing.T, inventory string) {
	ctx, conns := testlab.Dial(t, inventory)
	h1 := conns[0]
	host, _ := os.Hostname()
	dead, live := sshp.RunDir(h1.Host, "deadbeef"), sshp.RunDir(h1.Host, "live0001")
	script := fmt.Sprintf(`set -e
mkdir -p %[1]s/n1 %[1]s/n2 %[2]s
echo '%[3]s 999999999 1' > %[1]s/owner
echo '%[3]s %[4]d %[5]s' > %[2]s/owner
redis-server --port 6390 --daemonize yes --pidfile %[1]s/n1/redis.pid --dir %[1]s/n1 --save ''
i=0; while [ ! -s %[1]s/n1/redis.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
cat "$(command -v sleep)" > %[1]s/locktest-node && chmod 755 %[1]s/locktest-node
setsid %[1]s/locktest-node 1000 </dev/null >/dev/null 2>&1 & echo $! > %[1]s/n2/node.pid
mkdir -p %[1]s/s1 && printf 'port 26390\ndaemonize yes\npidfile %[1]s/s1/redis.pid\n' > %[1]s/s1/sentinel.conf
cat "$(command -v redis-server)" > %[1]s/redis-sentinel && chmod 755 %[1]s/redis-sentinel && %[1]s/redis-sentinel %[1]s/s1/sentinel.conf
i=0; while [ ! -s %[1]s/s1/redis.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
iptables -w -I INPUT -s 192.0.2.1 -m comment --comment locktest:deadbeef -j DROP
`, dead, live, host, os.Getpid(), procfs.StartTime(os.Getpid()))
	if _, err := h1.Run(ctx, script); err != nil {
		t.Fatal(err)
	}
	// The sentinel is known by the name it was started by.
	if out, err := h1.Run(ctx, "cat /proc/$(cat "+dead+"/s1/redis.pid)/cmdline"); err != nil || !strings.Contains(out, "redis-sentinel") || !strings.Contains(out, "[sentinel]") {
		t.Fatalf("the sentinel's command line %q (%v) does not name redis-sentinel", out, err)
	}
	defer h1.Run(context.Background(), "rm -rf "+live)
	left, err := sshp.Cleanup(ctx, conns, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].RunID != "deadbeef" || left[0].Host != "h1" {
		t.Errorf("cleanup found %+v, want the dead run on h1 only", left)
	}
	out, err := h1.Run(ctx, testlab.Leftovers)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "locktest-live0001" {
		t.Errorf("h1 keeps %q after the cleanup, want only the live run's directory", out)
	}
}

// sshBadHosts: a host that refuses the key, or whose host key is not the
// known one, is a one-line setup error naming the host, and the run leaves
// nothing on the hosts.
func sshBadHosts(t *testing.T, inventory string) {
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	otherKey, emptyKnown := filepath.Join(dir, "other_key"), filepath.Join(dir, "empty_known_hosts")
	if err := os.WriteFile(emptyKnown, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherKey, newKey(t), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, key, known, binary, want string }{
		{"wrong key", otherKey, inv.KnownHosts, "", "unable to authenticate"},
		{"unknown host key", inv.Hosts[0].Key, emptyKnown, "", "key is unknown"},
		{"no server binary", inv.Hosts[0].Key, inv.KnownHosts, "/nonexistent/redis-server", "no /nonexistent/redis-server on the host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			fmt.Fprintf(&b, "key: %s\nknown_hosts: %s\nhosts:\n", tc.key, tc.known)
			for i, h := range inv.Hosts {
				fmt.Fprintf(&b, "  - name: %s\n    address: %s\n", h.Name, h.Address)
				if i == 0 && tc.binary != "" {
					fmt.Fprintf(&b, "    binaries: {redis-server: %s}\n", tc.binary)
				}
			}
			bad := filepath.Join(dir, "bad.yaml")
			if err := os.WriteFile(bad, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := sshConfig(t, "redlock", bad)
			_, err := run.Run(context.Background(), cfg)
			var se *run.SetupError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "ssh h") {
				t.Errorf("error %v, want a one-line setup error naming the host with %q", err, tc.want)
			}
			testlab.AssertClean(t, inventory)
		})
	}
}

// newKey returns a fresh ed25519 private key in OpenSSH's format.
func newKey(t *testing.T) []byte {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := xssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(blk)
}

// Bad ssh settings are one-line setup errors that name the culprit, found
// before any host is dialled.
func TestSSHBadInputIsASetupError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*run.Config)
		want   string
	}{
		{"no hosts", func(c *run.Config) { c.Provider = sshp.Name }, "--provider ssh needs --inventory FILE or --hosts a,b,c"},
		{"both inventory and hosts", func(c *run.Config) {
			c.Provider, c.ProviderSettings = sshp.Name, provider.Values{"inventory": "lab.yaml", "hosts": "a"}
		}, "--inventory and --hosts both name the hosts"},
		{"inventory without ssh", func(c *run.Config) { c.ProviderSettings = provider.Values{"inventory": "lab.yaml"} }, "need --provider ssh"},
		{"cluster settings", func(c *run.Config) {
			c.Provider, c.ProviderSettings, c.ClusterParams = sshp.Name, provider.Values{"hosts": "a"}, map[string]string{"tick-ms": "10"}
		}, `--cluster-opt: redis: unknown cluster param "tick-ms" (redis has none)`},
		{"missing inventory", func(c *run.Config) {
			c.Provider, c.ProviderSettings = sshp.Name, provider.Values{"inventory": "testdata/none.yaml"}
		}, "inventory testdata/none.yaml: no such file or directory"},
		{"bad hosts", func(c *run.Config) { c.Provider, c.ProviderSettings = sshp.Name, provider.Values{"hosts": "a,,b"} }, "--hosts: entry 2: no address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testkit.Config(t, "redis-set-nx-px")
			cfg.Provider = run.Providers[0]
			tc.change(&cfg)
			_, err := run.Run(context.Background(), cfg)
			var se *run.SetupError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want a one-line run.SetupError containing %q", err, tc.want)
			}
		})
	}
}
