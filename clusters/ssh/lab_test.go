package ssh_test

import (
	"context"
	"testing"

	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/testkit/testlab"
)

// labCluster brings the ssh lab up and makes a cluster of nodes of
// backend over its hosts, with a run id of its own, not started; it
// returns the test's context, the hosts' connections, the cluster and its
// run id.
func labCluster(t *testing.T, backend string, nodes int) (context.Context, []*sshp.Conn, *sshp.Hosts, string) {
	t.Helper()
	inventory := testlab.Up(t)
	ctx, conns := testlab.Dial(t, inventory)
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	runID := sshp.NewRunID()
	cl, err := sshp.New(sshp.Options{Backend: backend, Nodes: nodes, Conns: conns, Inventory: inv, RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, conns, cl, runID
}
