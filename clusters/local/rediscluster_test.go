package local

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/testbin"
)

func TestParseClusterNodes(t *testing.T) {
	byAddr := map[string]string{"a:1": "n1", "a:2": "n2", "a:3": "n3", "a:4": "n4", "a:5": "n5", "a:6": "n6"}
	all := map[string]int{"n1": 1, "n2": 2, "n3": 3, "n4": 4, "n5": 5, "n6": 6}
	healthy := `i1 a:1@11 myself,master - 0 0 1 connected 0-5460
i2 a:2@12 master - 0 0 2 connected 5461-10922
i3 a:3@13 master - 0 0 3 connected 10923-16383
i4 a:4@14 slave i1 0 0 1 connected
i5 a:5@15 slave i2 0 0 2 connected
i6 a:6@16 slave i3 0 0 3 connected`
	failedOver := `i1 a:1@11 master,fail - 0 0 1 disconnected
i2 a:2@12 myself,master - 0 0 2 connected 5461-10922
i3 a:3@13 master - 0 0 3 connected 10923-16383
i4 a:4@14 master - 0 0 7 connected 0-5460
i5 a:5@15 slave i2 0 0 2 connected
i6 a:6@16 slave i3 0 0 3 connected`
	n1Down := map[string]int{"n1": 0, "n2": 2, "n3": 3, "n4": 4, "n5": 5, "n6": 6}
	tests := []struct {
		name, text string
		pids       map[string]int
		want       string // "" for healthy, else part of the error
		masters    []string
	}{
		{"healthy", healthy, all, "", []string{"n1", "n2", "n3"}},
		{"master down, not failed over", healthy, n1Down, "master n1 serves 5461 slots but is down", nil},
		{"failed over", failedOver, n1Down, "", []string{"n2", "n3", "n4"}},
		{"slots missing", strings.Replace(healthy, "10923-16383", "10923-16000", 1), all, "owning 16384", nil},
		{"unknown node", strings.Replace(healthy, "a:6@16", "b:6@16", 1), all, "unknown node b:6", nil},
		{"replica link down", strings.Replace(healthy, "0 0 2 connected\ni6", "0 0 2 disconnected\ni6", 1), all, "replica n5", nil},
		{"bad line", "i1 a:1", all, "bad CLUSTER NODES line", nil},
	}
	for _, tt := range tests {
		roles, err := parseClusterNodes(tt.text, byAddr, tt.pids, 3)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
		for _, m := range tt.masters {
			if roles[m] != RoleMaster {
				t.Errorf("%s: %s has role %q, want master", tt.name, m, roles[m])
			}
		}
	}
}

// startRedisCluster starts a Redis Cluster of the default shape, and
// stops it when the test ends; it skips the test without redis-server or
// redis-cli.
func startRedisCluster(t *testing.T) *RedisCluster {
	t.Helper()
	testbin.Need(t, "redis-server")
	testbin.Need(t, "redis-cli")
	c, err := NewRedisCluster(RedisClusterOptions{Dir: t.TempDir()})
	return started(t, c, err, time.Minute)
}

// A started cluster has 3 masters and 3 replicas; a killed master is failed
// over to its replica, and when restarted it rejoins as a replica.
func TestRedisClusterFailover(t *testing.T) {
	c := startRedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := c.Nodes()
	masters, replicas := byRole(nodes, RoleMaster), byRole(nodes, RoleReplica)
	if len(nodes) != 6 || len(masters) != 3 || len(replicas) != 3 {
		t.Fatalf("nodes %+v: want 3 masters and 3 replicas", nodes)
	}
	for _, n := range nodes {
		info, err := client(t, n).ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Errorf("%s: CLUSTER INFO %v", n.Name, err)
		}
	}
	victim := masters[0]
	if err := c.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	after := byRole(c.Nodes(), RoleMaster)
	if len(after) != 3 {
		t.Fatalf("masters after failover %+v", after)
	}
	for _, m := range after {
		if m.Name == victim.Name {
			t.Fatalf("killed %s is still a serving master", victim.Name)
		}
	}
	if err := c.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if got := roleOf(c.Nodes(), victim.Name); got != RoleReplica {
		t.Errorf("restarted %s has role %q, want replica", victim.Name, got)
	}
}

func roleOf(nodes []clusters.Node, name string) string {
	for _, n := range nodes {
		if n.Name == name {
			return n.Role
		}
	}
	return ""
}

func TestRedisClusterOptionErrors(t *testing.T) {
	testbin.Need(t, "redis-server")
	if _, err := NewRedisCluster(RedisClusterOptions{Masters: 2, Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "at least 3") {
		t.Errorf("Masters 2: %v", err)
	}
	if _, err := New("redis-cluster", Options{Nodes: 5, Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "even") {
		t.Errorf("5 nodes: %v", err)
	}
	if _, err := New("redis-cluster", Options{Dir: t.TempDir(), Params: map[string]string{"node-timeout": "x"}}); err == nil {
		t.Error("bad node-timeout accepted")
	}
}
