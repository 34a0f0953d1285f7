package docker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/images"
	"github.com/locktest/locktest/testkit/testcluster"
)

// Role names the etcd container that the members' own status reports as
// leader, and follows the leadership when that container is killed; the
// roles a node can have are leader and follower for etcd, leader and
// follower (standalone alone) for ZooKeeper, and none for Redis.
func TestDockerRoles(t *testing.T) {
	c := startCluster(t, "etcd", 3)
	ctx := context.Background()
	nodes := c.Nodes()
	leader := func(skip string) (string, error) { return testcluster.EtcdLeader(ctx, nodes, skip) }
	roles := func() map[string]string {
		out := map[string]string{}
		for _, n := range nodes {
			r, err := c.Role(ctx, n)
			if err != nil {
				r = "?"
			}
			out[n.Name] = r
		}
		return out
	}
	within := func(what string, cond func() error) {
		t.Helper()
		testcluster.Eventually(t, 60*time.Second, what, cond)
	}
	var first string
	within("Role to name the leader the members report", func() error {
		l, err := leader("")
		if err != nil {
			return err
		}
		want := map[string]string{"n1": "follower", "n2": "follower", "n3": "follower"}
		want[l] = "leader"
		if got := roles(); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("Role says %v, the members %v", got, want)
		}
		first = l
		return nil
	})
	if got := c.Roles(nodes[0]); !slices.Equal(got, []string{"leader", "follower"}) {
		t.Errorf("etcd Roles = %v", got)
	}
	if err := c.Kill(ctx, clusters.Node{Name: first}); err != nil {
		t.Fatal(err)
	}
	within("Role to name the new leader", func() error {
		l, err := leader(first)
		if err != nil {
			return err
		}
		if got := roles(); l == first || got[l] != "leader" || got[first] != "?" {
			return fmt.Errorf("Role says %v, the members say %s leads", got, l)
		}
		return nil
	})

	for _, tt := range []struct {
		backend string
		nodes   int
		want    []string
	}{
		{"zookeeper", 3, []string{"leader", "follower"}},
		{"zookeeper", 1, []string{"standalone"}},
		{"redis", 2, nil},
	} {
		other, err := New(Options{Backend: tt.backend, Nodes: tt.nodes, Dir: t.TempDir(), Lab: c.opts.Lab, Image: images.Image{Ref: "unused"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := other.Roles(other.Nodes()[0]); !slices.Equal(got, tt.want) {
			t.Errorf("%d×%s: Roles = %v, want %v", tt.nodes, tt.backend, got, tt.want)
		}
	}
}
