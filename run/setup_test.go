package run

// The white-box tests of the run's provider set-up (setupProvider,
// startCluster): the network lab and the Docker clock shim a run's faults
// act through, and the settings a run fills in. The end-to-end runs are in
// e2e/ (docs/testing.md).

import (
	// Library code never picks the lock drivers: only the command and the
	// tests register them, by importing impls/all.
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	_ "github.com/locktest/locktest/impls/all"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/images"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
	"github.com/locktest/locktest/workloads"
	goredis "github.com/redis/go-redis/v9"
)

// The test binary doubles as the worker and etcd node programs.
func TestMain(m *testing.M) { testexe.Main(m) }

// providerConfig is a run config whose workers and etcd members are this
// test binary.
func providerConfig(t *testing.T, impl string) Config {
	cfg := DefaultConfig()
	cfg.Impl, cfg.Seed, cfg.StoreDir = impl, 7, t.TempDir()
	cfg.WorkerCommand, cfg.WorkerEnv = testexe.Worker()
	cfg.NodeCommand, cfg.NodeEnv = testexe.Node()
	return cfg
}

// dockerImage skips the test unless a Docker engine answers, and builds
// (reusing what an earlier build made) locktest's image of backend.
func dockerImage(t *testing.T, backend string) {
	t.Helper()
	gate.Need(t, "redis-server")
	e := dockertest.Open(t)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := images.Build(ctx, e, images.BuildOptions{Backends: []string{backend}}); err != nil {
		t.Fatalf("build the %s image: %v", backend, err)
	}
}

// TestIsolateLeaderOnEtcd isolates, three times, the node that is the etcd
// leader when the fault goes in (--target isolate=leader) in network
// namespaces. Before each injection the test asks the members itself who
// leads; the fault must cut that node and record it as leader, and the
// others then elect a new leader among themselves, so each round's leader
// is a different node from the last round's.
func TestIsolateLeaderOnEtcd(t *testing.T) {
	gate.Netns(t)
	cfg := providerConfig(t, "etcd-mutex")
	cfg.Faults = []string{"isolate"}
	impl, err := impls.Lookup(cfg.Impl)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir, lg := t.TempDir(), slog.New(slog.DiscardHandler)
	prov, err := setupProvider(ctx, cfg, impl, dir, lg)
	if prov != nil {
		t.Cleanup(func() {
			prov.close(context.Background(), lg)
			if prov.p == nil {
				return
			}
			_, lab, _ := prov.p.Describe()
			if lab == "" {
				return
			}
			if f, err := netns.Find(context.Background()); err != nil {
				t.Error(err)
			} else if left := f.Of(lab); !left.Empty() {
				t.Errorf("the lab left %+v", left)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	// Elections wait 2s of silence, not etcd's 250ms: a loaded machine then
	// cannot move the leader between the test's question and the pick.
	cl, err := local.New(impl.Backend, local.Options{Nodes: impl.Nodes, Dir: dir, Logger: lg,
		Exe: cfg.NodeCommand, ExeEnv: cfg.NodeEnv, Hosts: prov.p.(interface{ NodeHosts() []local.Host }).NodeHosts(),
		Params: map[string]string{backend.EtcdParamTickMs: "100", backend.EtcdParamElectionMs: "2000"}})
	cl = testcluster.Started(t, cl, err)
	faults, err := nemesis.Build([]string{"isolate"}, nemesis.Env{Cluster: cl, Net: prov.network(cl),
		ClientHosts: prov.clientHosts(cfg.Clients), Targets: map[string][]string{"isolate": {"leader"}}}.With(nemesis.Window.Is(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	isolate := faults[0]
	nodes := cl.Nodes()
	var leaders []string
	for round := range 3 {
		var leader string
		testcluster.Eventually(t, 60*time.Second, "the members to agree on a leader", func() (err error) {
			leader, err = testcluster.EtcdLeader(ctx, nodes, "")
			return err
		})
		leaders = append(leaders, leader)
		v, err := isolate.Inject(ctx, rand.New(rand.NewPCG(uint64(round), 1)))
		if err != nil {
			t.Fatalf("round %d: isolate: %v", round, err)
		}
		cut, _, _ := strings.Cut(strings.Join(v.Targets, " "), "|")
		if cut != leader {
			t.Errorf("round %d: isolated %s (targets %v), but %s led when the fault went in", round, cut, v.Targets, leader)
		}
		if len(v.Roles) != 1 || v.Roles[leader] != backend.EtcdLeader {
			t.Errorf("round %d: recorded roles %v, want %s=leader", round, v.Roles, leader)
		}
		// The cut is real: the others elect a leader among themselves.
		testcluster.Eventually(t, 60*time.Second, "the other members to elect a new leader", func() error {
			l, err := testcluster.EtcdLeader(ctx, nodes, cut)
			if err == nil && l == cut {
				err = fmt.Errorf("they still follow the isolated %s", cut)
			}
			return err
		})
		if _, err := isolate.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("leaders isolated in turn: %v", leaders)
}

// TestDockerClockShimMovesANodesClock checks what a clock fault needs of
// the docker provider, with no schedule to depend on: the provider set-up of a
// docker run that asks for clock faults mounts the clock shim into the
// Redlock nodes' containers, and setting a node's offset moves that
// node's clock as Redis itself reads it (TIME), and only that node's, and
// setting it back restores it. (The overlap a forward jump causes is
// TestRedlockClockJumpOverlaps's; under docker no partition can keep one
// client from some nodes, which that construction needs.)
func TestDockerClockShimMovesANodesClock(t *testing.T) {
	dockerImage(t, "redis")
	cfg := providerConfig(t, "redlock")
	cfg.Provider = "docker"
	cfg.Faults = []string{"clock-bump"}
	impl, err := impls.Lookup(cfg.Impl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, lg := t.TempDir(), slog.New(slog.DiscardHandler)
	prov, err := setupProvider(ctx, cfg, impl, dir, lg)
	t.Cleanup(func() { prov.close(context.Background(), lg) })
	if err != nil {
		t.Fatal(err)
	}
	if prov.clocks == nil {
		t.Fatalf("no clock shim: %s", prov.clockWhy)
	}
	cl, err := startCluster(ctx, cfg, impl, dir, prov, lg)
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
	if err := prov.clocks.Set("n3", jump); err != nil {
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
	if err := prov.clocks.Set("n3", 0); err != nil {
		t.Fatal(err)
	}
	if d := skew(nodes[2]); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("n3's clock is %v off the host's after the reset, want 0", d.Round(time.Millisecond))
	}
}

func TestEtcdGuardedNeedsAGuardingImpl(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StoreDir = t.TempDir()
	cfg.Impl, cfg.Mode = "redis-set-nx-px", workloads.ModeEtcdGuarded
	_, err := Run(context.Background(), cfg)
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "--resource etcd-guarded") {
		t.Fatalf("err %v, want a SetupError about --resource etcd-guarded", err)
	}
	for _, impl := range []string{"etcd-mutex", "etcd-lease-txn"} {
		cfg.Impl = impl
		cfg.fillAuto()
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s in mode etcd-guarded: %v", impl, err)
		}
	}
}
