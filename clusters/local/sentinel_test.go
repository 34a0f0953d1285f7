package local

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/gate"
)

func skipWithoutSentinel(t *testing.T) {
	t.Helper()
	gate.Need(t, "redis-server")
	gate.Need(t, "redis-sentinel")
}

// startSentinel starts a redis-sentinel cluster of nodes data nodes on
// the generic cluster and stops it when the test ends, checking that the
// stop left no process behind.
func startSentinel(t *testing.T, nodes int) *Processes {
	t.Helper()
	skipWithoutSentinel(t)
	s, err := NewProcesses(backend.RedisSentinel, Options{Dir: t.TempDir(), Nodes: nodes})
	return started(t, s, err, time.Minute)
}

// hasRole reports whether nodes holds a node of role.
func hasRole(nodes []clusters.Node, role string) bool {
	return slices.ContainsFunc(nodes, func(n clusters.Node) bool { return n.Role == role })
}

func byRole(nodes []clusters.Node, role string) []clusters.Node {
	var out []clusters.Node
	for _, n := range nodes {
		if n.Role == role {
			out = append(out, n)
		}
	}
	return out
}

func TestSentinelOptionErrors(t *testing.T) {
	skipWithoutSentinel(t)
	for _, tc := range []struct {
		nodes  int
		params map[string]string
		want   string
	}{
		{4, nil, "Replicas must be 1 or 2"},
		{0, map[string]string{"replicas": "x"}, "replicas"},
		{0, map[string]string{"down-after": "soon"}, "down-after"},
		{0, map[string]string{"failover-timeout": "-1s"}, "failover-timeout"},
	} {
		if _, err := New(backend.RedisSentinel, Options{Dir: t.TempDir(), Nodes: tc.nodes, Params: tc.params}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(redis-sentinel, %d nodes, %v) = %v, want an error containing %q", tc.nodes, tc.params, err, tc.want)
		}
	}
}

// A started cluster has one master, its replicas linked, three sentinels
// agreeing on the master; killing the master makes Sentinel promote a
// replica, which Role then names, and the old master, restarted, becomes
// a replica of the new one.
func TestSentinelFailover(t *testing.T) {
	s := startSentinel(t, 3)
	nodes := s.Nodes()
	masters, replicas, sents := byRole(nodes, RoleMaster), byRole(nodes, RoleReplica), byRole(nodes, RoleSentinel)
	if len(masters) != 1 || len(replicas) != 2 || len(sents) != 3 || masters[0].Name != "n1" {
		t.Fatalf("nodes %+v: want master n1, 2 replicas, 3 sentinels", nodes)
	}
	if got := s.Targets(); len(got) != 3 || hasRole(got, RoleSentinel) {
		t.Errorf("Targets %+v, want the 3 data nodes", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The master's writes reach the replicas.
	if err := client(t, masters[0]).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		err := backend.Poll(ctx, func() error {
			v, err := client(t, r).Get(ctx, "k").Result()
			if err == nil && v != "v" {
				err = fmt.Errorf("got %q", v)
			}
			return err
		})
		if err != nil {
			t.Errorf("replica %s: %v", r.Name, err)
		}
	}
	if addr, err := backend.SentinelsMaster(ctx, sents); err != nil || addr != masters[0].Addr {
		t.Fatalf("the sentinels name %s, %v; want n1 at %s", addr, err, masters[0].Addr)
	}

	if err := s.Kill(ctx, masters[0]); err != nil {
		t.Fatal(err)
	}
	var nm clusters.Node
	err := backend.Poll(ctx, func() error {
		for _, n := range replicas {
			if r, err := s.Role(ctx, n); err == nil && r == RoleMaster {
				nm = n
				return nil
			}
		}
		return fmt.Errorf("no replica of %s is named master yet", masters[0].Name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := client(t, nm).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Errorf("new master %s has k = %q, %v", nm.Name, v, err)
	}

	if err := s.Restart(ctx, masters[0]); err != nil {
		t.Fatal(err)
	}
	err = backend.Poll(ctx, func() error {
		role, err := backend.RedisRole(ctx, masters[0].Addr)
		if err == nil && role != "slave" {
			err = fmt.Errorf("ROLE %s", role)
		}
		return err
	})
	if err != nil {
		t.Errorf("restarted old master not turned into a replica: %v", err)
	}
	if r, err := s.Role(ctx, masters[0]); err != nil || r != RoleReplica {
		t.Errorf("Role of the restarted old master: %q, %v; want replica", r, err)
	}
}

func TestSentinelPauseAndLogs(t *testing.T) {
	s := startSentinel(t, 2)
	ctx := context.Background()
	r := byRole(s.Nodes(), RoleReplica)[0]
	if err := s.Pause(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, r); err == nil {
		t.Error("a paused replica answered PING")
	}
	if err := s.Resume(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, r); err != nil {
		t.Errorf("resumed replica: %v", err)
	}
	if err := s.Kill(ctx, clusters.Node{Name: "x9"}); err == nil {
		t.Error("Kill of an unknown node succeeded")
	}
	dir := t.TempDir()
	if err := s.CollectLogs(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", "s1", "s2", "s3"} {
		if _, err := exec.Command("test", "-s", dir+"/"+n+".log").Output(); err != nil {
			t.Errorf("no log of %s collected", n)
		}
	}
}
