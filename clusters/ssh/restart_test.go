package ssh_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestRestartKillsAServerThatMayStillRun: a kill whose command never
// came back (here its context had ended; under stress-ng at 52abd09 the
// run's deadline cut off the reply of a ZooKeeper leader's kill) leaves
// the node's old server running and its pid recorded. The restart that
// heals it must kill that server before it starts the new one: one server
// of the node runs after it, the one the cluster knows, and the stop
// leaves none. A node that serves as it started is left alone.
func TestRestartKillsAServerThatMayStillRun(t *testing.T) {
	ctx, conns, cl, _ := labCluster(t, "redis", 1)
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop(context.Background()) })
	n := cl.Nodes()[0]
	old := cl.Pids()[n.Name]
	// A restart of a node that serves as it started does nothing, as on
	// every provider: a heal that restarts it again (after a group
	// restart failed for another node) must not kill it unrecorded.
	if err := cl.Restart(ctx, n); err != nil || cl.Pids()[n.Name] != old {
		t.Fatalf("the restart of a serving node: %v, pid %d, want nothing done (pid %d)", err, cl.Pids()[n.Name], old)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := cl.Kill(ended, n); err == nil {
		t.Fatal("a kill with an ended context reported success")
	}
	h1 := conns[0]
	servers := func() []string {
		t.Helper()
		out, err := h1.Run(ctx, fmt.Sprintf("for p in /proc/[0-9]*; do grep -qa '^[^ ]*redis-server [^ ]*:%s' $p/cmdline 2>/dev/null && echo ${p#/proc/}; done; true", strings.Split(n.Addr, ":")[1]))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(out)
	}
	if got := servers(); len(got) != 1 || got[0] != fmt.Sprint(old) {
		t.Fatalf("before the restart the node's servers are %v, want the old one, %d", got, old)
	}
	if err := cl.Restart(ctx, n); err != nil {
		t.Fatal(err)
	}
	now := cl.Pids()[n.Name]
	if got := servers(); len(got) != 1 || got[0] != fmt.Sprint(now) || now == old {
		t.Errorf("after the restart the node's servers are %v, want only the new one the cluster knows (%d, the old was %d)", got, now, old)
	}
	if err := cl.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := servers(); len(got) != 0 {
		t.Errorf("after the stop the node's servers %v still run", got)
	}
}
