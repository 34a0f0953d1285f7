package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
)

// newNodesClient builds a client of impl name over nodes for process p.
func newNodesClient(t *testing.T, name string, nodes []clusters.Node, p int) impls.Client {
	return testcluster.Client(t, name, nodes, p, now, nil)
}

func TestReplicatedConfigErrors(t *testing.T) {
	sentinelOnly := []impls.Node{{Name: "n1", Addr: "127.0.0.1:1", Role: "master"}}
	tests := []struct {
		impl string
		cfg  impls.Config
		want string
	}{
		{"redis-replicated", impls.Config{Nodes: sentinelOnly}, "Config.Now"},
		{"redis-replicated", impls.Config{Now: now}, "Config.Nodes is empty"},
		{"redis-replicated", impls.Config{Now: now, Nodes: sentinelOnly}, `no node with Role "sentinel"`},
		{"redis-replicated", impls.Config{Now: now, Nodes: sentinelOnly, Params: map[string]string{"x": "1"}}, `unknown param "x"`},
		{"redis-cluster", impls.Config{Now: now, Nodes: sentinelOnly, Params: map[string]string{"master-name": "m"}}, `unknown param "master-name"`},
	}
	for _, tt := range tests {
		i, _ := impls.Lookup(tt.impl)
		c, err := i.New(context.Background(), tt.cfg)
		if err == nil {
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s New(%+v): %v, want %q", tt.impl, tt.cfg, err, tt.want)
		}
	}
}

// Mutual exclusion through Sentinel; after the master is killed and a
// replica promoted, the clients follow the new master and the lease names
// it.
func TestReplicatedFollowsFailover(t *testing.T) {
	gate.Need(t, "redis-server", "redis-sentinel")
	s := startKind(t, "redis-sentinel", local.Options{Dir: t.TempDir(), Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newNodesClient(t, "redis-replicated", s.Nodes(), 1)
	b := newNodesClient(t, "redis-replicated", s.Nodes(), 2)
	const ttl = 30 * time.Second
	la, err := a.Acquire(ctx, "L", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if la.Node != "n1" || !la.HasToken || la.Token != 1 {
		t.Errorf("lease %+v: want node n1, token 1", la)
	}
	if _, err := b.Acquire(ctx, "L", ttl); !errors.Is(err, impls.ErrNotAcquired) {
		t.Fatalf("contended acquire: %v", err)
	}
	if _, err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Release(ctx, la); !errors.Is(err, impls.ErrNotHeld) {
		t.Errorf("second release: %v, want ErrNotHeld", err)
	}

	old := s.Nodes()[0] // n1, the master it starts with
	if err := s.Kill(ctx, old); err != nil {
		t.Fatal(err)
	}
	nm, err := testcluster.SentinelFailover(ctx, s.Nodes(), old)
	if err != nil {
		t.Fatal(err)
	}
	// The first commands after the kill may fail while go-redis drops its
	// connections to the dead master; the next ones reach the new one.
	var lb impls.Lease
	for i := 0; ; i++ {
		lb, err = b.Acquire(ctx, fmt.Sprintf("M%d", i), ttl)
		if err == nil {
			break
		}
		if i == 20 || ctx.Err() != nil {
			t.Fatalf("no acquire after the failover: %v", err)
		}
	}
	if lb.Node != nm.Name {
		t.Errorf("lease after failover from %q, want the new master %s", lb.Node, nm.Name)
	}
}

// Locks spread over the cluster's slots and masters; each is exclusive.
func TestClusterLocks(t *testing.T) {
	gate.Need(t, "redis-server", "redis-cli")
	c := startKind(t, "redis-cluster", local.Options{Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	masters := map[string]bool{}
	for _, n := range c.Nodes() {
		if n.Role == "master" {
			masters[n.Name] = true
		}
	}
	a := newNodesClient(t, "redis-cluster", c.Nodes(), 1)
	b := newNodesClient(t, "redis-cluster", c.Nodes(), 2)
	served := map[string]bool{}
	for i := range 12 {
		lock := fmt.Sprintf("lock-%d", i)
		l, err := a.Acquire(ctx, lock, 30*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", lock, err)
		}
		if !masters[l.Node] || l.Lock != lock || l.Token != 1 {
			t.Errorf("%s: lease %+v, want a master's, token 1", lock, l)
		}
		served[l.Node] = true
		if _, err := b.Acquire(ctx, lock, 30*time.Second); !errors.Is(err, impls.ErrNotAcquired) {
			t.Errorf("%s contended: %v", lock, err)
		}
		if _, err := a.Release(ctx, l); err != nil {
			t.Errorf("%s release: %v", lock, err)
		}
	}
	if len(served) < 2 {
		t.Errorf("12 locks all served by %v, want them spread over the masters", served)
	}
}
