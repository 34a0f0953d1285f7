package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needZooKeeper skips the test when java or the ZooKeeper jars are missing.
func needZooKeeper(t *testing.T) {
	t.Helper()
	if _, _, err := findZooKeeper("", ""); err != nil {
		t.Skipf("%v", err)
	}
}

// newZK builds an ensemble in a fresh temporary directory, stopped when the
// test ends.
func newZK(t *testing.T, opts ZooKeeperOptions) *ZooKeeper {
	t.Helper()
	needZooKeeper(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	z, err := NewZooKeeper(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := z.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return z
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// modes asks every peer for its mode; a peer that does not answer maps to
// its error.
func modes(z *ZooKeeper) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m := map[string]string{}
	for _, n := range z.Nodes() {
		mode, err := z.Mode(ctx, n)
		if err != nil {
			mode = "error: " + err.Error()
		}
		m[n.Name] = mode
	}
	return m
}

// wantQuorum checks that every peer serves and exactly one leads.
func wantQuorum(t *testing.T, z *ZooKeeper) {
	t.Helper()
	m := modes(z)
	leaders := 0
	for name, mode := range m {
		switch mode {
		case "leader":
			leaders++
		case "follower":
		default:
			t.Errorf("peer %s: mode %q", name, mode)
		}
	}
	if leaders != 1 {
		t.Errorf("%d leaders, want 1: %v", leaders, m)
	}
}

// settled reports whether every peer serves, one of them as leader.
func settled(z *ZooKeeper) bool {
	leaders := 0
	for _, mode := range modes(z) {
		switch mode {
		case "leader":
			leaders++
		case "follower":
		default:
			return false
		}
	}
	return leaders == 1
}

// One ensemble serves the whole life cycle: start with a leader, kill and
// restart a peer, pause and resume one, collect logs, stop twice.
func TestZooKeeperEnsemble(t *testing.T) {
	z := newZK(t, ZooKeeperOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := z.Start(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := z.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes))
	}
	for i, n := range nodes {
		if n.Name != fmt.Sprintf("n%d", i+1) || !strings.HasPrefix(n.Addr, "127.0.0.1:") || filepath.Base(n.LogPath) != "zookeeper.log" {
			t.Errorf("node %d: %+v", i, n)
		}
		cfg, err := os.ReadFile(filepath.Join(filepath.Dir(n.LogPath), "zoo.cfg"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"tickTime=200\n", "admin.enableServer=false\n", "server.3=127.0.0.1:"} {
			if !strings.Contains(string(cfg), want) {
				t.Errorf("%s zoo.cfg lacks %q", n.Name, want)
			}
		}
	}
	wantQuorum(t, z)
	if t.Failed() {
		t.FailNow()
	}

	t.Run("kill and restart rejoins", func(t *testing.T) {
		victim := nodes[0]
		for _, n := range nodes {
			if m, _ := z.Mode(ctx, n); m == "leader" {
				victim = n // the hardest case: the others elect a new leader
			}
		}
		old := z.Pids()[victim.Name]
		if err := z.Kill(ctx, victim); err != nil {
			t.Fatal(err)
		}
		if alive(old) {
			t.Fatalf("killed peer %s (pid %d) still exists", victim.Name, old)
		}
		if pid := z.Pids()[victim.Name]; pid != 0 {
			t.Fatalf("Pids says %s runs as %d after Kill", victim.Name, pid)
		}
		if err := z.Kill(ctx, victim); err != nil {
			t.Errorf("second Kill: %v", err)
		}
		if err := z.Restart(ctx, victim); err != nil {
			t.Fatal(err)
		}
		if z.Nodes()[0].Addr != nodes[0].Addr {
			t.Errorf("address changed across restart")
		}
		// Restart returns once the victim answers; the others may still be
		// electing (the victim was the leader): give the ensemble time to
		// settle before judging it.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !settled(z); {
			time.Sleep(200 * time.Millisecond)
		}
		wantQuorum(t, z)
	})

	t.Run("pause and resume", func(t *testing.T) {
		n := nodes[1]
		if err := z.Pause(ctx, n); err != nil {
			t.Fatal(err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := z.Mode(pctx, n)
		pcancel()
		if err == nil {
			t.Errorf("paused peer %s answered srvr", n.Name)
		}
		if err := z.Resume(ctx, n); err != nil {
			t.Fatal(err)
		}
		// After a resume the peer answers again; it may first have to
		// rejoin the quorum if the pause outlasted syncLimit.
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		defer rcancel()
		p := z.nodes[1].proc
		if _, err := waitZKReady(rctx, n.Addr, p); err != nil {
			t.Fatalf("resumed peer: %v", err)
		}
		if err := z.Resume(ctx, n); err != nil {
			t.Errorf("second Resume: %v", err)
		}
	})

	t.Run("collect logs", func(t *testing.T) {
		assertLogsCollected(t, z, "QuorumPeer")
	})

	t.Run("stop leaves no process", func(t *testing.T) {
		stopChecked(t, z)
		if err := z.Pause(ctx, nodes[0]); err == nil {
			t.Errorf("Pause of a stopped peer succeeded")
		}
	})
}

func TestZooKeeperPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	z := newZK(t, ZooKeeperOptions{ClientPorts: []int{0, port}})
	err = z.Start(context.Background())
	want := fmt.Sprintf("node n2: port %d on 127.0.0.1 is in use", port)
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v, want one line saying %q", err, want)
	}
	for name, pid := range z.Pids() {
		if pid != 0 {
			t.Errorf("node %s left running as %d", name, pid)
		}
	}
}

// A peer that ZooKeeper itself refuses to run (here: a corrupt data
// directory) is reported with its name, its log file and the log's last
// lines, and no peer is left running.
func TestZooKeeperBadDataDir(t *testing.T) {
	dir := t.TempDir()
	z := newZK(t, ZooKeeperOptions{Dir: dir})
	// The directory of snapshots and transaction logs is a file.
	data := filepath.Join(dir, "nodes", "n2", "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "version-2"), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := z.Start(ctx)
	logPath := filepath.Join(dir, "nodes", "n2", "zookeeper.log")
	if err == nil || !strings.Contains(err.Error(), "node n2") || !strings.Contains(err.Error(), logPath) ||
		!strings.Contains(err.Error(), "exited during start-up") {
		t.Fatalf("err = %v, want it to name n2, say it exited and quote %s", err, logPath)
	}
	pids := z.Pids()
	for name, pid := range pids {
		if pid != 0 {
			t.Errorf("node %s left running as %d", name, pid)
		}
	}
	t.Logf("start error: %v", err)
}

func TestZooKeeperMissingInstall(t *testing.T) {
	_, err := NewZooKeeper(ZooKeeperOptions{Dir: t.TempDir(), Java: "/nonexistent/java"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/java") || !strings.Contains(err.Error(), "make setup") {
		t.Errorf("missing java: err = %v", err)
	}
	jars := t.TempDir()
	_, err = NewZooKeeper(ZooKeeperOptions{Dir: t.TempDir(), Java: os.Args[0], JarDir: jars})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(jars, "zookeeper.jar")) || !strings.Contains(err.Error(), "make setup") {
		t.Errorf("missing jars: err = %v", err)
	}
}

func TestZooKeeperOptionErrors(t *testing.T) {
	needZooKeeper(t)
	for _, opts := range []ZooKeeperOptions{
		{},
		{Dir: "x", Nodes: -1},
		{Dir: "x", Nodes: 1, ClientPorts: []int{1, 2}},
		{Dir: "x", ClientPorts: []int{7000, 7000}},
		{Dir: "x", ClientPorts: []int{70000}},
		{Dir: "x", TickTime: 1500 * time.Microsecond},
	} {
		if _, err := NewZooKeeper(opts); err == nil {
			t.Errorf("NewZooKeeper(%+v) succeeded", opts)
		}
	}
	if _, err := New("zookeeper", Options{Dir: "x", Params: map[string]string{"tick-time": "soon"}}); err == nil ||
		!strings.Contains(err.Error(), "tick-time") {
		t.Errorf("bad tick-time param: err = %v", err)
	}
	c, err := New("zookeeper", Options{Dir: "x", Params: map[string]string{"tick-time": "100ms"}})
	if err != nil {
		t.Fatal(err)
	}
	zk, ok := c.(*ZooKeeper)
	if !ok || zk.TickTime() != 100*time.Millisecond || len(zk.Nodes()) != 3 {
		t.Errorf("New(zookeeper) = %#v", c)
	}
}

// One peer runs standalone.
func TestZooKeeperStandalone(t *testing.T) {
	z := newZK(t, ZooKeeperOptions{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := z.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if m := modes(z); m["n1"] != "standalone" || len(m) != 1 {
		t.Errorf("modes %v, want n1 standalone", m)
	}
}

// A peer whose port was taken between its pick and its bind logs a
// BindException above a stack trace longer than the tail an error quotes:
// the start log is read whole for it (TestCuratorLock's ZooKeeper failed
// its start under stress-ng at -p 3, the BindException 13 lines above the
// log's end, and was not retried on other ports).
func TestZooKeeperPortTakenIsFoundAboveItsStack(t *testing.T) {
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
	if tail := logTail(path, 0, logTailLines); zkPortTaken(tail) {
		t.Fatalf("the test's log is too short: its last %d lines already say it", logTailLines)
	}
	if !zkPortTaken(logTail(path, 0, 500)) {
		t.Error("a BindException above a long stack trace is not found")
	}
	if zkPortTaken(strings.Split(strings.ReplaceAll(log, "Address already in use", "Permission denied"), "\n")) {
		t.Error("another BindException is taken for a port in use")
	}
}
