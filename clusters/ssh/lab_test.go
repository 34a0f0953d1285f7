package ssh_test

import (
	"context"
	"testing"

	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/testkit/testlab"
)

// labCluster makes a cluster of nodes of backend over the hosts of the
// lab the package's tests share (testlab.Shared), with a run id of its
// own, not started; it returns the test's context, the hosts'
// connections, the cluster and its run id. The run's directories are
// removed from the hosts when the test ends, after the test's own
// clean-ups (a stop of the cluster), so that the next test finds the
// hosts as the lab came up.
func labCluster(t *testing.T, backend string, nodes int) (context.Context, []*sshp.Conn, *sshp.Hosts, string) {
	t.Helper()
	inventory := testlab.Shared(t)
	ctx, conns := testlab.Dial(t, inventory)
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	runID := sshp.NewRunID()
	t.Cleanup(func() {
		if err := sshp.RemoveRunDirs(context.Background(), conns, runID); err != nil {
			t.Errorf("remove the run's directories: %v", err)
		}
	})
	cl, err := sshp.New(sshp.Options{Backend: backend, Nodes: nodes, Conns: conns, Inventory: inv, RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, conns, cl, runID
}
