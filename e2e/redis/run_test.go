package redis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/workloads"
)

func TestNoFaultRunsAreValid(t *testing.T) {
	gate.Need(t, "redis-server")
	for _, impl := range []string{"redis-set-nx-px", "redis-setnx-expire", "redis-setnx-getset", "redis-naive-del"} {
		t.Run(impl, func(t *testing.T) {
			cfg := testkit.Config(t, impl)
			// A lease outlived by a descheduled holder is a real violation,
			// which a fully loaded machine made with 1 s leases (CI run 19:
			// a holder wrote 1.18 s after its acquire). Leases of 5 s keep
			// the test about the lock, not about the machine's scheduler.
			cfg.TTL = 5 * time.Second
			out, _ := testkit.MustRun(t, cfg)
			r := out.Results
			if r.Valid != checker.Valid {
				t.Errorf("verdict %s, want valid; anomalies %v: %q", r.Valid, testkit.Kinds(r), testkit.FirstAnomalies(r))
			}
			if cs := r.Stats["critical_sections"]; cs < 50 {
				t.Errorf("%v critical sections, want at least 50", cs)
			}
			if acc := testkit.Result(t, r, "resource").Stats["writes_accepted"]; acc < 50 {
				t.Errorf("%v accepted writes, want at least 50", acc)
			}
			assertVersions(t, cfg, out)
		})
	}
}

// assertVersions checks the versions the stored results.json of a run of
// a single-node Redis impl carries: the redis-server's own (the one
// `redis-server --version` reports, for local processes), the impl's
// client library as this binary's build info gives it (the workers are
// this binary), and locktest's.
func assertVersions(t *testing.T, cfg run.Config, out *run.Outcome) {
	t.Helper()
	stored, err := runstore.ReadResults(out.Dir)
	if err != nil {
		t.Fatal(err)
	}
	v := stored.Run.Versions
	server := v.Servers["redis"]
	if cfg.Provider == "docker" {
		if server == "" || strings.HasPrefix(server, "unknown") || len(v.Servers) != 1 {
			t.Errorf("server versions %v, want redis's", v.Servers)
		}
	} else {
		b, err := exec.Command("redis-server", "--version").Output()
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`\bv=(\S+)`).FindSubmatch(b)
		if m == nil || len(v.Servers) != 1 || server != string(m[1]) {
			t.Errorf("server versions %v, want redis %q (redis-server --version: %q)", v.Servers, m, b)
		}
	}
	const goRedis = "github.com/redis/go-redis/v9"
	if want := runstore.LibraryVersions([]string{goRedis}); len(v.Clients) != 1 || v.Clients[goRedis] != want[goRedis] {
		t.Errorf("client versions %v, want %v", v.Clients, want)
	}
	if v.Locktest == "" || v.Locktest != runstore.Version() {
		t.Errorf("locktest version %q, want %q", v.Locktest, runstore.Version())
	}
}

// assertPausesHeld checks that every paused client was stopped right after
// an acquire ok and recorded nothing until its resume began. The file order
// is exact here: a worker's ops and its pause-point report travel one pipe,
// the pause's ok is recorded while the worker is stopped at the point, and
// it is let go only by the heal, after the resume's invoke was recorded.
func assertPausesHeld(t *testing.T, h history.History) {
	t.Helper()
	paused := map[int]bool{}
	last := map[int]history.Op{} // each process's latest op
	for _, o := range h {
		if o.IsNemesis() {
			var p int
			if o.F == "resume-client" && o.Type == history.Invoke {
				// The heal resumes the worker before its ok is recorded;
				// one fault is active at a time, so this ends every pause.
				clear(paused)
				continue
			}
			if o.F != "pause-client" || o.Type != history.OK {
				continue
			}
			if len(o.Value.Targets) != 1 {
				t.Fatalf("pause-client targets %q, want one process", o.Value.Targets)
			}
			if _, err := fmt.Sscanf(o.Value.Targets[0], "p%d", &p); err != nil {
				t.Fatalf("pause-client target %q", o.Value.Targets[0])
			}
			paused[p] = true
			if l := last[p]; l.F != history.Acquire || l.Type != history.OK {
				t.Errorf("p%d was paused after %s %s, not right after an acquire ok", p, l.F, l.Type)
			}
			continue
		}
		if paused[o.Process] {
			t.Errorf("paused p%d recorded op %d (%s %s)", o.Process, o.Index, o.F, o.Type)
		}
		last[o.Process] = o
	}
}

func TestPauseClientBreaksAnUnfencedResource(t *testing.T) {
	gate.Need(t, "redis-server")
	out, h := testkit.Reproduce(t, testkit.PauseConfig(t, "redis-set-nx-px", workloads.ModeNone), func(o *run.Outcome, _ history.History) bool {
		k := testkit.Kinds(o.Results)
		return k["lost-update"]+k["overlapping-holds"] > 0
	})
	if n := testkit.NemesisOps(h, "pause-client", history.OK); n < 2 {
		t.Fatalf("%d client pauses applied, want at least 2", n)
	}
	if testkit.NemesisOps(h, "resume-client", history.OK) < testkit.NemesisOps(h, "pause-client", history.OK) {
		t.Errorf("a paused client was not resumed")
	}
	assertPausesHeld(t, h)
	k := testkit.Kinds(out.Results)
	if out.Results.Valid != checker.Invalid || k["lost-update"]+k["overlapping-holds"] == 0 {
		t.Fatalf("verdict %s, anomalies %v: want a lost update or overlapping holds", out.Results.Valid, k)
	}
	for _, c := range out.Results.Checkers {
		for _, a := range c.Anomalies {
			if len(a.Ops) < 2 || a.Explanation == "" {
				t.Errorf("anomaly %s does not name its ops: %+v", a.Kind, a)
			}
			for _, i := range a.Ops {
				if i < 0 || i >= len(h) || h[i].Index != i {
					t.Errorf("anomaly %s names op %d, not in the history", a.Kind, i)
				}
			}
		}
	}
}

func TestFencingRejectsTheStaleWrites(t *testing.T) {
	gate.Need(t, "redis-server")
	out, h := testkit.Reproduce(t, testkit.PauseConfig(t, "redis-set-nx-px", workloads.ModeFenced), func(o *run.Outcome, _ history.History) bool {
		return testkit.Result(t, o.Results, "resource").Stats["saved_by_fencing"] >= 1 || o.Results.Valid != checker.Valid
	})
	if n := testkit.NemesisOps(h, "pause-client", history.OK); n < 2 {
		t.Fatalf("%d client pauses applied, want at least 2", n)
	}
	res := testkit.Result(t, out.Results, "resource")
	if res.Stats["token_regressions"] != 0 {
		t.Errorf("%v token regressions accepted by a fenced store", res.Stats["token_regressions"])
	}
	if res.Stats["saved_by_fencing"] < 1 {
		t.Errorf("no stale write rejected by fencing; stats %v", res.Stats)
	}
	// A fenced store rejects a token older than one it has seen. A stale
	// write that reaches it before any write of the newer holder does is
	// one it cannot tell: under stress-ng (at 0f6bb8c) a holder whose
	// 300 ms lease had ended 107 ms before wrote 3 ms before the new
	// holder's first write, and both were accepted. That is the window
	// fencing leaves open, not a fault of the store: with no token
	// regression accepted, every stale write was of that kind, and the
	// run is logged. Any other anomaly fails the test.
	k := testkit.Kinds(out.Results)
	if out.Results.Valid == checker.Valid && len(k) == 0 {
		return
	}
	window := k["stale-write"] > 0 && res.Stats["token_regressions"] == 0
	for kind := range k {
		window = window && (kind == "stale-write" || kind == "lost-update")
	}
	if window {
		t.Logf("anomalies %v, none accepted after a newer token: stale writes that reached the store before the new holder's first write (the window fencing leaves open)", k)
		return
	}
	t.Errorf("verdict %s, anomalies %v: the fenced store let stale writes through", out.Results.Valid, k)
}

func TestNaiveDelDeletesAnotherHoldersLock(t *testing.T) {
	gate.Need(t, "redis-server")
	out, _ := testkit.Reproduce(t, testkit.PauseConfig(t, "redis-naive-del", workloads.ModeNone), func(o *run.Outcome, _ history.History) bool {
		return testkit.Kinds(o.Results)["foreign-release"] > 0
	})
	if k := testkit.Kinds(out.Results); k["foreign-release"] == 0 {
		t.Fatalf("no foreign-release found; anomalies %v", k)
	}
}

func TestKillNodeIsRecordedAndHealed(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := testkit.Config(t, "redis-set-nx-px")
	cfg.Faults = []string{"kill-node"}
	// Three seconds of quiet after the faults: under stress-ng a restart
	// took 3.2 s to go in, and go-redis, once a pool has seen as many dial
	// errors as it has connections, answers with the last one for up to a
	// second before it dials again, so a 1 s quiet time left no acquire
	// after the restart.
	cfg.Duration, cfg.Quiet = 8*time.Second, 3*time.Second
	cfg.Interval = time.Second
	nemesis.Down.Set(&cfg.FaultSettings, 500*time.Millisecond)
	_, h := testkit.MustRun(t, cfg)
	kills, restarts := testkit.NemesisOps(h, "kill-node", history.OK), testkit.NemesisOps(h, "restart-node", history.OK)
	if kills < 1 || restarts < kills {
		t.Fatalf("%d kills, %d restarts", kills, restarts)
	}
	// Clients saw the node die (refused connections are certain failures),
	// and got the lock again after the first restart.
	var refused, okAfter int
	var firstRestart int64 = -1
	for _, o := range h {
		switch {
		case o.IsNemesis() && o.F == "restart-node" && o.Type == history.OK && firstRestart < 0:
			firstRestart = o.Time
		case o.F == history.Acquire && o.Type == history.Fail && strings.Contains(o.Error, "connection refused"):
			refused++
		case o.F == history.Acquire && o.Type == history.OK && firstRestart >= 0:
			okAfter++
		}
	}
	if refused == 0 || okAfter == 0 {
		t.Errorf("%d acquires refused (want > 0), %d acquired after the first restart (want > 0)", refused, okAfter)
	}
}

func TestBadConfigIsASetupError(t *testing.T) {
	tests := []struct {
		change func(*run.Config)
		want   string
	}{
		{func(c *run.Config) { c.Impl = "no-such-lock" }, `--impl: unknown impl "no-such-lock"`},
		{func(c *run.Config) { c.Faults = []string{"meteor"} }, `unknown fault "meteor"`},
		{func(c *run.Config) { c.Clients = 0 }, "--clients must be at least 1"},
		{func(c *run.Config) { c.Locks = 0 }, "--locks must be at least 1"},
		{func(c *run.Config) { c.TTL = 500 * time.Microsecond }, "--ttl must be at least 1ms"},
		{func(c *run.Config) { c.Duration = 0 }, "--time must be positive"},
		{func(c *run.Config) { c.Timeout = 0 }, "--op-timeout must be positive"},
		{func(c *run.Config) { c.Interval = 0 }, "--interval must be positive"},
		{func(c *run.Config) { c.Mode = "fencing" }, `unknown resource mode "fencing"`},
		{func(c *run.Config) { c.Impl, c.Mode = "redis-naive-del", workloads.ModeFenced }, "grants none"},
		{func(c *run.Config) { c.Name = "../x" }, "plain folder name"},
		{func(c *run.Config) { c.Expect = "maybe" }, "--expect"},
		{func(c *run.Config) { nemesis.PausePoint.Set(&c.FaultSettings, "nowhere") }, "--pause-point"},
		{func(c *run.Config) { c.Work, c.WorkMin = time.Second, 2*time.Second }, "--work-min must be between 0 and --work"},
		{func(c *run.Config) { nemesis.ClockDirection.Set(&c.FaultSettings, "sideways") }, "--clock-direction must be forward or backward"},
		{func(c *run.Config) { c.Stagger = -time.Second }, "--stagger must not be negative"},
		{func(c *run.Config) { c.Faults = []string{"pause-client+meteor"} }, `unknown fault "pause-client+meteor"`},
		{func(c *run.Config) {
			c.Faults, c.Targets = []string{"pause-client"}, map[string][]string{"kill-node": {"n1"}}
		}, `--target names fault "kill-node"`},
		{func(c *run.Config) { c.Faults = []string{"kill-node+partition"} }, "--faults partition needs --partition"},
		{func(c *run.Config) { c.Persistence = "sometimes" }, `--persistence must be off, everysec, always, got "sometimes"`},
		{func(c *run.Config) { c.Impl, c.Persistence = "zk-recipe", "always" }, "--persistence is a setting of redis, redis-sentinel, redis-cluster only, and zk-recipe runs zookeeper"},
		{func(c *run.Config) { c.Subnet = "10.77.1.0/16" }, `--subnet "10.77.1.0/16": want an IPv4 /24`},
		{func(c *run.Config) { c.Subnet = "10.77.1.0/24" }, "--subnet is the subnet of the run's network namespaces, and this run has none"},
		{func(c *run.Config) { c.Faults, c.Net, c.Subnet = []string{"isolate"}, run.NetLoopback, "10.77.1.0/24" }, "this run has none"},
		{func(c *run.Config) {
			c.Faults = []string{"partition"}
			nemesis.Partition.Set(&c.FaultSettings, [][]string{{"n1"}, {"h2"}})
		}, `--partition: host "h2"`},
		{func(c *run.Config) {
			c.Faults = []string{"partition"}
			nemesis.Partition.Set(&c.FaultSettings, [][]string{{"n1", "c5"}, {"n2"}})
		}, "--partition: host c5: the run has client hosts c0 to c4"},
		{func(c *run.Config) { nemesis.ClockBump.Set(&c.FaultSettings, -time.Second) }, "--clock-bump must not be negative"},
		{func(c *run.Config) { c.Faults, c.Quiet = []string{"pause-client"}, c.Duration }, "--quiet-time must be at least 0 and shorter than --time"},
		{func(c *run.Config) { c.Net = "wifi" }, `--net must be auto, netns, loopback, got "wifi"`},
	}
	for _, tt := range tests {
		cfg := run.DefaultConfig()
		cfg.StoreDir = t.TempDir()
		tt.change(&cfg)
		_, err := run.Run(context.Background(), cfg)
		var se *run.SetupError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err %v, want a run.SetupError containing %q", err, tt.want)
		}
		if ents, _ := os.ReadDir(cfg.StoreDir); len(ents) != 0 {
			t.Errorf("a refused run left %d entries in the store", len(ents))
		}
	}
}
