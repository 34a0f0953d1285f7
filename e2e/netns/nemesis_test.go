package netns_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/faultops"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
)

func needNetns(t *testing.T) {
	t.Helper()
	gate.Need(t, "redis-server")
	if err := netns.Check(); err != nil {
		t.Skip(err)
	}
}

// faultConfig is a short run of a single Redis lock with the given faults.
func faultConfig(t *testing.T, faults ...string) run.Config {
	cfg := testkit.Config(t, "redis-set-nx-px")
	cfg.Faults = faults
	cfg.TTL = 500 * time.Millisecond
	cfg.Timeout = 300 * time.Millisecond
	cfg.Interval = 300 * time.Millisecond
	nemesis.Window.Set(&cfg.FaultSettings, 600*time.Millisecond)
	cfg.Duration = 5 * time.Second
	cfg.Quiet = 1500 * time.Millisecond
	return cfg
}

// TestNetworkFaultsCutAndHeal runs clients and the node in network
// namespaces with client-isolate and loss: while a client is cut off, its
// requests time out (info, or fail when certainly not applied); after the
// last heal every client acquires again.
func TestNetworkFaultsCutAndHeal(t *testing.T) {
	testkit.LocalOnly(t, "client-isolate needs each client in a namespace of its own")
	needNetns(t)
	cfg := faultConfig(t, "client-isolate", "loss")
	nemesis.Loss.Set(&cfg.FaultSettings, 1) // every packet: a loss window is a partition of the node
	// Room after the last heal for every client, reconnecting, to get a turn:
	// on a loaded machine the heal's iptables calls alone can take seconds.
	cfg.Think = 5 * time.Millisecond
	cfg.Duration, cfg.Quiet = 11*time.Second, 8*time.Second
	out, h := testkit.MustRun(t, cfg)
	defer testkit.AssertLabGone(t, out.Results.Run.Lab)
	if !strings.HasPrefix(out.Results.Run.Network, "netns 10.77.") {
		t.Errorf("network %q, want the run's namespaces", out.Results.Run.Network)
	}
	seq := testkit.NemesisSeq(h)
	var cuts, heals int
	for _, s := range seq {
		switch {
		case strings.HasPrefix(s, "partition-client-isolate c"), strings.HasPrefix(s, "loss n1@100%"):
			cuts++
		case strings.HasPrefix(s, "heal-network"):
			heals++
		}
	}
	if cuts == 0 || heals < cuts {
		t.Fatalf("%d cuts and %d heals in %v", cuts, heals, seq)
	}
	// During fault windows some operation timed out; after the final heal,
	// every live client acquired again.
	var lastHeal int64
	for _, o := range h {
		if o.IsNemesis() && o.F == "heal-network" {
			lastHeal = o.Time
		}
	}
	timeouts := 0
	after := map[int]bool{}
	for _, o := range h {
		if !o.IsNemesis() && o.Type != history.OK && o.Type != history.Invoke && testkit.TimedOut(o.Error) {
			timeouts++
		}
		if o.F == history.Acquire && o.Type == history.OK && o.Time > lastHeal {
			after[o.Process] = true
		}
	}
	if timeouts == 0 {
		t.Error("no operation timed out while clients were cut off")
	}
	if len(after) < cfg.Clients {
		t.Errorf("after the last heal only processes %v acquired; want all %d", after, cfg.Clients)
	}
}

// TestSameSeedSameFaults runs twice with one seed and compares the nemesis
// ops: the same faults on the same targets in the same order. Seed 42 picks
// clock-bump, client-isolate, clock-bump, clock-bump first; the nemesis has
// 5.5 s, room for about five faults, and the comparison needs two in each
// run.
func TestSameSeedSameFaults(t *testing.T) {
	testkit.LocalOnly(t, "its schedule includes client-isolate, which needs each client in a namespace of its own")
	needNetns(t)
	var seqs [][]string
	for i := 0; i < 2; i++ {
		cfg := faultConfig(t, "client-isolate", "kill-client", "pause-node", "clock-bump")
		cfg.Seed = 42
		cfg.Duration = 7 * time.Second
		out, h := testkit.MustRun(t, cfg)
		testkit.AssertLabGone(t, out.Results.Run.Lab)
		seqs = append(seqs, testkit.NemesisSeq(h))
	}
	n := min(len(seqs[0]), len(seqs[1]))
	if n < 4 {
		t.Fatalf("too few nemesis ops to compare: %v", seqs)
	}
	if !slices.Equal(seqs[0][:n], seqs[1][:n]) {
		t.Errorf("same seed, different faults:\n%s\n---\n%s", strings.Join(seqs[0], "\n"), strings.Join(seqs[1], "\n"))
	}
	kinds := map[string]bool{}
	for _, s := range seqs[0] {
		kinds[strings.Fields(s)[0]] = true
	}
	if len(kinds) < 4 {
		t.Errorf("only %v happened in %v", kinds, seqs[0])
	}
}

// TestReplayInjectsTheSameFaults runs a seeded schedule, then replays its
// schedule.json (--schedule) under another workload seed, and compares the
// nemesis ops: the same injections, with the same targets and durations,
// in the same order, and the same heals. The replay runs 3 s longer, so
// that a late injection on a loaded machine is not left out at the end of
// its fault phase; replayed heals run on timers of their own, so only
// their set is compared. How many faults fit in the first run's 6.5 s of
// faults depends on the machine's load (3 under stress-ng, 5 idle); the
// comparison needs two.
func TestReplayInjectsTheSameFaults(t *testing.T) {
	testkit.LocalOnly(t, "its schedule includes client-isolate, which needs each client in a namespace of its own")
	needNetns(t)
	cfg := faultConfig(t, "client-isolate", "kill-client", "pause-node", "clock-bump")
	cfg.Seed = 42
	cfg.Duration = 8 * time.Second
	out, h := testkit.MustRun(t, cfg)
	schedule := filepath.Join(out.Dir, runstore.ScheduleFile)
	if err := schemacheck.ValidateFile("schedule", schedule); err != nil {
		t.Fatal(err)
	}
	plan, err := run.ReadSchedule(schedule)
	if err != nil {
		t.Fatal(err)
	}
	wantInj, wantHeals := faultops.Lines(h)
	if len(plan.Faults) < 2 || len(plan.Faults) != len(wantInj) {
		t.Fatalf("schedule.json has %d faults for %d injections, want one each and at least 2", len(plan.Faults), len(wantInj))
	}

	replay := faultConfig(t)
	replay.Schedule, replay.Seed = schedule, 43
	// A replay injects a fault only after the heals its schedule shows
	// before it, so a slow heal delays every fault after it: under
	// stress-ng a client-isolate's heal took 4.6 s instead of 1.2, and the
	// last clock jump no longer fitted in a replay 3 s longer than the
	// run. 10 s more leave room.
	replay.Duration = cfg.Duration + 10*time.Second
	rout, rh := testkit.MustRun(t, replay)
	testkit.AssertLabGone(t, rout.Results.Run.Lab)
	gotInj, gotHeals := faultops.Lines(rh)
	if !slices.Equal(gotInj, wantInj) {
		t.Errorf("the replay's injections differ:\n got %q\nwant %q", gotInj, wantInj)
	}
	if !slices.Equal(gotHeals, wantHeals) {
		t.Errorf("the replay's heals differ:\n got %q\nwant %q", gotHeals, wantHeals)
	}
	if !slices.Equal(rout.Results.Run.Faults, plan.FaultNames()) {
		t.Errorf("the replay's faults are %v, want the schedule's %v", rout.Results.Run.Faults, plan.FaultNames())
	}
	again, err := run.ReadSchedule(filepath.Join(rout.Dir, runstore.ScheduleFile))
	if err != nil {
		t.Fatal(err)
	}
	if again.ReplayOf != schedule || len(again.Faults) != len(plan.Faults) {
		t.Errorf("the replay's own schedule: replay_of %q, %d faults; want %q and %d", again.ReplayOf, len(again.Faults), schedule, len(plan.Faults))
	}
}

// TestKillClientReplacesTheWorker kills workers while they hold the lock;
// each replacement is a new process, and the lock is acquired again once
// the dead holder's lease ran out.
func TestKillClientReplacesTheWorker(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := faultConfig(t, "kill-client")
	nemesis.KillHolder.Set(&cfg.FaultSettings, true)
	out, h := testkit.MustRun(t, cfg)
	var replaced []string
	for _, o := range h {
		if o.IsNemesis() && o.F == "replace-client" && o.Type == history.OK {
			replaced = append(replaced, o.Value.Targets...)
		}
	}
	if len(replaced) == 0 {
		t.Fatalf("no client replaced: %v", testkit.NemesisSeq(h))
	}
	procs := map[int]bool{}
	for _, o := range h {
		if !o.IsNemesis() {
			procs[o.Process] = true
		}
	}
	if len(procs) <= cfg.Clients {
		t.Errorf("processes %v: the replacements recorded nothing", procs)
	}
	if out.Results.Stats["critical_sections"] < 10 {
		t.Errorf("only %v critical sections", out.Results.Stats["critical_sections"])
	}
}

// TestClockBumpMovesTheNodeClock runs the node under the clock shim and
// checks each bump was recorded and undone.
func TestClockBumpMovesTheNodeClock(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := faultConfig(t, "clock-bump")
	out, h := testkit.MustRun(t, cfg)
	if out.Results.Run.Clock != "clock shim" {
		t.Fatalf("clock %q, want the shim", out.Results.Run.Clock)
	}
	bumps, resets := 0, 0
	for _, o := range h {
		if o.IsNemesis() && o.Type == history.OK {
			switch o.F {
			case "clock-bump":
				bumps++
				if len(o.Value.Targets) != 1 || !strings.HasPrefix(o.Value.Targets[0], "n1") {
					t.Errorf("bump targets %v", o.Value.Targets)
				}
			case "clock-restore":
				resets++
			}
		}
	}
	if bumps == 0 || resets < bumps {
		t.Fatalf("%d bumps, %d resets", bumps, resets)
	}
	// The node's offset file exists and reads zero at the end.
	b, err := os.ReadFile(filepath.Join(out.Dir, "clocks", "n1.clock"))
	if err != nil || len(b) < 8 {
		t.Fatalf("offset file: %v", err)
	}
	for _, x := range b[:8] {
		if x != 0 {
			t.Errorf("offset left at %x", b[:8])
			break
		}
	}
}

// TestUnavailableFaultsAreReported asks for a partition on loopback: the
// fault is left out with its reason, the rest of the run goes on.
func TestUnavailableFaultsAreReported(t *testing.T) {
	testkit.LocalOnly(t, "it checks the loopback network of the local provider; TestDockerPartitions checks unavailable faults under docker")
	gate.Need(t, "redis-server")
	cfg := faultConfig(t, "client-isolate", "pause-node")
	cfg.Net = run.NetLoopback
	out, err := run.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	errs := strings.Join(out.Results.Run.Errors, "\n")
	if !strings.Contains(errs, "client-isolate") || !strings.Contains(errs, "loopback") {
		t.Errorf("run errors %q do not explain the missing partition", errs)
	}
	if out.Results.Run.Network != "loopback" {
		t.Errorf("network %q", out.Results.Run.Network)
	}
	h, err := history.ReadFile(filepath.Join(out.Dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if seq := testkit.NemesisSeq(h); !slices.ContainsFunc(seq, func(s string) bool { return strings.HasPrefix(s, "pause-node") }) {
		t.Errorf("pause-node did not run: %v", seq)
	}
}

// TestDelayMakesRequestsSlow adds more latency than the op timeout: while
// the node is delayed, operations time out; the op names the mechanism
// (tc netem where the kernel has it, else the delaying proxy).
func TestDelayMakesRequestsSlow(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := faultConfig(t, "delay")
	nemesis.Delay.Set(&cfg.FaultSettings, 400*time.Millisecond)
	out, h := testkit.MustRun(t, cfg)
	// The run says how it made the delay, and why.
	if n := out.Results.Run.Network; !strings.Contains(n, "delay by tc netem") && !strings.Contains(n, "delay by a TCP proxy: ") {
		t.Errorf("network %q does not say how the delay was made", n)
	}
	var delays int
	for _, s := range testkit.NemesisSeq(h) {
		if strings.HasPrefix(s, "delay n1+400ms(") {
			delays++
		}
	}
	if delays == 0 {
		t.Fatalf("no delay recorded: %v", testkit.NemesisSeq(h))
	}
	var slow, okAfter int
	var lastHeal int64
	for _, o := range h {
		if o.IsNemesis() && o.F == "heal-delay" {
			lastHeal = o.Time
		}
	}
	for _, o := range h {
		if !o.IsNemesis() && o.Type != history.OK && o.Type != history.Invoke && testkit.TimedOut(o.Error) {
			slow++
		}
		if o.F == history.Acquire && o.Type == history.OK && o.Time > lastHeal {
			okAfter++
		}
	}
	if slow == 0 || okAfter == 0 {
		errs := map[string]int{}
		for _, o := range h {
			if o.Error != "" {
				errs[o.F+" "+o.Error]++
			}
		}
		t.Errorf("%d timed-out ops during delays (want > 0), %d acquires after the heal (want > 0); errors %v", slow, okAfter, errs)
	}
}

// TestRedlockSurvivesIsolatedNodes isolates one Redlock node at a time:
// acquires keep succeeding on the majority while a node is cut off, none
// granted by that node, and the run stays valid.
//
// The schedule is pinned: isolate is the only fault. The first comes at
// most 450 ms into the workload and stays 2 s; the nemesis runs 8.5 s of
// the 10 s, so the isolate goes in and is healed before it stops even
// where, on a loaded machine, the 36 iptables rules of an isolate (one
// `ip netns exec` each) take seconds to go in.
func TestRedlockSurvivesIsolatedNodes(t *testing.T) {
	needNetns(t)
	cfg := faultConfig(t, "isolate")
	cfg.Impl = "redlock"
	cfg.Mode = "check-and-set"
	cfg.TTL = time.Second
	cfg.Timeout = 500 * time.Millisecond
	nemesis.Window.Set(&cfg.FaultSettings, 2*time.Second)
	cfg.Duration = 10 * time.Second
	out, h := testkit.MustRun(t, cfg)
	defer testkit.AssertLabGone(t, out.Results.Run.Lab)
	if out.Results.Valid != checker.Valid {
		t.Errorf("verdict %s; anomalies %v", out.Results.Valid, testkit.Kinds(out.Results))
	}
	isolates, healed, during := testkit.IsolatedAcquires(t, h)
	if isolates == 0 || healed < isolates || during == 0 {
		t.Errorf("%d isolates, %d healed, %d acquires during them; want isolates > 0, each healed, acquires > 0: %v",
			isolates, healed, during, testkit.NemesisSeq(h))
	}
}

// TestKillBetweenSetNXAndExpireLeavesAStuckLock kills clients of
// redis-setnx-expire between its SETNX and its PEXPIRE: the lock has no TTL
// and nobody can ever take it again, which liveness reports.
func TestKillBetweenSetNXAndExpireLeavesAStuckLock(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := faultConfig(t, "kill-client")
	cfg.Impl = "redis-setnx-expire"
	cfg.FaultSettings = cfg.FaultSettings.With(nemesis.KillHolder.Is(true), nemesis.PausePoint.Is("between-setnx-expire"))
	cfg.Duration, cfg.Quiet = 12*time.Second, 8*time.Second
	// The kill must land while a client is between its two commands, which
	// only the client that won SETNX reaches: three seeds to get there.
	out, h := testkit.Reproduce(t, cfg, func(o *run.Outcome, _ history.History) bool { return testkit.Kinds(o.Results)["stuck-lock"] > 0 })
	if k := testkit.Kinds(out.Results); k["stuck-lock"] != 1 {
		t.Fatalf("anomalies %v, want one stuck-lock; nemesis ops %v", k, testkit.NemesisSeq(h))
	}
	if out.Results.Valid != checker.Invalid {
		t.Errorf("verdict %s, want invalid", out.Results.Valid)
	}
}
