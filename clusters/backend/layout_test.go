package backend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
)

func TestNewLayout(t *testing.T) {
	tests := []struct {
		backend string
		nodes   int
		params  map[string]string
		want    string // name:kind, space-separated
		err     string
	}{
		{backend: Redis, want: "n1:redis"},
		{backend: Redis, nodes: 5, want: "n1:redis n2:redis n3:redis n4:redis n5:redis"},
		{backend: RedisSentinel, want: "n1:redis n2:redis n3:redis s1:sentinel s2:sentinel s3:sentinel"},
		{backend: RedisSentinel, params: map[string]string{"replicas": "1"}, want: "n1:redis n2:redis s1:sentinel s2:sentinel s3:sentinel"},
		{backend: RedisSentinel, nodes: 2, want: "n1:redis n2:redis s1:sentinel s2:sentinel s3:sentinel"},
		{backend: RedisSentinel, params: map[string]string{"replicas": "3"}, err: "Replicas must be 1 or 2"},
		{backend: RedisCluster, want: "n1:redis n2:redis n3:redis n4:redis n5:redis n6:redis"},
		{backend: RedisCluster, nodes: 5, err: "want an even number, at least 6"},
		{backend: RedisCluster, params: map[string]string{"node-timeout": "soon"}, err: "node-timeout"},
		{backend: Etcd, want: "n1:etcd n2:etcd n3:etcd"},
		{backend: Etcd, params: map[string]string{"tick-ms": "x"}, err: "tick-ms"},
		{backend: ZooKeeper, nodes: 1, want: "n1:zookeeper"},
		{backend: MySQL, want: "n1:mariadb"},
		{backend: Postgres, want: "n1:postgres"},
		{backend: Postgres, nodes: 3, err: "the SQL backends run one server"},
		{backend: Redis, params: map[string]string{"replicas": "1"}, err: `redis: unknown cluster param "replicas" (redis has none)`},
		{backend: Etcd, params: map[string]string{"ticks": "1"}, err: `etcd: unknown cluster param "ticks" (known: tick-ms, election-ms)`},
		{backend: "consul", err: `no backend "consul"`},
		{backend: Redis, nodes: -1, err: "want at least 1"},
	}
	for _, tt := range tests {
		l, err := NewLayout(tt.backend, tt.nodes, tt.params)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("NewLayout(%s, %d, %v) = %v, want an error with %q", tt.backend, tt.nodes, tt.params, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewLayout(%s, %d, %v): %v", tt.backend, tt.nodes, tt.params, err)
			continue
		}
		var got []string
		for _, n := range l.Nodes {
			got = append(got, n.Name+":"+n.Kind)
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("NewLayout(%s, %d, %v) nodes = %s, want %s", tt.backend, tt.nodes, tt.params, g, tt.want)
		}
	}
}

func TestLayoutSettings(t *testing.T) {
	s, err := NewLayout(RedisSentinel, 0, map[string]string{"down-after": "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Sentinel.DownAfter != 2*time.Second || s.Sentinel.FailoverTimeout != DefaultFailoverTimeout || s.Sentinel.Replicas != 2 {
		t.Errorf("sentinel settings = %+v", s.Sentinel)
	}
	c, err := NewLayout(RedisCluster, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Masters != 4 || c.NodeTimeout != DefaultRedisClusterNodeTimeout {
		t.Errorf("cluster masters %d node timeout %v", c.Masters, c.NodeTimeout)
	}
	e, err := NewLayout(Etcd, 0, map[string]string{"election-ms": "500"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Etcd.ElectionMs != 500 || e.Etcd.TickMs != DefaultEtcdTiming.TickMs {
		t.Errorf("etcd timing = %+v", e.Etcd)
	}
}

func TestLayoutRolesAndTargets(t *testing.T) {
	s, _ := NewLayout(RedisSentinel, 0, nil)
	var nodes []clusters.Node
	for _, n := range s.Nodes {
		nodes = append(nodes, clusters.Node{Name: n.Name, Addr: "127.0.0.1:1"})
	}
	var targets []string
	for _, n := range s.Targets(nodes) {
		targets = append(targets, n.Name)
	}
	if got := strings.Join(targets, " "); got != "n1 n2 n3" {
		t.Errorf("sentinel targets = %s, want the data nodes", got)
	}
	if got := strings.Join(s.Roles("s2"), " "); got != RoleSentinel {
		t.Errorf("roles of a sentinel = %s", got)
	}
	if got := strings.Join(s.Roles("n2"), " "); got != "master replica" {
		t.Errorf("roles of a data node = %s", got)
	}
	// A sentinel is a sentinel without asking anyone.
	if r, err := s.Role(context.Background(), nodes, "s1"); err != nil || r != RoleSentinel {
		t.Errorf("Role(s1) = %q, %v", r, err)
	}
	if _, err := s.Role(context.Background(), nodes, "n9"); err == nil || !strings.Contains(err.Error(), `no node "n9"`) {
		t.Errorf("Role(n9) = %v, want no such node", err)
	}
	for b, want := range map[string]string{Redis: "", MySQL: "", Etcd: "leader follower", ZooKeeper: "leader follower", RedisCluster: "master replica"} {
		l, err := NewLayout(b, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(l.Roles("n1"), " "); got != want {
			t.Errorf("%s roles = %q, want %q", b, got, want)
		}
		if l.HasRoles() != (want != "") {
			t.Errorf("%s HasRoles = %v", b, l.HasRoles())
		}
	}
	z1, _ := NewLayout(ZooKeeper, 1, nil)
	if got := strings.Join(z1.Roles("n1"), " "); got != ZooKeeperStandalone {
		t.Errorf("one-peer zookeeper roles = %q", got)
	}
}

func TestLayoutLeavesAProvidersOwnParams(t *testing.T) {
	l, err := NewLayout(ZooKeeper, 0, map[string]string{"tick-time": "50ms", "classpath": "/x/*"}, "classpath")
	if err != nil {
		t.Fatal(err)
	}
	if l.ZooKeeperTick != 50*time.Millisecond {
		t.Errorf("tick = %v, want 50ms", l.ZooKeeperTick)
	}
	if _, err := NewLayout(Etcd, 0, map[string]string{"tick-ms": "10", "election-ms": "100", "program": "x"}, "program"); err != nil {
		t.Errorf("etcd with a provider's own param: %v", err)
	}
	if _, err := NewLayout(ZooKeeper, 0, map[string]string{"tick-time": "0s"}); err == nil || !strings.Contains(err.Error(), "1ms or more") {
		t.Errorf("tick-time 0s: %v", err)
	}
	if _, err := NewLayout(MySQL, 0, map[string]string{"jar": "x"}, "mariadbd"); err == nil || !strings.Contains(err.Error(), "(known: mariadbd)") {
		t.Errorf("mysql with an unknown param: %v", err)
	}
}

func TestRosterRoles(t *testing.T) {
	s, _ := NewLayout(RedisSentinel, 0, nil)
	var r Roster
	for name, want := range map[string]string{"n1": RoleMaster, "n2": RoleReplica, "s1": RoleSentinel, "s3": RoleSentinel} {
		if got := r.Role(s, name); got != want {
			t.Errorf("redis-sentinel %s: role %q, want %q", name, got, want)
		}
	}
	c, _ := NewLayout(RedisCluster, 0, nil)
	var rc Roster
	if got := rc.Role(c, "n1"); got != "" {
		t.Errorf("redis-cluster n1 before Form: role %q, want none", got)
	}
	rc.roles = map[string]string{"n1": RoleReplica}
	if got := rc.Role(c, "n1"); got != RoleReplica {
		t.Errorf("redis-cluster n1 as seen: role %q, want replica", got)
	}
}
