package ssh_test

import (
	"testing"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/testkit/backendtable"
	"github.com/locktest/locktest/testkit/testexe"
	"github.com/locktest/locktest/testkit/testlab"
)

// The test binary doubles as the node programs; the lab the tests share
// (testlab.Shared) is removed at the end.
func TestMain(m *testing.M) { testexe.Main(m, testlab.Down) }

// Every backend runs on the ssh provider's lab, whose image carries every
// server (the lab's SQL servers where this host has them), with the checks
// every provider passes (backendtable.Run): its layout, readiness, roles
// and targets, a pause, a kill and a restart, and a stop; then no host
// keeps anything of the runs. A backend missing here is a failure, not a
// gap in a doc. It runs in parallel with TestConnNoticesALostHost, which
// has a lab of its own.
func TestEveryBackendRunsOnSSH(t *testing.T) {
	t.Parallel()
	inventory := testlab.Shared(t)
	_, conns := testlab.Dial(t, inventory)
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	node, env := testexe.Node()
	backendtable.Run(t, backend.All(), func(t *testing.T, b string) clusters.Cluster {
		return testlab.Started(t, sshp.Options{Backend: b, Conns: conns, Inventory: inv, NodeCommand: node, NodeEnv: env})
	})
	testlab.AssertClean(t, inventory)
}
