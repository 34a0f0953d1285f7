package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/local/netlab"
	"github.com/locktest/locktest/clusters/roles"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/testbin"
	"github.com/locktest/locktest/internal/testcluster"
	"github.com/locktest/locktest/nemesis"
)

// waitFor polls cond until it returns nil, failing the test with cond's
// last error after limit (testcluster.Eventually). The limits are
// generous: they bound a wait for an election or a failover on a loaded
// machine, not its speed.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() error) {
	t.Helper()
	testcluster.Eventually(t, limit, what+": not within "+limit.String(), cond)
}

// etcdLeaderOf asks each member of nodes, except those in skip, for its
// status — the test's own question, not the cluster's role reader — and
// returns the name of the member they all name as leader; an error when
// one does not answer, knows no leader, or they disagree.
func etcdLeaderOf(nodes []clusters.Node, skip ...string) (string, error) {
	names := map[uint64]string{}
	var leaders []uint64
	for _, n := range nodes {
		if strings.Contains(" "+strings.Join(skip, " ")+" ", " "+n.Name+" ") {
			continue
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{n.Addr}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := c.Status(ctx, n.Addr)
		cancel()
		c.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", n.Name, err)
		}
		names[st.Header.MemberId] = n.Name
		leaders = append(leaders, st.Leader)
	}
	for _, l := range leaders {
		if l == 0 || l != leaders[0] {
			return "", fmt.Errorf("members name leaders %v", leaders)
		}
	}
	name, ok := names[leaders[0]]
	if !ok {
		return "", fmt.Errorf("the members name leader %x, none of those asked", leaders[0])
	}
	return name, nil
}

// TestIsolateLeaderOnEtcd isolates, three times, the node that is the etcd
// leader when the fault goes in (--target isolate=leader) in network
// namespaces. Before each injection the test asks the members itself who
// leads; the fault must cut that node and record it as leader, and the
// others then elect a new leader among themselves, so each round's leader
// is a different node from the last round's.
func TestIsolateLeaderOnEtcd(t *testing.T) {
	if err := netlab.Check(); err != nil {
		t.Skip(err)
	}
	localOnly(t, "it builds the network lab of the local provider")
	cfg := etcdConfig(t, "etcd-mutex")
	cfg.Faults = []string{"isolate"}
	impl, err := impls.Lookup(cfg.Impl)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir, lg := t.TempDir(), slog.New(slog.DiscardHandler)
	plat, err := setupPlatform(ctx, cfg, impl, dir, lg)
	if plat != nil {
		t.Cleanup(func() {
			plat.close(context.Background(), lg)
			if plat.lab != nil {
				assertLabGone(t, plat.lab.ID())
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	// Elections wait 2s of silence, not etcd's 250ms: a loaded machine then
	// cannot move the leader between the test's question and the pick.
	cl := startLocal(t, impl.Backend, local.Options{Nodes: impl.Nodes, Dir: dir, Logger: lg,
		Exe: cfg.NodeCommand, ExeEnv: cfg.NodeEnv, Hosts: plat.nodeHosts,
		Params: map[string]string{local.EtcdParamTickMs: "100", local.EtcdParamElectionMs: "2000"}})
	faults, err := nemesis.Build([]string{"isolate"}, nemesis.Env{Cluster: cl, Net: plat.network(cl),
		ClientHosts: plat.clientHosts(cfg.Clients), Window: time.Second, Targets: map[string][]string{"isolate": {"leader"}}})
	if err != nil {
		t.Fatal(err)
	}
	isolate := faults[0]
	nodes := cl.Nodes()
	var leaders []string
	for round := range 3 {
		var leader string
		waitFor(t, 60*time.Second, "the members to agree on a leader", func() (err error) {
			leader, err = etcdLeaderOf(nodes)
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
		if len(v.Roles) != 1 || v.Roles[leader] != roles.EtcdLeader {
			t.Errorf("round %d: recorded roles %v, want %s=leader", round, v.Roles, leader)
		}
		// The cut is real: the others elect a leader among themselves.
		waitFor(t, 60*time.Second, "the other members to elect a new leader", func() error {
			l, err := etcdLeaderOf(nodes, cut)
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

// TestRunRecordsIsolatedLeader runs etcd-mutex with --faults isolate
// --target isolate=leader: every isolate that went in is recorded, in the
// stored history, with the role its node had when it was picked.
func TestRunRecordsIsolatedLeader(t *testing.T) {
	if err := netlab.Check(); err != nil {
		t.Skip(err)
	}
	localOnly(t, "the docker provider's own test runs cover it")
	cfg := etcdConfig(t, "etcd-mutex")
	cfg.Faults, cfg.Targets = []string{"isolate"}, map[string][]string{"isolate": {"leader"}}
	cfg.Duration, cfg.Interval, cfg.Window, cfg.Quiet = 12*time.Second, time.Second, 1500*time.Millisecond, 3*time.Second
	_, h := mustRun(t, cfg)
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
		if len(o.Value.Roles) != 1 || o.Value.Roles[cut] != roles.EtcdLeader {
			t.Errorf("isolate of %s recorded roles %v, want %s=leader: %s", cut, o.Value.Roles, cut, o)
		}
	}
	if isolates == 0 {
		t.Errorf("no isolate went in during the %v run: %v", cfg.Duration, nemesisSeq(h))
	}
	t.Logf("nemesis: %v", nemesisSeq(h))
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
	testbin.Need(t, "redis-server", "redis-sentinel")
	ctx := context.Background()
	cl := startLocal(t, "redis-sentinel", local.Options{Dir: t.TempDir()})
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

	faults, err := nemesis.Build([]string{"kill-node"}, nemesis.Env{Cluster: cl, NodeDown: time.Second,
		Targets: map[string][]string{"kill-node": {"master"}}})
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
	testbin.Need(t, "redis-server")
	testbin.Need(t, "redis-sentinel")
	for _, tc := range []struct {
		impl, fault, pin, want string
	}{
		{"redis-set-nx-px", "kill-node", "n4", `kill-node hits nodes n1 by name (no node of this backend has a role); "n4" is neither`},
		{"redis-replicated", "pause-node", "leader", `pause-node hits nodes n1, n2, n3 (by name) or the roles master, replica; "leader" is neither`},
		{"redis-set-nx-px", "pause-client", "p7", "p7 is not one of them"},
	} {
		t.Run(tc.impl+"/"+tc.fault+"="+tc.pin, func(t *testing.T) {
			cfg := testConfig(t, tc.impl)
			cfg.Faults, cfg.Targets = []string{tc.fault}, map[string][]string{tc.fault: {tc.pin}}
			out, err := Run(context.Background(), cfg)
			var se *SetupError
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
