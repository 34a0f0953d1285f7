package backend

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters"
)

// TestOutlinesGolden: the outline of each backend's cluster (its nodes,
// the role each starts with, the nodes a process fault picks from and the
// roles each node can have), at its default size and at others, is the
// one in testdata/outlines.golden (UPDATE_GOLDEN=1 rewrites it). A run
// checks --target's pins against these before anything starts.
func TestOutlinesGolden(t *testing.T) {
	var b strings.Builder
	for _, tc := range []struct {
		backend string
		nodes   int
		params  map[string]string
	}{
		{Redis, 0, nil},
		{Redis, 3, nil},
		{RedisSentinel, 0, nil},
		{RedisSentinel, 2, map[string]string{"down-after": "300ms"}},
		{RedisCluster, 0, nil},
		{Etcd, 0, nil},
		{Etcd, 1, nil},
		{ZooKeeper, 0, nil},
		{ZooKeeper, 1, nil},
		{MySQL, 0, nil},
		{Postgres, 0, map[string]string{"a-provider-param": "its value"}},
		{Nats, 0, nil},
	} {
		o, err := NewOutline(tc.backend, tc.nodes, tc.params)
		if err != nil {
			t.Fatalf("%s of %d nodes: %v", tc.backend, tc.nodes, err)
		}
		fmt.Fprintf(&b, "%s, %d nodes:\n", tc.backend, tc.nodes)
		for _, n := range o.Nodes() {
			fmt.Fprintf(&b, "  %s starts as %q, can be %v\n", n.Name, n.Role, o.Roles(n))
		}
		var targets []string
		for _, n := range o.Targets() {
			targets = append(targets, n.Name)
		}
		fmt.Fprintf(&b, "  targets %s\n", strings.Join(targets, ", "))
	}
	matchGolden(t, "outlines", "outlines.golden", b.String())
}

// TestOutlineRefuses: an outline is refused for what NewLayout refuses (a
// backend that does not exist, a size or a value of the backend's own
// params it does not take), and it neither starts nor reads a role.
func TestOutlineRefuses(t *testing.T) {
	for _, tc := range []struct {
		backend string
		nodes   int
		params  map[string]string
		want    string
	}{
		{"meteor", 0, nil, `no backend "meteor"`},
		{Etcd, -1, nil, "want at least 1"},
		{Etcd, 0, map[string]string{EtcdParamTickMs: "soon"}, EtcdParamTickMs},
	} {
		if _, err := NewOutline(tc.backend, tc.nodes, tc.params); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewOutline(%s, %d, %v) = %v, want an error saying %q", tc.backend, tc.nodes, tc.params, err, tc.want)
		}
	}
	o, err := NewOutline(Etcd, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(context.Background()); err == nil {
		t.Error("an outline started")
	}
	if role, err := o.Role(context.Background(), clusters.Node{Name: "n1"}); err == nil {
		t.Errorf("an outline's node has the role %q now", role)
	}
}
