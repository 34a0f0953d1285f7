package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/testcluster"
)

// testEtcdOptions returns options whose members are this test binary (see
// TestMain).
func testEtcdOptions(t *testing.T) EtcdOptions {
	return EtcdOptions{Dir: t.TempDir(), Exe: []string{os.Args[0]}, ExeEnv: []string{nodeEnv + "=etcd"}}
}

// startEtcd starts a cluster and stops it when the test ends.
func startEtcd(t *testing.T, opts EtcdOptions) *Etcd {
	t.Helper()
	e, err := NewEtcd(opts)
	return started(t, e, err, 30*time.Second)
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

func put(t *testing.T, c *clientv3.Client, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, k, v); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

// eventually polls cond until it holds or 15s passed (testcluster.Eventually).
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testcluster.Eventually(t, 15*time.Second, what, cond)
}

func TestEtcdStartReadyStop(t *testing.T) {
	t.Parallel()
	e := startEtcd(t, testEtcdOptions(t))
	ns := e.Nodes()
	if len(ns) != 3 {
		t.Fatalf("got %d members, want the default 3", len(ns))
	}
	c := etcdClient(t, ns...)
	leaders := map[uint64]bool{}
	for i, n := range ns {
		if want := fmt.Sprintf("n%d", i+1); n.Name != want || n.Role != "" {
			t.Errorf("member %d is %q role %q, want %q with no role", i, n.Name, n.Role, want)
		}
		st, err := status(c, n)
		if err != nil {
			t.Fatalf("status of %s: %v", n.Name, err)
		}
		leaders[st.Leader] = true
		for _, f := range []string{"etcd.log", "data/member/wal"} {
			if _, err := os.Stat(filepath.Join(filepath.Dir(n.LogPath), f)); err != nil {
				t.Errorf("%s: %v", n.Name, err)
			}
		}
	}
	if len(leaders) != 1 || leaders[0] {
		t.Errorf("members name leaders %v, want one and the same", leaders)
	}
	put(t, c, "k", "v")
	pids := e.Pids()
	for name, pid := range pids {
		if pid == 0 || procGone(pid) {
			t.Fatalf("member %s: pid %d not running", name, pid)
		}
	}
	stopChecked(t, e)
	ctx := context.Background()
	// A stopped cluster starts again from its data directories, on the
	// same addresses, with its data.
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
	r, err := etcdClient(t, e.Nodes()...).Get(gctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("k after restart of the cluster: %v %v", r, err)
	}
}

// Killing the leader leaves a working majority; the restarted member
// rejoins on its data directory and catches up with what it missed.
func TestEtcdKillRestartRejoins(t *testing.T) {
	t.Parallel()
	e := startEtcd(t, testEtcdOptions(t))
	ns := e.Nodes()
	c := etcdClient(t, ns...)
	st, err := status(c, ns[0])
	if err != nil {
		t.Fatal(err)
	}
	var victim clusters.Node
	var others []clusters.Node
	for _, n := range ns {
		s, err := status(c, n)
		if err != nil {
			t.Fatal(err)
		}
		if s.Header.MemberId == st.Leader {
			victim = n
		} else {
			others = append(others, n)
		}
	}
	if victim.Name == "" {
		t.Fatalf("no member is the leader %x", st.Leader)
	}
	put(t, c, "before", "1")
	pid := e.Pids()[victim.Name]
	ctx := context.Background()
	if err := e.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if !procGone(pid) {
		t.Fatalf("/proc/%d still exists after Kill", pid)
	}
	if got := e.Pids()[victim.Name]; got != 0 {
		t.Fatalf("Pids reports %d after Kill", got)
	}
	if err := e.Kill(ctx, victim); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	if _, err := status(c, victim); err == nil {
		t.Fatal("a killed member answered")
	}
	// The majority elects a new leader and takes writes: asked again until
	// it does, since an election on a loaded machine can outlast one
	// put's timeout.
	during := etcdClient(t, others...)
	eventually(t, "a put to the majority after the leader's kill", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := during.Put(ctx, "during", "2")
		return err
	})
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
	eventually(t, "restarted member catches up", func() error {
		gctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		r, err := vc.Get(gctx, "during", clientv3.WithSerializable())
		if err != nil {
			return err
		}
		if len(r.Kvs) != 1 {
			return fmt.Errorf("%s does not have the write made while it was down", victim.Name)
		}
		return nil
	})
	r, err := vc.Get(ctx, "before", clientv3.WithSerializable())
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("write from before the kill: %v %v", r, err)
	}
}

func TestEtcdPauseResume(t *testing.T) {
	t.Parallel()
	e := startEtcd(t, testEtcdOptions(t))
	ns := e.Nodes()
	c := etcdClient(t, ns...)
	ctx := context.Background()
	n := ns[2]
	if err := e.Pause(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, err := status(c, n); err == nil {
		t.Fatal("a paused member answered")
	}
	put(t, etcdClient(t, ns[0], ns[1]), "k", "v") // the majority still works
	if err := e.Resume(ctx, n); err != nil {
		t.Fatal(err)
	}
	eventually(t, "resumed member answers", func() error {
		st, err := status(c, n)
		if err == nil && st.Leader == 0 {
			err = fmt.Errorf("no leader")
		}
		return err
	})
	if err := e.Resume(ctx, n); err != nil {
		t.Errorf("second Resume: %v", err)
	}
	// A paused member still stops promptly: Stop thaws it after SIGTERM.
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

func TestEtcdCollectLogs(t *testing.T) {
	t.Parallel()
	assertLogsCollected(t, startEtcd(t, testEtcdOptions(t)), "ready to serve client requests")
}

// assertStartFails checks that Start fails with one line naming the member
// and its log and saying want, and that no member is left running.
func assertStartFails(t *testing.T, e *Etcd, node, want string) {
	t.Helper()
	t.Cleanup(func() { e.Stop(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.Start(ctx)
	if err == nil {
		t.Fatal("Start succeeded")
	}
	var logPath string
	for _, n := range e.Nodes() {
		if n.Name == node {
			logPath = n.LogPath
		}
	}
	msg := err.Error()
	for _, w := range []string{"node " + node + ":", want, logPath} {
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

func TestEtcdPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	opts := testEtcdOptions(t)
	opts.ClientPorts = []int{0, port}
	e, err := NewEtcd(opts)
	if err != nil {
		t.Fatal(err)
	}
	assertStartFails(t, e, "n2", fmt.Sprintf("client port %d on 127.0.0.1 is in use", port))
}

// A member whose port is taken after the check, while it starts, exits;
// the error quotes its own last words.
func TestEtcdBindFailureQuotesLog(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	opts := testEtcdOptions(t)
	e, err := NewEtcd(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The peer port of n3 is taken: only the member itself finds out.
	e.pickPorts()
	e.nodes[2].peerPort = l.Addr().(*net.TCPAddr).Port
	e.bootstrapped = true // no retry on other ports
	assertStartFails(t, e, "n3", "address already in use")
}

func TestEtcdBadDataDir(t *testing.T) {
	t.Parallel()
	opts := testEtcdOptions(t)
	bad := filepath.Join(opts.Dir, "nodes", "n2", "data")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := NewEtcd(opts)
	if err != nil {
		t.Fatal(err)
	}
	assertStartFails(t, e, "n2", "exited during start-up")
}

func TestEtcdOptionErrors(t *testing.T) {
	self := []string{os.Args[0]}
	for _, tc := range []struct {
		opts EtcdOptions
		want string
	}{
		{EtcdOptions{Exe: self}, "Dir (the run directory) is required"},
		{EtcdOptions{Dir: "x", Exe: self, Nodes: -1}, "Nodes must be at least 1"},
		{EtcdOptions{Dir: "x", Exe: self, Nodes: 1, ClientPorts: []int{1, 2}}, "2 client ports given for 1 nodes"},
		{EtcdOptions{Dir: "x", Exe: self, TickMs: 100, ElectionMs: 200}, "at least 5 heartbeats"},
		{EtcdOptions{Dir: "x", Exe: []string{"/nonexistent/locktest"}}, `node program "/nonexistent/locktest" not found`},
	} {
		_, err := NewEtcd(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewEtcd(%+v) = %v, want an error saying %q", tc.opts, err, tc.want)
		}
	}
	for _, tc := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"tick": "10"}, `unknown cluster param "tick"`},
		{map[string]string{backend.EtcdParamElectionMs: "soon"}, "must be a positive number"},
	} {
		_, err := New("etcd", Options{Dir: t.TempDir(), Exe: self, Params: tc.params})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(etcd, %v) = %v, want an error saying %q", tc.params, err, tc.want)
		}
	}
	cl, err := New("etcd", Options{Dir: t.TempDir(), Exe: self, Params: map[string]string{backend.EtcdParamTickMs: "10", backend.EtcdParamElectionMs: "100"}})
	if err != nil {
		t.Fatal(err)
	}
	if e := cl.(*Etcd); e.tickMs != 10 || e.electionMs != 100 || len(e.nodes) != 3 {
		t.Errorf("params not applied: tick %d election %d, %d nodes", e.tickMs, e.electionMs, len(e.nodes))
	}
}
