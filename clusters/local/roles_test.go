package local

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/testcluster"
)

// etcdRoles reads every member's role with Role; an unreadable one is "?".
func etcdRoles(e *Processes) map[string]string {
	out := map[string]string{}
	for _, n := range e.Nodes() {
		r, err := e.Role(context.Background(), n)
		if err != nil {
			r = "?"
		}
		out[n.Name] = r
	}
	return out
}

// Role names the member that its own status reports as leader, and follows
// the leadership when that member is killed.
func TestEtcdRoleFollowsTheLeader(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	nodes := e.Nodes()
	leader := func(skip string) (string, error) { return testcluster.EtcdLeader(context.Background(), nodes, skip) }
	var first string
	eventually(t, "Role to name the leader the members report", func() error {
		l, err := leader("")
		if err != nil {
			return err
		}
		want := map[string]string{"n1": backend.EtcdFollower, "n2": backend.EtcdFollower, "n3": backend.EtcdFollower}
		want[l] = backend.EtcdLeader
		if got := etcdRoles(e); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("roles %v, members say %v", got, want)
		}
		first = l
		return nil
	})
	if got := e.Roles(nodes[0]); strings.Join(got, ",") != "leader,follower" {
		t.Errorf("Roles = %v", got)
	}

	var victim clusters.Node
	for _, n := range nodes {
		if n.Name == first {
			victim = n
		}
	}
	if err := e.Kill(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Role(context.Background(), victim); err == nil {
		t.Errorf("Role of the killed %s: no error", victim.Name)
	}
	eventually(t, "Role to name the new leader", func() error {
		l, err := leader(first)
		if err != nil {
			return err
		}
		got := etcdRoles(e)
		if l == first || got[l] != backend.EtcdLeader || got[first] != "?" {
			return fmt.Errorf("roles %v, members say %s leads", got, l)
		}
		return nil
	})
	if err := e.Restart(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
}

// Role reads a Redis Cluster node's own view, and follows a failover: the
// replica of a killed master is a master once the cluster promoted it.
func TestRedisClusterRoleFollowsFailover(t *testing.T) {
	c := startRedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// byROLE asks each node's ROLE with a client of the test's own.
	byROLE := func() map[string]string {
		out := map[string]string{}
		for _, n := range c.Nodes() {
			r, err := backend.RedisRole(ctx, n.Addr)
			switch {
			case err != nil:
				r = "?"
			case r == "slave":
				r = RoleReplica
			}
			out[n.Name] = r
		}
		return out
	}
	roles := func() map[string]string {
		out := map[string]string{}
		for _, n := range c.Nodes() {
			r, err := c.Role(ctx, n)
			if err != nil {
				r = "?"
			}
			out[n.Name] = r
		}
		return out
	}
	if got, want := roles(), byROLE(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Role says %v, ROLE says %v", got, want)
	}
	victim := byRole(c.Nodes(), RoleMaster)[0]
	if err := c.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	healthy(t, ctx, c)
	got, want := roles(), byROLE()
	if fmt.Sprint(got) != fmt.Sprint(want) || got[victim.Name] != "?" {
		t.Fatalf("after %s's failover Role says %v, ROLE says %v", victim.Name, got, want)
	}
	masters := 0
	for _, r := range got {
		if r == RoleMaster {
			masters++
		}
	}
	if masters != 3 {
		t.Errorf("Role names %d masters after the failover, want 3: %v", masters, got)
	}
}
