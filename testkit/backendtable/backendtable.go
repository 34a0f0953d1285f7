// Package backendtable is the backend × provider table test: each
// provider's tests call Run with a way to start a cluster of a backend, and
// every backend gets the same checks on every provider, against the
// backend's one definition (clusters/backend).
package backendtable

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// Start returns a started cluster of backend b with its default size,
// which it stops when t ends; it skips t, saying why, where the provider
// cannot run b here (a server this host lacks).
type Start func(t *testing.T, b string) clusters.Cluster

// stepTimeout bounds each wait of the checks.
const stepTimeout = 30 * time.Second

// Run fails where a backend of backend.All is not among provides, the
// backends the provider says it runs, and then checks (but where this
// host lacks a server that locktest builds itself, backend.BuiltReason,
// which skips the backend naming its make target), for each backend on
// the provider that start makes clusters on, in a subtest named after the
// backend:
//   - the cluster has the backend's layout (backend.NewLayout): its nodes,
//     in order, each with an address;
//   - every node serves by its kind's readiness query (backend.Ready),
//     asked from this host;
//   - a backend whose nodes have roles reads, for each node, one of the
//     roles the layout gives it (clusters.RoleReader), and the cluster's
//     fault targets are the layout's (clusters.Targeter);
//   - a target paused does not serve until it is resumed (clusters.Pauser);
//   - a target killed does not serve until it is restarted
//     (clusters.Killer), and then serves;
//   - after Stop no node serves.
//
// A provider that lacks one of these abilities for a backend fails the
// test: every provider has them all.
func Run(t *testing.T, provides []string, start Start) {
	for _, b := range backend.All() {
		if !slices.Contains(provides, b) {
			t.Errorf("the provider does not run %s", b)
		}
	}
	for _, b := range backend.All() {
		t.Run(b, func(t *testing.T) {
			if why := backend.BuiltReason(b); why != "" {
				t.Skip(why) // a server locktest builds itself, which this host lacks
			}
			layout, err := backend.NewLayout(b, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := start(t, b)
			nodes := c.Nodes()
			if len(nodes) != len(layout.Nodes) {
				t.Fatalf("%d nodes %v, want the layout's %d", len(nodes), names(nodes), len(layout.Nodes))
			}
			for i, n := range nodes {
				if n.Name != layout.Nodes[i].Name || n.Addr == "" {
					t.Errorf("node %d is %q at %q, want %s with an address", i, n.Name, n.Addr, layout.Nodes[i].Name)
				}
				if err := ready(n, layout); err != nil {
					t.Errorf("%s does not serve after the start: %v", n.Name, err)
				}
			}
			checkRoles(t, c, layout, nodes)
			targets := layout.Targets(nodes)
			if tg, ok := c.(clusters.Targeter); ok {
				targets = tg.Targets()
				if want := layout.Targets(nodes); !slices.Equal(names(targets), names(want)) {
					t.Errorf("targets %v, want the layout's %v", names(targets), names(want))
				}
			}
			target := targets[0]

			p, ok := c.(clusters.Pauser)
			if !ok {
				t.Fatalf("%T cannot pause a node", c)
			}
			checkOutage(t, target, layout, outage{stop: "pause", stopFn: p.Pause, stopped: "while paused", start: "resume", startFn: p.Resume})

			k, ok := c.(clusters.Killer)
			if !ok {
				t.Fatalf("%T cannot kill a node", c)
			}
			checkOutage(t, target, layout, outage{stop: "kill", stopFn: k.Kill, stopped: "after it was killed", start: "restart", startFn: k.Restart})

			if err := c.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
			for _, n := range nodes {
				if err := ready(n, layout); err == nil {
					t.Errorf("%s still serves after Stop", n.Name)
				}
			}
		})
	}
}

// outage is one way of taking a node out of service and bringing it
// back: a pause and its resume, or a kill and its restart.
type outage struct {
	stop, start     string // the verbs, for messages: "pause", "resume"
	stopped         string // when the node is stopped, for messages: "while paused"
	stopFn, startFn func(context.Context, clusters.Node) error
}

// checkOutage stops target by o, checks that it does not serve while
// stopped, starts it again, and checks that it serves within stepTimeout.
// It fails t at once when stopping or starting returns an error.
func checkOutage(t *testing.T, target clusters.Node, layout backend.Layout, o outage) {
	t.Helper()
	ctx := context.Background()
	if err := o.stopFn(ctx, target); err != nil {
		t.Fatalf("%s %s: %v", o.stop, target.Name, err)
	}
	if err := ready(target, layout); err == nil {
		t.Errorf("%s served %s", target.Name, o.stopped)
	}
	if err := o.startFn(ctx, target); err != nil {
		t.Fatalf("%s %s: %v", o.start, target.Name, err)
	}
	if err := waitReady(target, layout); err != nil {
		t.Errorf("%s does not serve after its %s: %v", target.Name, o.start, err)
	}
}

// checkRoles checks that each node of a backend with roles reads one of
// the roles its layout gives it, within stepTimeout (a role can be
// unreadable for a moment after a start: ZooKeeper's followers sync with
// the leader, Sentinel's majority forms).
func checkRoles(t *testing.T, c clusters.Cluster, layout backend.Layout, nodes []clusters.Node) {
	t.Helper()
	if !layout.HasRoles() {
		return
	}
	rr, ok := c.(clusters.RoleReader)
	if !ok {
		t.Errorf("%T reads no roles, but %s's nodes have them", c, layout.Backend)
		return
	}
	for _, n := range nodes {
		want := layout.Roles(n.Name)
		if got := rr.Roles(n); !slices.Equal(got, want) {
			t.Errorf("%s can have roles %v, want the layout's %v", n.Name, got, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		var role string
		var err error
		for {
			if role, err = rr.Role(ctx, n); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		if err != nil || !slices.Contains(want, role) {
			t.Errorf("%s: role %q (%v), want one of %v", n.Name, role, err, want)
		}
	}
}

// ready asks n once, within 1.5 s, whether it serves.
func ready(n clusters.Node, layout backend.Layout) error {
	// One query, not a wait: but under stress-ng beside the suite a
	// PostgreSQL node's new backend took more than 1.5 s to answer.
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	return backend.Ready(ctx, layout.Kind(n.Name), n.Addr)
}

// waitReady waits up to stepTimeout until n serves.
func waitReady(n clusters.Node, layout backend.Layout) error {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	return backend.WaitReady(ctx, layout.Kind(n.Name), n.Addr, 0, nil)
}

func names(ns []clusters.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}
