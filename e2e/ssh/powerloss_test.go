package ssh_test

import (
	"context"
	"testing"

	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/testkit/powertest"
	"github.com/locktest/locktest/testkit/testlab"
)

// tracedLabCluster starts a cluster of backend b over the lab's hosts
// whose nodes record their syncs: the uploaded node program (the built
// locktest command, whose `node durable` reads the records on the hosts)
// runs each server under its sync tracer, on hosts that are containers
// under Docker's default seccomp profile.
func tracedLabCluster(t *testing.T, inventory string, b string) *sshp.Hosts {
	t.Helper()
	_, conns := testlab.Dial(t, inventory)
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	cl := testlab.Started(t, sshp.Options{Backend: b, Conns: conns, Inventory: inv, NodeCommand: []string{locktestCLI(t).Bin}, SyncRecords: true})
	if why := cl.PowerCutReason(); why != "" {
		t.Fatalf("a traced %s on the lab cannot cut power: %s", b, why)
	}
	return cl
}

// Power loss of the node program's servers over ssh: the tracer records
// their syncs on the hosts, which are containers where the kernel refuses
// to lend a descriptor (pidfd_getfd). An etcd key put before every
// member's power is cut at once is there after they all restart, in one
// start (RestartNodes, as the power-loss-all fault's heal does: a restart
// of one member at a time under the cluster's lock would wait for a
// quorum that is not back); a NATS
// create under the default sync is in no server's synced bytes, so the
// cut of every server loses bytes (testkit/powertest).
func TestPowerLossOfGoNodesOnTheLab(t *testing.T) {
	inventory := testlab.Shared(t)
	t.Run("etcd", func(t *testing.T) {
		cl := tracedLabCluster(t, inventory, "etcd")
		powertest.EtcdKeepsWhatItAcknowledged(t, cl, cl.Nodes(), func(ctx context.Context) error { return cl.RestartNodes(ctx, cl.Nodes()) }, nil)
	})
	t.Run("nats-default-sync", func(t *testing.T) {
		cl := tracedLabCluster(t, inventory, "nats")
		powertest.NatsLosesUnsynced(t, cl, cl.Nodes())
	})
	testlab.AssertClean(t, inventory)
}
