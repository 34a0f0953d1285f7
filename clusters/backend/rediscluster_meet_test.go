package backend

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/testkit/gate"
)

// A node that stalls right after the CLUSTER MEETs, past the node timeout,
// makes the nodes that met it drop their handshakes, and Redis never tries
// a dropped handshake again: before CreateRedisCluster met again the nodes
// a node did not know, the cluster never formed (n1 knew 2 nodes of 6
// after 60 s on a loaded ssh lab). With the stall of a SIGSTOP of n1 for
// three node timeouts, the cluster must form and serve.
func TestCreateRedisClusterMeetsAgainAfterAStall(t *testing.T) {
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	var nodes []clusters.Node
	procs := map[string]*os.Process{}
	for i := range 6 {
		name := fmt.Sprintf("n%d", i+1)
		port := clusterPorts(t)
		nd := filepath.Join(dir, name)
		if err := os.MkdirAll(nd, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := RedisConf{Header: "test " + name, Port: port, Bind: "127.0.0.1", Dir: nd, LogFile: filepath.Join(nd, "redis.log"),
			Extra: RedisClusterConfig(time.Second, "")}
		path := filepath.Join(nd, "redis.conf")
		if err := os.WriteFile(path, []byte(conf.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("redis-server", path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		procs[name] = cmd.Process
		nodes = append(nodes, clusters.Node{Name: name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := WaitReady(ctx, KindRedis, n.Addr, 0, nil); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
	}
	stalled := false
	afterMeet = func(ns []clusters.Node) {
		p := procs[ns[0].Name]
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Errorf("SIGSTOP %s: %v", ns[0].Name, err)
			return
		}
		time.Sleep(3 * time.Second)
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Errorf("SIGCONT %s: %v", ns[0].Name, err)
		}
		stalled = true
	}
	t.Cleanup(func() { afterMeet = nil })
	if err := CreateRedisCluster(ctx, nodes, 3); err != nil {
		t.Fatalf("CreateRedisCluster with n1 stalled after the MEETs: %v", err)
	}
	if !stalled {
		t.Fatal("the stall after the MEETs did not run")
	}
	up := map[string]bool{}
	for _, n := range nodes {
		up[n.Name] = true
	}
	if _, err := WaitRedisClusterHealthy(ctx, func() ([]clusters.Node, map[string]bool) { return nodes, up }, 3); err != nil {
		t.Fatalf("the cluster formed but does not serve: %v", err)
	}
}

// clusterPorts returns a free port p on 127.0.0.1 whose cluster bus port
// p+RedisClusterBusOffset is free too.
func clusterPorts(t *testing.T) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+RedisClusterBusOffset)))
		l.Close()
		if err != nil {
			continue
		}
		bus.Close()
		return p
	}
	t.Fatal("no free port pair for a Redis Cluster node")
	return 0
}
