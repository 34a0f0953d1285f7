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
	"github.com/locktest/locktest/internal/gate"
)

func skipWithoutSentinel(t *testing.T) {
	t.Helper()
	gate.Need(t, "redis-server")
	gate.Need(t, "redis-sentinel")
}

// startSentinel starts a sentinel cluster and stops it when the test ends,
// checking that the stop left no process behind.
func startSentinel(t *testing.T, opts SentinelOptions) *Sentinel {
	t.Helper()
	skipWithoutSentinel(t)
	opts.Dir = t.TempDir()
	s, err := NewSentinel(opts)
	return started(t, s, err, 30*time.Second)
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
	tests := []struct {
		opts SentinelOptions
		want string
	}{
		{SentinelOptions{Replicas: 3, Dir: t.TempDir()}, "Replicas must be 1 or 2"},
		{SentinelOptions{Sentinels: -1, Dir: t.TempDir()}, "Sentinels must be at least 1"},
		{SentinelOptions{}, "Dir"},
	}
	for _, tt := range tests {
		if _, err := NewSentinel(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewSentinel(%+v) = %v, want an error containing %q", tt.opts, err, tt.want)
		}
	}
	for _, p := range []map[string]string{{"replicas": "x"}, {"down-after": "soon"}, {"failover-timeout": "-1s"}} {
		if _, err := New("redis-sentinel", Options{Dir: t.TempDir(), Params: p}); err == nil {
			t.Errorf("params %v accepted", p)
		}
	}
}

// A started cluster has one master, its replicas linked, three sentinels
// agreeing on the master; killing the master makes Sentinel promote a
// replica, and the old master, restarted, becomes a replica of the new one.
func TestSentinelFailover(t *testing.T) {
	s := startSentinel(t, SentinelOptions{Replicas: 2})
	nodes := s.Nodes()
	masters, replicas, sents := byRole(nodes, RoleMaster), byRole(nodes, RoleReplica), byRole(nodes, RoleSentinel)
	if len(masters) != 1 || len(replicas) != 2 || len(sents) != 3 || masters[0].Name != "n1" {
		t.Fatalf("nodes %+v: want master n1, 2 replicas, 3 sentinels", nodes)
	}
	if got := s.Targets(); len(got) != 3 || hasRole(got, RoleSentinel) {
		t.Errorf("Targets %+v, want the 3 data nodes", got)
	}
	ctx := context.Background()
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
	if m, err := s.Master(ctx); err != nil || m.Name != "n1" {
		t.Fatalf("Master = %+v, %v; want n1", m, err)
	}

	if err := s.Kill(ctx, masters[0]); err != nil {
		t.Fatal(err)
	}
	nm, err := s.WaitFailover(ctx, masters[0])
	if err != nil {
		t.Fatal(err)
	}
	if nm.Name == "n1" || nm.Role != RoleMaster {
		t.Fatalf("new master %+v", nm)
	}
	if got := byRole(s.Nodes(), RoleMaster); len(got) != 1 || got[0].Name != nm.Name {
		t.Errorf("Nodes names masters %+v, want %s", got, nm.Name)
	}
	if v, err := client(t, nm).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Errorf("new master has k = %q, %v", v, err)
	}

	if err := s.Restart(ctx, masters[0]); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = backend.Poll(wctx, func() error {
		role, err := backend.RedisRole(wctx, masters[0].Addr)
		if err == nil && role != "slave" {
			err = fmt.Errorf("ROLE %s", role)
		}
		return err
	})
	if err != nil {
		t.Errorf("restarted old master not turned into a replica: %v", err)
	}
}

func TestSentinelPauseAndLogs(t *testing.T) {
	s := startSentinel(t, SentinelOptions{Replicas: 1})
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
