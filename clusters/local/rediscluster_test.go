package local

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/gate"
)

// startRedisCluster starts a Redis Cluster of the default shape on the
// generic cluster, and stops it when the test ends; it skips the test
// without redis-server.
func startRedisCluster(t *testing.T) *Processes {
	t.Helper()
	gate.Need(t, "redis-server")
	c, err := NewProcesses(backend.RedisCluster, Options{Dir: t.TempDir()})
	return started(t, c, err, time.Minute)
}

// healthy waits until c's cluster is healthy again and returns the roles
// it then has.
func healthy(t *testing.T, ctx context.Context, c *Processes) map[string]string {
	t.Helper()
	roles, err := backend.WaitRedisClusterHealthy(ctx, func() ([]clusters.Node, map[string]bool) {
		return c.Nodes(), backend.RunningNodes(c.Pids())
	}, backend.DefaultRedisClusterMasters)
	if err != nil {
		t.Fatal(err)
	}
	return roles
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
	roles := healthy(t, ctx, c)
	n := 0
	for name, r := range roles {
		if r == RoleMaster {
			n++
			if name == victim.Name {
				t.Fatalf("killed %s is still a serving master", victim.Name)
			}
		}
	}
	if n != 3 {
		t.Fatalf("masters after failover %v", roles)
	}
	if err := c.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if got := healthy(t, ctx, c)[victim.Name]; got != RoleReplica {
		t.Errorf("restarted %s has role %q, want replica", victim.Name, got)
	}
}

func TestRedisClusterOptionErrors(t *testing.T) {
	gate.Need(t, "redis-server")
	if _, err := New("redis-cluster", Options{Nodes: 5, Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "even") {
		t.Errorf("5 nodes: %v", err)
	}
	if _, err := New("redis-cluster", Options{Dir: t.TempDir(), Params: map[string]string{"node-timeout": "x"}}); err == nil {
		t.Error("bad node-timeout accepted")
	}
}
