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

func TestMain(m *testing.M) { testexe.Main(m) }

// Every backend runs on the ssh provider's lab, whose image carries every
// server (the lab's SQL servers where this host has them), with the checks
// every provider passes (backendtable.Run): its layout, readiness, roles
// and targets, a pause, a kill and a restart, and a stop; then no host
// keeps anything of the runs. A backend missing here is a failure, not a
// gap in a doc.
func TestEveryBackendRunsOnSSH(t *testing.T) {
	inventory := testlab.Up(t)
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
