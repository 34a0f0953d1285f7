package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/delayproxy"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/clusters/netrules"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// TestFaultKeepsFollowsTheRegistry checks the give-back rule of each
// kind of fault against the facts the nemesis registers: faults that
// cut power, move node clocks, slow disks or hit every node at once stop
// the cluster; the others give it back; and every registered fault is
// decided from its facts, an unknown one never kept.
func TestFaultKeepsFollowsTheRegistry(t *testing.T) {
	for _, tt := range []struct {
		fault string
		keeps bool
	}{
		{"noop", true}, {"kill-node", true}, {"pause-node", true}, {"kill-on-grant", true},
		{"pause-client", true}, {"kill-client", true}, {"partition", true}, {"isolate", true}, {"delay", true},
		{"kill-all", false}, {"power-loss", false}, {"power-loss-all", false}, {"slow-disk", false},
		{"clock-bump", false}, {"clock-reset", false}, {"clock-strobe", false},
		{"no-such-fault", false},
	} {
		t.Run(tt.fault, func(t *testing.T) {
			why := faultKeeps(tt.fault)
			if (why == "") != tt.keeps {
				t.Errorf("faultKeeps(%q) = %q, want a cluster kept: %v", tt.fault, why, tt.keeps)
			}
			if why != "" && !strings.Contains(why, tt.fault) {
				t.Errorf("faultKeeps(%q) = %q: the reason does not name the fault", tt.fault, why)
			}
		})
	}
	for _, s := range nemesis.Specs() {
		hurts := s.Whole
		for _, n := range s.Needs {
			hurts = hurts || n == nemesis.NeedPowerCut || n == nemesis.NeedClocks || n == nemesis.NeedSyncDelay
		}
		if (faultKeeps(s.Name) == "") == hurts {
			t.Errorf("%s: faultKeeps says %q, which its registered facts (needs %v, whole %v) do not", s.Name, faultKeeps(s.Name), s.Needs, s.Whole)
		}
	}
}

// TestClusterKeyMatchesWhatShapesTheCluster checks which differences of
// two runs' settings let one take the other's kept cluster: only an
// impl of the same backend and size may differ; the backend, its size,
// persistence, cluster params, the node program's environment and a
// set-up the cluster depends on (sync records, a delaying proxy) may not.
func TestClusterKeyMatchesWhatShapesTheCluster(t *testing.T) {
	ctx := context.Background()
	base := providerConfig(t, "redis-set-nx-px")
	key := func(t *testing.T, cfg Config, edit func(*providerSetup)) (string, string) {
		t.Helper()
		impl, err := cfg.ImplInfo()
		if err != nil {
			t.Fatal(err)
		}
		prov, err := setupProvider(ctx, cfg, impl, t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer prov.close(ctx, slog.New(slog.DiscardHandler))
		if edit != nil {
			edit(prov)
		}
		return clusterKey(cfg, impl, prov)
	}
	want, why := key(t, base, nil)
	if why != "" {
		t.Fatalf("a plain local run of redis cannot be kept: %s", why)
	}
	for _, tt := range []struct {
		name    string
		edit    func(*Config)
		prov    func(*providerSetup)
		same    bool
		whyWith string // a part of the reason it cannot be kept at all
	}{
		{name: "the same settings", edit: func(*Config) {}, same: true},
		{name: "another impl of the backend", edit: func(c *Config) { c.Impl = "redis-naive-del" }, same: true},
		{name: "another seed and workload", edit: func(c *Config) { c.Seed, c.Clients, c.TTL = 99, 3, 2*time.Second }, same: true},
		{name: "a fault that needs nothing of the set-up", edit: func(c *Config) { c.Faults = []string{"kill-node"} }, same: true},
		{name: "another backend", edit: func(c *Config) { c.Impl = "etcd-mutex" }},
		{name: "another size", edit: func(c *Config) { c.Impl = "redlock" }},
		{name: "persistence", edit: func(c *Config) { c.Persistence = "always" }},
		{name: "the node program's environment", edit: func(c *Config) { c.NodeEnv = append(c.NodeEnv, "X=1") }},
		{name: "sync records", edit: func(*Config) {}, prov: func(p *providerSetup) { p.syncs = true }, whyWith: "syncs"},
		{name: "a delaying proxy", edit: func(*Config) {}, prov: func(p *providerSetup) { p.proxy = delayproxy.New() }, whyWith: "proxy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.NodeEnv = append([]string(nil), base.NodeEnv...)
			tt.edit(&cfg)
			got, why := key(t, cfg, tt.prov)
			checkKey(t, got, why, want, tt.whyWith, tt.same)
		})
	}
}

// checkKey checks a run's key got (or why it cannot be kept) against the
// base key want: refused naming whyWith when that is set, else kept, with
// the base's key exactly when same.
func checkKey(t *testing.T, got, why, want, whyWith string, same bool) {
	t.Helper()
	switch {
	case whyWith != "":
		if why == "" || !strings.Contains(why, whyWith) {
			t.Errorf("kept with key %s, want it refused naming %q (got %q)", got, whyWith, why)
		}
	case why != "":
		t.Errorf("cannot be kept: %s", why)
	case (got == want) != same:
		t.Errorf("key %s, base key %s: want the same %v", got, want, same)
	}
}

// fakeCluster is a hand-built cluster that counts its stops.
type fakeCluster struct {
	nodes []clusters.Node
	stops int
}

func (f *fakeCluster) Nodes() []clusters.Node          { return f.nodes }
func (f *fakeCluster) Start(ctx context.Context) error { return nil }
func (f *fakeCluster) Stop(ctx context.Context) error  { f.stops++; return nil }

// TestKeeperGivesBackOnlyAHealedCluster checks the keeper's rules on a
// hand-built cluster: a run judged unfit (a fault that hits every node,
// an interrupted run, a heal that failed, a lost host, a cluster that
// could never be kept) stops its cluster, with the reason in its
// results; one judged fit gives it back, its logs/ then holds only what
// the nodes logged while the run had it, and a later run takes it only
// with the same key; a keeper closed meanwhile stops it instead; Close
// stops what it keeps.
func TestKeeperGivesBackOnlyAHealedCluster(t *testing.T) {
	ctx := context.Background()
	lg := slog.New(slog.DiscardHandler)
	newHeld := func(t *testing.T) (*Clusters, *fakeCluster, *heldCluster) {
		t.Helper()
		dir := t.TempDir()
		logPath := filepath.Join(dir, "n1.log")
		if err := os.WriteFile(logPath, []byte("earlier run\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cl := &fakeCluster{nodes: []clusters.Node{{Name: "n1", Addr: "127.0.0.1:1", LogPath: logPath}}}
		k := NewClusters()
		h := &heldCluster{k: &keptCluster{key: "K", cl: cl, startedBy: "first-run", log: newSwapHandler(lg.Handler()), runs: 1},
			logFrom: map[string]int64{"n1": int64(len("earlier run\n"))}, info: runstore.ClusterInfo{Reused: true, RunsBefore: 1}}
		k.hold(cl, h)
		if err := os.WriteFile(logPath, []byte("earlier run\nthis run\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return k, cl, h
	}
	for _, tt := range []struct {
		name        string
		faults      []string
		healErr     error
		interrupted bool
		lost        string
		unkeepable  string
		want        string // a part of the reason the cluster is not kept
	}{
		{name: "kill-all", faults: []string{"kill-node", "kill-all"}, want: "kill-all"},
		{name: "power loss", faults: []string{"power-loss"}, want: "power-loss"},
		{name: "interrupted", interrupted: true, want: "interrupted"},
		{name: "a failed heal", healErr: errors.New("heal pause-node: no such process"), want: "not healed"},
		{name: "a lost host", lost: "the host h1 did not answer", want: "h1"},
		{name: "never keepable", unkeepable: "the run's nodes are in its network lab", want: "network lab"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, cl, h := newHeld(t)
			if tt.unkeepable != "" {
				h.k, h.info.NotKept = nil, tt.unkeepable
			}
			info := k.judge(ctx, cl, tt.faults, tt.healErr, tt.interrupted, tt.lost, lg)
			if info == nil || info.Kept || !strings.Contains(info.NotKept, tt.want) {
				t.Fatalf("judged %+v, want not kept because of %q", info, tt.want)
			}
			rest := k.finish(ctx, cl, t.TempDir(), lg)
			switch {
			case tt.unkeepable != "" && rest != cl:
				t.Errorf("finish of a cluster that cannot be kept returned %v, want it for stopAll", rest)
			case tt.unkeepable == "" && (rest != nil || cl.stops != 1):
				t.Errorf("finish returned %v after %d stops, want nil after 1", rest, cl.stops)
			}
			if kept := k.keptKeys(); len(kept) > 0 {
				t.Errorf("kept %q", kept)
			}
		})
	}

	t.Run("given back", func(t *testing.T) {
		k, cl, h := newHeld(t)
		h.info.Kept = true // as judge leaves a healthy cluster
		logDir := t.TempDir()
		if rest := k.finish(ctx, cl, logDir, lg); rest != nil || cl.stops != 0 {
			t.Fatalf("finish returned %v after %d stops, want nil after none", rest, cl.stops)
		}
		b, err := os.ReadFile(filepath.Join(logDir, "n1.log"))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); !strings.HasPrefix(got, "# locktest: ") || !strings.Contains(got, "first-run") || !strings.HasSuffix(got, "\nthis run\n") || strings.Contains(got, "earlier run") {
			t.Errorf("the run's log of n1 is %q, want a first line naming first-run, then only this run's lines", got)
		}
		if h.k.runs != 2 {
			t.Errorf("the cluster served %d runs, want 2", h.k.runs)
		}
		if c := k.takeIdle("other key"); c != nil {
			t.Errorf("a run of another key took the cluster")
		}
		if c := k.takeIdle("K"); c == nil || c.cl != cl {
			t.Fatalf("a run of the same key did not take the cluster")
		}
		if c := k.takeIdle("K"); c != nil {
			t.Errorf("a second run took the cluster a run has")
		}
		k.mu.Lock()
		k.idle = append(k.idle, h.k)
		k.mu.Unlock()
		if err := k.Close(ctx); err != nil || cl.stops != 1 || len(k.keptKeys()) != 0 {
			t.Errorf("Close: %v, %d stops, kept %q; want it stopped once and nothing kept", err, cl.stops, k.keptKeys())
		}
	})

	t.Run("closed meanwhile", func(t *testing.T) {
		k, cl, h := newHeld(t)
		h.info.Kept = true
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if rest := k.finish(ctx, cl, t.TempDir(), lg); rest != nil || cl.stops != 1 || len(k.keptKeys()) != 0 {
			t.Errorf("finish after Close returned %v after %d stops, kept %q; want it stopped", rest, cl.stops, k.keptKeys())
		}
	})
}

// reuseConfig is a short run of impl with fault on the local provider,
// seeded, on this test binary's workers and node programs.
func reuseConfig(t *testing.T, impl, fault string, k *Clusters) Config {
	gate.Servers(t, "runs of "+impl)
	cfg := providerConfig(t, impl)
	cfg.Faults, cfg.Duration, cfg.Interval, cfg.Quiet, cfg.Clients = []string{fault}, 4*time.Second, time.Second, time.Second, 3
	if fault == "pause-node" || fault == "isolate" || fault == "client-isolate" {
		nemesis.Window.Set(&cfg.FaultSettings, 300*time.Millisecond)
	}
	if fault == "isolate" || fault == "client-isolate" {
		// Seed 7's first wait is then 1.9 s and its second 1.4 s: one
		// fault in the 3 s of faults, however slow the machine makes a
		// partition's rules go in, where a 1 s interval fits one or two.
		cfg.Interval = 2 * time.Second
	}
	cfg.Clusters = k
	return cfg
}

// TestReusedClusterGivesAFreshOnesVerdicts runs, on Redis (pausing its
// node) and on etcd (killing a client: a paused etcd member may lose its
// leadership, and a cluster whose roles moved is not kept), the same
// seed three times: twice through one keeper (the second run
// takes the first's cluster, reset and checked) and once without. The
// three give the same verdict and the same number of faults; the
// keeper started one cluster and reused it once; the reused run records
// so in its results and its logs hold only its own span; and Close
// stops the kept cluster's processes.
func TestReusedClusterGivesAFreshOnesVerdicts(t *testing.T) {
	for _, tt := range []struct{ impl, fault string }{{"redis-set-nx-px", "pause-node"}, {"etcd-mutex", "kill-client"}} {
		impl := tt.impl
		t.Run(impl, func(t *testing.T) {
			ctx := context.Background()
			k := NewClusters()
			defer k.Close(ctx)
			var outs []*Outcome
			for i, keeper := range []*Clusters{k, k, nil} {
				out, err := Run(ctx, reuseConfig(t, impl, tt.fault, keeper))
				if err != nil {
					t.Fatalf("run %d: %v", i+1, err)
				}
				outs = append(outs, out)
			}
			first, reused, fresh := outs[0].Results, outs[1].Results, outs[2].Results
			for i, r := range []runstore.Results{first, reused, fresh} {
				if r.Valid != first.Valid || r.Stats["faults_injected"] != first.Stats["faults_injected"] || r.Stats["faults_injected"] == 0 || len(r.Problems) > 0 {
					t.Errorf("run %d: %s with %v faults (problems %q), want the first run's %s with %v faults, and no problem",
						i+1, r.Valid, r.Stats["faults_injected"], r.Problems, first.Valid, first.Stats["faults_injected"])
				}
			}
			if c := first.Run.Cluster; c == nil || c.Reused || !c.Kept {
				t.Errorf("first run's cluster: %+v, want started and kept", c)
			}
			if c := reused.Run.Cluster; c == nil || !c.Reused || c.RunsBefore != 1 || c.StartedBy != outs[0].Dir || c.Reset != "checked: no residue" || !c.Kept {
				t.Errorf("second run's cluster: %+v, want reused after 1 run of %s, reset checked, kept", c, outs[0].Dir)
			}
			if c := fresh.Run.Cluster; c != nil {
				t.Errorf("a run without a keeper records a cluster: %+v", c)
			}
			for _, o := range outs[:2] {
				if err := schemacheck.ValidateFile("results", filepath.Join(o.Dir, runstore.ResultsFile)); err != nil {
					t.Error(err)
				}
			}
			if started, reusedN := k.Stats(); started != 1 || reusedN != 1 {
				t.Errorf("the keeper started %d clusters and reused %d, want 1 and 1", started, reusedN)
			}
			b, err := os.ReadFile(filepath.Join(outs[1].Dir, runstore.LogsDir, "n1.log"))
			if err != nil || !strings.HasPrefix(string(b), "# locktest: ") {
				t.Errorf("the reused run's log of n1 (%v) does not start with the line that names the first run's logs: %.200q", err, b)
			}
			pids := keptPids(t, k)
			if err := k.Close(ctx); err != nil {
				t.Fatal(err)
			}
			for name, pid := range pids {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil && pidAliveForTest(pid) {
					t.Errorf("node %s (pid %d) still runs after Close", name, pid)
				}
			}
		})
	}
}

// TestUnhealthyClusterIsNotReused checks the two ends of the keeper on
// Redis: a run with kill-all (which the registry says hits every node)
// stops its cluster, recording why, and the next run starts its own;
// a kept cluster whose node died while it was kept fails its check, is
// stopped, and the run starts a fresh one, saying why.
func TestUnhealthyClusterIsNotReused(t *testing.T) {
	ctx := context.Background()
	k := NewClusters()
	defer k.Close(ctx)
	cfg := reuseConfig(t, "redis-set-nx-px", "pause-node", k)
	cfg.Faults, cfg.FaultSettings = []string{"kill-all"}, nemesis.Defaults()
	nemesis.Down.Set(&cfg.FaultSettings, 300*time.Millisecond)
	out, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := out.Results.Run.Cluster; c == nil || c.Kept || !strings.Contains(c.NotKept, "kill-all") {
		t.Fatalf("a run with kill-all: cluster %+v, want not kept, naming kill-all", c)
	}
	if kept := k.keptKeys(); len(kept) != 0 {
		t.Fatalf("kept %d clusters after kill-all", len(kept))
	}

	// A healthy run keeps its cluster; then its node dies while kept.
	if _, err := Run(ctx, reuseConfig(t, "redis-set-nx-px", "pause-node", k)); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	if len(k.idle) != 1 {
		k.mu.Unlock()
		t.Fatalf("%d clusters kept after a healthy run, want 1", len(k.idle))
	}
	kept := k.idle[0].cl
	k.mu.Unlock()
	killer, ok := kept.(clusters.Killer)
	if !ok {
		t.Fatalf("%T kills no node", kept)
	}
	if err := killer.Kill(ctx, kept.Nodes()[0]); err != nil {
		t.Fatal(err)
	}
	out, err = Run(ctx, reuseConfig(t, "redis-set-nx-px", "pause-node", k))
	if err != nil {
		t.Fatal(err)
	}
	if c := out.Results.Run.Cluster; c == nil || c.Reused || !strings.Contains(c.Fresh, "failed its check") {
		t.Errorf("the run after the kept node died: cluster %+v, want a fresh one, saying the kept one failed its check", c)
	}
	if out.Results.Valid != checker.Valid {
		t.Errorf("the run on the fresh cluster: %s (%v)", out.Results.Valid, out.Results.Problems)
	}
	if started, reused := k.Stats(); started != 3 || reused != 0 {
		t.Errorf("the keeper started %d clusters and reused %d, want 3 and 0", started, reused)
	}
}

// keptPids returns the pids of the nodes of the clusters k keeps.
func keptPids(t *testing.T, k *Clusters) map[string]int {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.idle) != 1 {
		t.Fatalf("%d clusters kept, want 1", len(k.idle))
	}
	p, ok := k.idle[0].cl.(interface{ Pids() map[string]int })
	if !ok {
		t.Fatalf("%T gives no pids", k.idle[0].cl)
	}
	return p.Pids()
}

// pidAliveForTest reports whether pid runs and is no zombie.
func pidAliveForTest(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestReusedLabGivesAFreshOnesVerdicts runs, in the network lab, the same
// seed three times: twice through one keeper (the second run takes the
// first's cluster with its lab: the lab proven as made, the cluster reset
// and checked) and once without. On replicated Redis the fault isolates
// a node; on a single Redis it isolates a client host, so the second
// run's workers must go into the kept lab's client namespaces. The three
// give the same verdict and number of faults; the reused run names the
// first run's lab and says the lab was checked; and Close removes the
// kept cluster's processes and every namespace, link and FORWARD rule of
// its lab.
func TestReusedLabGivesAFreshOnesVerdicts(t *testing.T) {
	gate.Netns(t)
	for _, tt := range []struct{ impl, fault string }{{"redis-replicated", "isolate"}, {"redis-set-nx-px", "client-isolate"}} {
		t.Run(tt.impl+"/"+tt.fault, func(t *testing.T) {
			ctx := context.Background()
			k := NewClusters()
			defer k.Close(ctx)
			var outs []*Outcome
			for i, keeper := range []*Clusters{k, k, nil} {
				out, err := Run(ctx, reuseConfig(t, tt.impl, tt.fault, keeper))
				if err != nil {
					t.Fatalf("run %d: %v", i+1, err)
				}
				outs = append(outs, out)
			}
			first, reused, fresh := outs[0].Results, outs[1].Results, outs[2].Results
			for i, r := range []runstore.Results{first, reused, fresh} {
				if r.Valid != first.Valid || r.Stats["faults_injected"] != first.Stats["faults_injected"] || r.Stats["faults_injected"] == 0 || len(r.Problems) > 0 {
					t.Errorf("run %d: %s with %v faults (problems %q), want the first run's %s with %v faults, and no problem",
						i+1, r.Valid, r.Stats["faults_injected"], r.Problems, first.Valid, first.Stats["faults_injected"])
				}
				if r.Run.Lab == "" {
					t.Errorf("run %d has no network lab", i+1)
				}
			}
			if c := first.Run.Cluster; c == nil || c.Reused || !c.Kept {
				t.Fatalf("first run's cluster: %+v, want started and kept", c)
			}
			if c := reused.Run.Cluster; c == nil || !c.Reused || c.RunsBefore != 1 || c.StartedBy != outs[0].Dir || c.Reset != resetLabChecked || !c.Kept {
				t.Errorf("second run's cluster: %+v, want reused after 1 run of %s, reset and lab checked, kept", c, outs[0].Dir)
			}
			if reused.Run.Lab != first.Run.Lab || fresh.Run.Lab == first.Run.Lab {
				t.Errorf("labs %s, %s, %s: want the second run in the first's, the third in its own", first.Run.Lab, reused.Run.Lab, fresh.Run.Lab)
			}
			if started, reusedN := k.Stats(); started != 1 || reusedN != 1 {
				t.Errorf("the keeper started %d clusters and reused %d, want 1 and 1", started, reusedN)
			}
			if err := schemacheck.ValidateFile("results", filepath.Join(outs[1].Dir, runstore.ResultsFile)); err != nil {
				t.Error(err)
			}
			labLeft(t, first.Run.Lab, true)
			pids := keptPids(t, k)
			if err := k.Close(ctx); err != nil {
				t.Fatal(err)
			}
			for name, pid := range pids {
				if pidAliveForTest(pid) {
					t.Errorf("node %s (pid %d) still runs after Close", name, pid)
				}
			}
			for _, r := range []runstore.Results{first, fresh} {
				labLeft(t, r.Run.Lab, false)
			}
		})
	}
}

// TestLabWithALeftRuleIsNotReused keeps a cluster with its lab, then puts
// a rule in a node's namespace as a fault's left-behind rule would be (by
// hand, which the lab's heal does not know of): the next run must not
// take the lab, must say why naming the rule, must remove the kept
// cluster and its lab, and must start its own and keep it.
func TestLabWithALeftRuleIsNotReused(t *testing.T) {
	gate.Netns(t)
	ctx := context.Background()
	k := NewClusters()
	defer k.Close(ctx)
	out, err := Run(ctx, reuseConfig(t, "redis-set-nx-px", "client-isolate", k))
	if err != nil {
		t.Fatal(err)
	}
	if c := out.Results.Run.Cluster; c == nil || !c.Kept {
		t.Fatalf("first run's cluster: %+v, want kept", c)
	}
	lab := out.Results.Run.Lab
	pids := keptPids(t, k)
	ns := "locktest-" + lab + "-h1"
	rule := []string{"ip", "netns", "exec", ns, "iptables", "-w", "-A", netrules.ChainIn, "-s", "10.255.255.1/32", "-j", "DROP"}
	if b, err := exec.Command(rule[0], rule[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%q: %v: %s", rule, err, b)
	}
	out, err = Run(ctx, reuseConfig(t, "redis-set-nx-px", "client-isolate", k))
	if err != nil {
		t.Fatal(err)
	}
	c := out.Results.Run.Cluster
	if c == nil || c.Reused || !strings.Contains(c.Fresh, "not as made") || !strings.Contains(c.Fresh, "10.255.255.1") || !c.Kept {
		t.Errorf("the run after a rule was left: cluster %+v, want a fresh one (kept), saying the lab is not as made, naming the rule", c)
	}
	if out.Results.Run.Lab == lab {
		t.Errorf("the run took lab %s, which has a rule left", lab)
	}
	labLeft(t, lab, false)
	for name, pid := range pids {
		if pidAliveForTest(pid) {
			t.Errorf("node %s (pid %d) of the removed cluster still runs", name, pid)
		}
	}
	if started, reused := k.Stats(); started != 2 || reused != 0 {
		t.Errorf("the keeper started %d clusters and reused %d, want 2 and 0", started, reused)
	}
	second := out.Results.Run.Lab
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	labLeft(t, second, false)
}

// labLeft fails the test unless lab id's namespaces, links and FORWARD
// rule are on this host (want) or none of them is.
func labLeft(t *testing.T, id string, want bool) {
	t.Helper()
	f, err := netns.Find(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	left := f.Of(id)
	switch {
	case want && (len(left.Namespaces) == 0 || len(left.Links) == 0 || len(left.Rules) == 0):
		t.Errorf("lab %s is not all there: %+v", id, left)
	case !want && !left.Empty():
		t.Errorf("lab %s left behind: %+v", id, left)
	}
}

// TestLabKeyMatchesWhatShapesTheLab checks, from settings alone, which
// runs in a network lab may take another's kept cluster with its lab:
// another impl of the backend, seed or fault that needs only the lab
// may; another client count (the lab's client hosts), network mode,
// subnet, backend or size may not; and faults that need the clock shim,
// sync records or a delay make the lab one that is never kept.
func TestLabKeyMatchesWhatShapesTheLab(t *testing.T) {
	base := providerConfig(t, "redis-replicated")
	base.Faults, base.Clients = []string{"isolate"}, 3
	key := func(t *testing.T, cfg Config) (string, string) {
		t.Helper()
		impl, err := cfg.ImplInfo()
		if err != nil {
			t.Fatal(err)
		}
		return labKey(cfg, impl)
	}
	want, why := key(t, base)
	if why != "" {
		t.Fatalf("a partition run of replicated Redis cannot keep its lab: %s", why)
	}
	for _, tt := range []struct {
		name    string
		edit    func(*Config)
		same    bool
		whyWith string
	}{
		{name: "the same settings", edit: func(*Config) {}, same: true},
		{name: "another seed and TTL", edit: func(c *Config) { c.Seed, c.TTL = 99, 2*time.Second }, same: true},
		{name: "another partition", edit: func(c *Config) { c.Faults = []string{"halves"} }, same: true},
		{name: "a client's isolation", edit: func(c *Config) { c.Faults = []string{"client-isolate"} }, same: true},
		{name: "another client count", edit: func(c *Config) { c.Clients = 5 }},
		{name: "another network mode", edit: func(c *Config) { c.Net = NetNamespaces }},
		{name: "a subnet", edit: func(c *Config) { c.Subnet = "10.77.9.0/24" }},
		{name: "another backend", edit: func(c *Config) { c.Impl = "redis-set-nx-px" }},
		{name: "persistence", edit: func(c *Config) { c.Persistence = "always" }},
		{name: "the node program's environment", edit: func(c *Config) { c.NodeEnv = append(c.NodeEnv, "X=1") }},
		{name: "a clock fault", edit: func(c *Config) { c.Faults = []string{"isolate", "clock-bump"} }, whyWith: "clock shim"},
		{name: "power loss", edit: func(c *Config) { c.Faults = []string{"isolate", "power-loss"} }, whyWith: "syncs"},
		{name: "a delay", edit: func(c *Config) { c.Faults = []string{"isolate", "delay"} }, whyWith: "delays"},
		{name: "the docker provider", edit: func(c *Config) { c.Provider = "docker" }, whyWith: "keeps no network lab"},
		{name: "no network fault", edit: func(c *Config) { c.Faults = []string{"pause-node"} }, whyWith: "no network lab"},
		{name: "loopback", edit: func(c *Config) { c.Net = NetLoopback }, whyWith: "no network lab"},
		{name: "namespaces asked for without a network fault", edit: func(c *Config) { c.Net, c.Faults = NetNamespaces, nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.NodeEnv = append([]string(nil), base.NodeEnv...)
			tt.edit(&cfg)
			got, why := key(t, cfg)
			checkKey(t, got, why, want, tt.whyWith, tt.same)
		})
	}
}

// fakeLab is a hand-built provider with a network lab: it records, in
// order, into its log what happens to it.
type fakeLab struct {
	provider.Provider
	log    *[]string
	asMade error
}

func (f *fakeLab) RecordLab(context.Context) error { *f.log = append(*f.log, "record"); return nil }
func (f *fakeLab) LabAsMade(context.Context) error { *f.log = append(*f.log, "prove"); return f.asMade }
func (f *fakeLab) CloseLab(context.Context) error  { *f.log = append(*f.log, "remove lab"); return nil }
func (f *fakeLab) Close(context.Context, *slog.Logger) {
	*f.log = append(*f.log, "provider closed")
}

// loggedCluster is a fakeCluster whose stops go into a shared log.
type loggedCluster struct {
	fakeCluster
	log *[]string
}

func (c *loggedCluster) Stop(ctx context.Context) error {
	*c.log = append(*c.log, "stop cluster")
	return c.fakeCluster.Stop(ctx)
}

// TestKeeperKeepsALabWithItsCluster checks the keeper's rules for a
// cluster in a network lab on hand-built data: a run that gives the
// cluster back gives its lab with it (its own close then leaves the lab
// alone), and Close stops the cluster, then removes its lab; a run that
// does not give it back stops the cluster (finish), then removes the lab
// (its close); a run that took a kept cluster with its lab but never came
// to use it stops that cluster before it removes the lab.
func TestKeeperKeepsALabWithItsCluster(t *testing.T) {
	ctx := context.Background()
	lg := slog.New(slog.DiscardHandler)
	newHeld := func(t *testing.T, kept bool) (*Clusters, *loggedCluster, *providerSetup, *[]string) {
		t.Helper()
		var log []string
		lab := &fakeLab{log: &log}
		cl := &loggedCluster{fakeCluster: fakeCluster{nodes: []clusters.Node{{Name: "n1", Addr: "10.77.0.2:1"}}}, log: &log}
		hold := &labHold{key: "L", recorded: true, log: newSwapHandler(lg.Handler())}
		prov := &providerSetup{p: lab, lab: hold}
		k := NewClusters()
		h := &heldCluster{k: &keptCluster{key: "L", cl: cl, startedBy: "first-run", log: hold.log, lab: lab}, lab: hold,
			logFrom: map[string]int64{}, info: runstore.ClusterInfo{Kept: kept}}
		k.hold(cl, h)
		return k, cl, prov, &log
	}
	t.Run("given back", func(t *testing.T) {
		k, cl, prov, log := newHeld(t, true)
		if rest := k.finish(ctx, cl, t.TempDir(), lg); rest != nil {
			t.Fatalf("finish returned %v, want nil", rest)
		}
		prov.close(ctx, lg)
		if len(*log) != 0 {
			t.Fatalf("a run that gave its cluster and lab back did %q, want nothing", *log)
		}
		if kept := k.keptKeys(); len(kept) != 1 || kept[0] != "L" {
			t.Fatalf("kept %q, want the lab's key", kept)
		}
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if want := []string{"stop cluster", "remove lab"}; !slices.Equal(*log, want) {
			t.Errorf("Close did %q, want %q", *log, want)
		}
	})
	t.Run("not given back", func(t *testing.T) {
		k, cl, prov, log := newHeld(t, false)
		if rest := k.finish(ctx, cl, t.TempDir(), lg); rest != nil {
			t.Fatalf("finish returned %v, want nil", rest)
		}
		prov.close(ctx, lg)
		if want := []string{"stop cluster", "provider closed"}; !slices.Equal(*log, want) {
			t.Errorf("the run did %q, want %q", *log, want)
		}
		if kept := k.keptKeys(); len(kept) != 0 {
			t.Errorf("kept %q", kept)
		}
	})
	t.Run("closed meanwhile", func(t *testing.T) {
		k, cl, prov, log := newHeld(t, true)
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
		k.finish(ctx, cl, t.TempDir(), lg)
		prov.close(ctx, lg)
		if want := []string{"stop cluster", "provider closed"}; !slices.Equal(*log, want) {
			t.Errorf("the run did %q, want %q", *log, want)
		}
	})
	t.Run("taken, never used", func(t *testing.T) {
		_, _, prov, log := newHeld(t, true)
		prov.lab.kept = &keptCluster{cl: &loggedCluster{log: log}}
		prov.close(ctx, lg)
		if want := []string{"stop cluster", "provider closed"}; !slices.Equal(*log, want) {
			t.Errorf("the run did %q, want %q", *log, want)
		}
	})
}

// TestKeeperStopsAClusterLeftIdle gives back three hand-built clusters
// on the keeper's own clock: with MaxIdle at a minute, a cluster given
// back two minutes before the latest give-back is stopped (Close waits
// for it), the one given back 30 s before is kept, and a run of the
// stopped one's key no longer finds it; Idled counts it. A keeper with no
// MaxIdle keeps every cluster until Close.
func TestKeeperStopsAClusterLeftIdle(t *testing.T) {
	ctx := context.Background()
	lg := slog.New(slog.DiscardHandler)
	for _, maxIdle := range []time.Duration{time.Minute, 0} {
		k := NewClusters()
		k.MaxIdle = maxIdle
		t0 := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
		now := t0
		k.now = func() time.Time { return now }
		giveBack := func(key string, at time.Duration) *fakeCluster {
			cl := &fakeCluster{nodes: []clusters.Node{{Name: "n1", Addr: "127.0.0.1:1"}}}
			k.hold(cl, &heldCluster{k: &keptCluster{key: key, cl: cl, startedBy: key, log: newSwapHandler(lg.Handler())},
				info: runstore.ClusterInfo{Kept: true}})
			now = t0.Add(at)
			if rest := k.finish(ctx, cl, t.TempDir(), lg); rest != nil {
				t.Fatalf("%s was not given back", key)
			}
			return cl
		}
		old := giveBack("old", 0)
		recent := giveBack("recent", 90*time.Second)
		last := giveBack("last", 2*time.Minute)
		if maxIdle == 0 {
			if got := k.keptKeys(); len(got) != 3 || k.Idled() != 0 {
				t.Errorf("without MaxIdle: kept %q, %d idled; want all three, none", got, k.Idled())
			}
		} else {
			if got := k.keptKeys(); !slices.Equal(got, []string{"last", "recent"}) && !slices.Equal(got, []string{"recent", "last"}) {
				t.Errorf("MaxIdle 1m: kept %q, want recent and last", got)
			}
			if k.Idled() != 1 {
				t.Errorf("idled %d, want 1", k.Idled())
			}
			if c := k.takeIdle("old"); c != nil {
				t.Error("a run took the cluster left idle for 2 minutes")
			}
		}
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for name, cl := range map[string]*fakeCluster{"old": old, "recent": recent, "last": last} {
			if cl.stops != 1 {
				t.Errorf("MaxIdle %v: %s stopped %d times by Close, want once", maxIdle, name, cl.stops)
			}
		}
	}
}
