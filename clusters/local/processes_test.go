package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
)

// kindOptions returns options whose node program is this test binary
// (TestMain), with params.
func kindOptions(t *testing.T, params map[string]string) Options {
	exe, env := testexe.Node()
	return Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env, Params: params}
}

// startKinds starts a Processes of backend b and stops it, checked, when
// the test ends.
func startKinds(t *testing.T, b string, opts Options) *Processes {
	t.Helper()
	c, err := NewProcesses(b, opts)
	return started(t, c, err, time.Minute)
}

// startEtcd starts a 3-member etcd on the generic cluster.
func startEtcd(t *testing.T) *Processes {
	t.Helper()
	return startKinds(t, backend.Etcd, kindOptions(t, nil))
}

// etcdClient returns a client of the given members.
func etcdClient(t *testing.T, ns ...clusters.Node) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, n := range ns {
		eps = append(eps, n.Addr)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// status asks one member for its status with a short deadline.
func status(c *clientv3.Client, n clusters.Node) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return c.Status(ctx, n.Addr)
}

// eventually polls cond until it holds or 15s passed (testcluster.Eventually).
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testcluster.Eventually(t, 15*time.Second, what, cond)
}

// An etcd cluster keeps its data: the leader killed, the majority takes a
// write, and the restarted member rejoins on its data directory and
// catches up; a restart of a running member does nothing; the whole
// cluster stopped starts again on the same addresses with its data.
func TestProcessesEtcdKeepsItsData(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	ns := e.Nodes()
	c := etcdClient(t, ns...)
	ctx := context.Background()
	leader, err := testcluster.EtcdLeader(ctx, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	var victim clusters.Node
	var others []clusters.Node
	for _, n := range ns {
		if n.Name == leader {
			victim = n
		} else {
			others = append(others, n)
		}
		for _, f := range []string{"etcd.log", "data/member/wal"} {
			if _, err := os.Stat(filepath.Join(filepath.Dir(n.LogPath), f)); err != nil {
				t.Errorf("%s: %v", n.Name, err)
			}
		}
	}
	put := func(c *clientv3.Client, k string) error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.Put(pctx, k, "v")
		return err
	}
	if err := put(c, "before"); err != nil {
		t.Fatal(err)
	}
	pid := e.Pids()[victim.Name]
	if err := e.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if !procGone(pid) || e.Pids()[victim.Name] != 0 {
		t.Fatalf("the killed leader %s (pid %d) still runs", victim.Name, pid)
	}
	if err := e.Kill(ctx, victim); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	during := etcdClient(t, others...)
	eventually(t, "a put to the majority after the leader's kill", func() error { return put(during, "during") })
	if err := e.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	newPid := e.Pids()[victim.Name]
	if newPid == 0 || newPid == pid {
		t.Fatalf("pid after restart %d (before %d)", newPid, pid)
	}
	if err := e.Restart(ctx, victim); err != nil || e.Pids()[victim.Name] != newPid {
		t.Errorf("Restart of a running member: %v, pid %d (was %d)", err, e.Pids()[victim.Name], newPid)
	}
	// A serializable read answers from the member's own state: it has the
	// write made while it was down once it caught up.
	vc := etcdClient(t, victim)
	eventually(t, "the restarted member catches up", func() error {
		gctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		r, err := vc.Get(gctx, "during", clientv3.WithSerializable())
		if err == nil && len(r.Kvs) != 1 {
			err = fmt.Errorf("%s does not have the write made while it was down", victim.Name)
		}
		return err
	})
	stopChecked(t, e)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i, n := range e.Nodes() {
		if n.Addr != ns[i].Addr {
			t.Errorf("%s moved from %s to %s", n.Name, ns[i].Addr, n.Addr)
		}
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := etcdClient(t, e.Nodes()...).Get(gctx, "before")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the write from before, after the cluster's restart: %v %v", r, err)
	}
	assertLogsCollected(t, e, "ready to serve client requests")
}

// A paused member still stops promptly (Stop thaws it after SIGTERM);
// pausing a stopped or unknown member is an error.
func TestProcessesPausedNodeStops(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	ctx := context.Background()
	n := e.Nodes()[2]
	if err := e.Pause(ctx, n); err != nil {
		t.Fatal(err)
	}
	pids := e.Pids()
	start := time.Now()
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Not a speed goal: a member left frozen would be SIGKILLed only after
	// the whole grace period, which is what this guards against.
	if d := time.Since(start); d >= stopGrace {
		t.Errorf("Stop with a paused member took %v: it waited out the grace period", d)
	}
	for name, pid := range pids {
		if !procGone(pid) {
			t.Errorf("member %s: /proc/%d still exists after Stop", name, pid)
		}
	}
	if err := e.Pause(ctx, n); err == nil {
		t.Error("Pause of a stopped member succeeded")
	}
	if err := e.Pause(ctx, clusters.Node{Name: "n9"}); err == nil {
		t.Error("Pause of an unknown member succeeded")
	}
}

// One ZooKeeper peer runs standalone, on the tick its param sets, and its
// log is collected.
func TestProcessesZooKeeperStandalone(t *testing.T) {
	t.Parallel()
	opts := kindOptions(t, map[string]string{backend.ZooKeeperParamTickTime: "100ms"})
	opts.Nodes = 1
	z := startKinds(t, backend.ZooKeeper, opts)
	n := z.Nodes()[0]
	if r, err := z.Role(context.Background(), n); err != nil || r != backend.ZooKeeperStandalone {
		t.Errorf("role %q, %v; want standalone", r, err)
	}
	cfg, err := os.ReadFile(filepath.Join(filepath.Dir(n.LogPath), "zoo.cfg"))
	if err != nil || !strings.Contains(string(cfg), "tickTime=100\n") {
		t.Errorf("zoo.cfg %q, %v: want tickTime=100", cfg, err)
	}
	assertLogsCollected(t, z, "QuorumPeer")
}

// A node that its server refuses to run (an etcd member whose data
// directory is a file) fails the start with one line that names it, says
// it exited, quotes its log's last words and names the log; no node is
// left running.
func TestProcessesStartFailureIsOneLine(t *testing.T) {
	gate.Servers(t, "etcd")
	t.Parallel()
	opts := kindOptions(t, nil)
	bad := filepath.Join(opts.Dir, "nodes", "n2", "data")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := NewProcesses(backend.Etcd, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = e.Start(ctx)
	if err == nil {
		t.Fatal("Start succeeded")
	}
	msg := err.Error()
	for _, w := range []string{"local etcd: node n2 ", "exited during start-up", filepath.Join(opts.Dir, "nodes", "n2", "etcd.log")} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for name, pid := range e.Pids() {
		if pid != 0 {
			t.Errorf("member %s left running as %d", name, pid)
		}
	}
}

// A program a node runs that this host lacks, and params its backend does
// not take, are refused before anything starts; params it takes reach the
// layout.
func TestProcessesRefusals(t *testing.T) {
	orig := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir())
	_, err := NewProcesses(backend.Redis, Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "redis-server not found") || !strings.Contains(err.Error(), "make setup") {
		t.Errorf("no redis-server: %v", err)
	}
	t.Setenv("PATH", orig)
	exe, env := testexe.Node()
	for _, tc := range []struct {
		b      string
		params map[string]string
		want   string
	}{
		{backend.Etcd, map[string]string{"tick": "10"}, `unknown cluster param "tick"`},
		{backend.Etcd, map[string]string{backend.EtcdParamElectionMs: "soon"}, "must be a positive number"},
		{backend.ZooKeeper, map[string]string{backend.ZooKeeperParamTickTime: "soon"}, "tick-time"},
		{backend.Redis, nil, "Options.Dir (the run directory) is required"},
	} {
		opts := Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env, Params: tc.params}
		if tc.params == nil {
			opts.Dir = ""
		}
		if _, err := NewProcesses(tc.b, opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewProcesses(%s, %v) = %v, want an error saying %q", tc.b, tc.params, err, tc.want)
		}
	}
	c, err := New(backend.Etcd, Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env,
		Params: map[string]string{backend.EtcdParamTickMs: "10", backend.EtcdParamElectionMs: "100"}})
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := c.(*Processes); !ok || k.layout.Etcd.TickMs != 10 || k.layout.Etcd.ElectionMs != 100 || len(k.Nodes()) != 3 {
		t.Errorf("New(etcd) = %T with layout %+v, want a Processes of 3 with the params", c, c)
	}
}

// A peer whose port was taken between its pick and its bind logs a
// BindException above a stack trace longer than the tail an error quotes:
// the start log is read whole for it (TestCuratorLock's ZooKeeper failed
// its start under stress-ng at -p 3, the BindException 13 lines above the
// log's end, and was not retried on other ports).
func TestPortTakenIsFoundAboveAStack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zookeeper.log")
	log := `2026-11-29 21:31:02,434 - ERROR [main:QuorumPeerMain@114] - Unexpected exception, exiting abnormally
java.net.BindException: Address already in use
	at java.base/sun.nio.ch.Net.bind0(Native Method)
	at java.base/sun.nio.ch.Net.bind(Net.java:555)
	at java.base/sun.nio.ch.ServerSocketChannelImpl.netBind(ServerSocketChannelImpl.java:337)
	at java.base/sun.nio.ch.ServerSocketChannelImpl.bind(ServerSocketChannelImpl.java:294)
	at java.base/sun.nio.ch.ServerSocketAdaptor.bind(ServerSocketAdaptor.java:89)
	at java.base/sun.nio.ch.ServerSocketAdaptor.bind(ServerSocketAdaptor.java:81)
	at org.apache.zookeeper.server.NIOServerCnxnFactory.configure(NIOServerCnxnFactory.java:662)
	at org.apache.zookeeper.server.quorum.QuorumPeerMain.runFromConfig(QuorumPeerMain.java:169)
	at org.apache.zookeeper.server.quorum.QuorumPeerMain.initializeAndRun(QuorumPeerMain.java:137)
	at org.apache.zookeeper.server.quorum.QuorumPeerMain.main(QuorumPeerMain.java:91)
2026-11-29 21:31:02,439 - INFO  [main:ZKAuditProvider@42] - ZooKeeper audit is disabled.
2026-11-29 21:31:02,453 - ERROR [main:ServiceUtils@42] - Exiting JVM with code 1
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if portTaken(logTail(path, 0, logTailLines)) {
		t.Fatalf("the test's log is too short: its last %d lines already say it", logTailLines)
	}
	if !portTaken(logTail(path, 0, 1000)) {
		t.Error("a BindException above a long stack trace is not found")
	}
	if portTaken(strings.Split(strings.ReplaceAll(log, "Address already in use", "Permission denied"), "\n")) {
		t.Error("another BindException is taken for a port in use")
	}
	if !portTaken([]string{`{"level":"fatal","msg":"listen tcp 127.0.0.1:2380: bind: address already in use"}`}) {
		t.Error("Go's bind error is not found")
	}
}

// BenchmarkProcessesStart measures a start of each backend of kinds on
// the generic cluster, to every node ready and the cluster formed, and its
// stop: `go test -run '^$' -bench ProcessesStart -benchtime 3x
// ./clusters/local` (figures in docs/backends.md).
func BenchmarkProcessesStart(b *testing.B) {
	gate.Need(b, "redis-server")
	exe, env := testexe.Node()
	for _, name := range backend.All() {
		b.Run(name, func(b *testing.B) {
			if why := backend.BuiltReason(name); why != "" {
				b.Skip(why)
			}
			for b.Loop() {
				c, err := NewProcesses(name, Options{Dir: b.TempDir(), Exe: exe, ExeEnv: env})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				err = c.Start(ctx)
				cancel()
				c.Stop(context.Background())
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
