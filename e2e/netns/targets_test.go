package netns_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
)

// waitFor polls cond until it returns nil, failing the test with cond's
// last error after limit (testcluster.Eventually). The limits are
// generous: they bound a wait for an election or a failover on a loaded
// machine, not its speed.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() error) {
	t.Helper()
	testcluster.Eventually(t, limit, what+": not within "+limit.String(), cond)
}

// TestRunRecordsIsolatedLeader runs etcd-mutex with --faults isolate
// --target isolate=leader: every isolate that went in is recorded, in the
// stored history, with the role its node had when it was picked.
func TestRunRecordsIsolatedLeader(t *testing.T) {
	if err := netns.Check(); err != nil {
		t.Skip(err)
	}
	testkit.LocalOnly(t, "the docker provider's own test runs cover it")
	cfg := testkit.EtcdConfig(t, "etcd-mutex")
	cfg.Faults, cfg.Targets = []string{"isolate"}, map[string][]string{"isolate": {"leader"}}
	cfg.Duration, cfg.Interval, cfg.Quiet = 12*time.Second, time.Second, 3*time.Second
	nemesis.Window.Set(&cfg.FaultSettings, 1500*time.Millisecond)
	_, h := testkit.MustRun(t, cfg)
	isolates := 0
	for _, o := range h {
		if !o.IsNemesis() || o.F != "partition-isolate" || o.Type == history.Invoke {
			continue
		}
		if o.Type != history.OK {
			// A pick during an election finds no leader: the fault does
			// not go in, and says why.
			if o.Type != history.Fail || !strings.Contains(o.Error, "roles:") {
				t.Errorf("isolate %s: %s", o.Type, o)
			}
			continue
		}
		isolates++
		cut, _, _ := strings.Cut(strings.Join(o.Value.Targets, " "), "|")
		if len(o.Value.Roles) != 1 || o.Value.Roles[cut] != backend.EtcdLeader {
			t.Errorf("isolate of %s recorded roles %v, want %s=leader: %s", cut, o.Value.Roles, cut, o)
		}
	}
	if isolates == 0 {
		t.Errorf("no isolate went in during the %v run: %v", cfg.Duration, testkit.NemesisSeq(h))
	}
	t.Logf("nemesis: %v", testkit.NemesisSeq(h))
}

// sentinelMasterOf asks every sentinel, with the test's own client, which
// data node is the master, and returns it when all of them agree and the
// node itself answers ROLE master.
func sentinelMasterOf(ctx context.Context, nodes []clusters.Node) (clusters.Node, error) {
	var addrs []string
	for _, n := range nodes {
		if n.Role != local.RoleSentinel {
			continue
		}
		c := goredis.NewSentinelClient(&goredis.Options{Addr: n.Addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
		a, err := c.GetMasterAddrByName(ctx, local.SentinelMasterName).Result()
		c.Close()
		if err != nil {
			return clusters.Node{}, fmt.Errorf("%s: %w", n.Name, err)
		}
		addrs = append(addrs, net.JoinHostPort(a[0], a[1]))
	}
	for _, a := range addrs {
		if a != addrs[0] {
			return clusters.Node{}, fmt.Errorf("sentinels name %v", addrs)
		}
	}
	for _, n := range nodes {
		if n.Addr != addrs[0] || n.Role == local.RoleSentinel {
			continue
		}
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
		v, err := c.Do(ctx, "ROLE").Slice()
		c.Close()
		if err != nil || len(v) == 0 || v[0] != "master" {
			return clusters.Node{}, fmt.Errorf("%s, named master, answers ROLE %v, %v", n.Name, v, err)
		}
		return n, nil
	}
	return clusters.Node{}, fmt.Errorf("sentinels name %s, no data node", addrs[0])
}

// TestKillMasterAfterSentinelFailover forces a Sentinel failover (SENTINEL
// FAILOVER), waits until every sentinel names the new master, and then
// injects kill-node pinned to the master: it must kill the new master, not
// n1, the master the cluster started with, and record it as master.
func TestKillMasterAfterSentinelFailover(t *testing.T) {
	gate.Need(t, "redis-server", "redis-sentinel")
	ctx := context.Background()
	cl := testkit.StartLocal(t, "redis-sentinel", local.Options{Dir: t.TempDir()})
	nodes := cl.Nodes()
	old, err := sentinelMasterOf(ctx, nodes)
	if err != nil || old.Name != "n1" {
		t.Fatalf("master at the start: %v, %v; want n1", old.Name, err)
	}
	var sentinel clusters.Node
	for _, n := range nodes {
		if n.Role == local.RoleSentinel {
			sentinel = n
		}
	}
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel.Addr, Protocol: 2, DisableIdentity: true})
	defer sc.Close()
	// A sentinel refuses a failover until it has seen the replicas report
	// their offsets; retry until it takes it.
	waitFor(t, 60*time.Second, "SENTINEL FAILOVER", func() error {
		return sc.Failover(ctx, local.SentinelMasterName).Err()
	})
	var master clusters.Node
	waitFor(t, 60*time.Second, "the failover to end", func() (err error) {
		master, err = sentinelMasterOf(ctx, nodes)
		if err == nil && master.Name == old.Name {
			err = errors.New("the sentinels still name " + old.Name)
		}
		return err
	})
	if r := cl.Nodes(); r[0].Role != local.RoleMaster {
		t.Fatalf("the cluster's Nodes already name %+v: the test would not tell a stale role from a live one", r)
	}

	faults, err := nemesis.Build([]string{"kill-node"}, nemesis.Env{Cluster: cl,
		Targets: map[string][]string{"kill-node": {"master"}}}.With(nemesis.Down.Is(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	kill := faults[0]
	v, err := kill.Inject(ctx, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatalf("kill-node=master: %v", err)
	}
	if len(v.Targets) != 1 || v.Targets[0] != master.Name {
		t.Errorf("kill-node=master killed %v; the master after the failover is %s (it started as %s)", v.Targets, master.Name, old.Name)
	}
	if len(v.Roles) != 1 || v.Roles[master.Name] != local.RoleMaster {
		t.Errorf("recorded roles %v, want %s=master", v.Roles, master.Name)
	}
	pids := cl.(interface{ Pids() map[string]int }).Pids()
	if pids[master.Name] != 0 {
		t.Errorf("%s still runs (pid %d) after the kill", master.Name, pids[master.Name])
	}
	if pids[old.Name] == 0 {
		t.Errorf("%s, the old master, was killed", old.Name)
	}
	if _, err := kill.Heal(ctx); err != nil {
		t.Fatal(err)
	}
}

// A pin that no node can ever match is refused before the run's workload
// starts: the run fails as a set-up error naming the fault and the pin,
// and leaves no run folder behind.
func TestRunRefusesImpossiblePins(t *testing.T) {
	gate.Need(t, "redis-server")
	gate.Need(t, "redis-sentinel")
	for _, tc := range []struct {
		impl, fault, pin, want string
	}{
		{"redis-set-nx-px", "kill-node", "n4", `kill-node hits nodes n1 by name (no node of this backend has a role); "n4" is neither`},
		{"redis-replicated", "pause-node", "leader", `pause-node hits nodes n1, n2, n3 (by name) or the roles master, replica; "leader" is neither`},
		{"redis-set-nx-px", "pause-client", "p7", "p7 is not one of them"},
	} {
		t.Run(tc.impl+"/"+tc.fault+"="+tc.pin, func(t *testing.T) {
			cfg := testkit.Config(t, tc.impl)
			cfg.Faults, cfg.Targets = []string{tc.fault}, map[string][]string{tc.fault: {tc.pin}}
			out, err := run.Run(context.Background(), cfg)
			var se *run.SetupError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), "--target "+tc.fault+"="+tc.pin+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, %v; want a set-up error saying %q", out, err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error of more than one line: %q", err)
			}
			if runs, _ := filepath.Glob(filepath.Join(cfg.StoreDir, "*", "*")); len(runs) > 0 {
				t.Errorf("a refused run left %v", runs)
			}
		})
	}
}
