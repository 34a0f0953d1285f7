package ssh_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/internal/natsbucket"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testlab"
)

// tracedLabCluster starts a cluster of backend b over the lab's hosts
// whose nodes record their syncs: the uploaded node program (the built
// locktest command, whose `node durable` reads the records on the hosts)
// runs each server under its sync tracer, on hosts that are containers
// under Docker's default seccomp profile.
func tracedLabCluster(t *testing.T, inventory string, b string) *sshp.Cluster {
	t.Helper()
	_, conns := testlab.Dial(t, inventory)
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	runID := sshp.NewRunID()
	cl, err := sshp.New(sshp.Options{Backend: b, Conns: conns, Inventory: inv, RunID: runID, NodeCommand: []string{locktestCLI(t).Bin}, SyncRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Stop(context.Background())
		if err := sshp.RemoveRunDirs(context.Background(), conns, runID); err != nil {
			t.Errorf("remove the run's directories: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if why := cl.PowerCutReason(); why != "" {
		t.Fatalf("a traced %s on the lab cannot cut power: %s", b, why)
	}
	return cl
}

// cutEvery cuts the power of every node of cl at once and returns the
// bytes the cuts lost.
func cutEvery(t *testing.T, cl *sshp.Cluster) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := cl.Nodes()
	lost := make([]int64, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			cuts, err := cl.CutPower(ctx, n)
			for _, c := range cuts {
				lost[i] += c.Size - c.Durable
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, l := range lost {
		total += l
	}
	return total
}

// restartEvery restarts every node of cl at once, as the power-loss-all
// fault's heal does on a cluster without a group restart.
func restartEvery(t *testing.T, cl *sshp.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := cl.Nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = cl.Restart(ctx, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("restart after a power loss of every node: %v", err)
	}
}

// Power loss of the node program's servers over ssh: the tracer records
// their syncs on the hosts, which are containers where the kernel refuses
// to lend a descriptor (pidfd_getfd). An etcd key put before every
// member's power is cut at once is there after they all restart (etcd
// syncs its WAL before it acknowledges); a NATS create under the default
// sync (every two minutes) is in no server's synced bytes, and the cut of
// every server loses bytes, which is Jepsen's finding seen in the files.
func TestPowerLossOfGoNodesOnTheLab(t *testing.T) {
	inventory := testlab.Up(t)
	t.Run("etcd", func(t *testing.T) {
		cl := tracedLabCluster(t, inventory, "etcd")
		cli, err := clientv3.New(clientv3.Config{Endpoints: testcluster.Addrs(cl.Nodes()), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := cli.Put(ctx, "k", "acknowledged"); err != nil {
			t.Fatal(err)
		}
		ctx0, cancel0 := context.WithTimeout(ctx, 30*time.Second)
		defer cancel0()
		for _, n := range cl.Nodes() {
			if _, err := cl.Unsynced(ctx0, n); err != nil {
				t.Fatalf("node %s: %v", n.Name, err)
			}
		}
		cutEvery(t, cl)
		restartEvery(t, cl)
		var resp *clientv3.GetResponse
		for resp, err = cli.Get(ctx, "k"); err != nil && ctx.Err() == nil; resp, err = cli.Get(ctx, "k") {
			time.Sleep(100 * time.Millisecond) // a leader is elected again
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "acknowledged" {
			t.Errorf("after the power loss k is %v, want the value etcd acknowledged", resp.Kvs)
		}
	})
	t.Run("nats-default-sync", func(t *testing.T) {
		cl := tracedLabCluster(t, inventory, "nats")
		natsCreate(t, cl.Nodes(), "held")
		if lost := cutEvery(t, cl); lost <= 0 {
			t.Errorf("a power loss of every server lost %d bytes after an acknowledged create under the default sync, want some", lost)
		}
	})
	testlab.AssertClean(t, inventory)
}

// natsCreate creates key in the lock bucket through nodes and returns
// once the cluster acknowledged it.
func natsCreate(t *testing.T, nodes []clusters.Node, key string) {
	t.Helper()
	var urls []string
	for _, a := range testcluster.Addrs(nodes) {
		urls = append(urls, "nats://"+a)
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := natsbucket.Open(ctx, js, len(nodes))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, key, []byte("acknowledged")); err != nil {
		t.Fatal(err)
	}
}
