package docker

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

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/internal/natsbucket"
	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/testcluster"
)

// startTraced starts a cluster of backend b whose containers record their
// syncs (Options.SyncRecords): locktest's node program in the image runs
// each server under its sync tracer, in a container under Docker's
// default seccomp profile.
func startTraced(t *testing.T, b string) *Cluster {
	t.Helper()
	e := dockertest.Engine(t)
	img := needImage(t, e, b)
	lab := newLab(t, e)
	c, err := New(Options{Backend: b, Dir: t.TempDir(), Lab: lab, Image: img, SyncRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	if why := c.PowerCutReason(); why != "" {
		t.Fatalf("a traced %s cannot cut power: %s", b, why)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// cutEvery cuts the power of every node at once and returns the bytes the
// cuts lost.
func cutEvery(t *testing.T, c *Cluster) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := c.Nodes()
	lost := make([]int64, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			cuts, err := c.CutPower(ctx, n)
			for _, cut := range cuts {
				lost[i] += cut.Size - cut.Durable
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

// Power loss of the node program's servers in containers: the tracer
// records their syncs into a bind mount of the node's folder, where the
// cut is made after the container's kill. An etcd key put before every
// member's power is cut at once is there after RestartNodes starts them
// all together (etcd syncs its WAL before it acknowledges; one member at
// a time would never see a quorum); a NATS create under the default sync
// (every two minutes) is in no server's synced bytes, so the cut of every
// server loses bytes, which is Jepsen's finding seen in the files.
func TestPowerLossOfGoNodesInContainers(t *testing.T) {
	t.Run("etcd", func(t *testing.T) {
		c := startTraced(t, "etcd")
		cli, err := clientv3.New(clientv3.Config{Endpoints: testcluster.Addrs(c.Nodes()), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := cli.Put(ctx, "k", "acknowledged"); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes() {
			if _, err := c.Unsynced(ctx, n); err != nil {
				t.Fatalf("node %s: %v", n.Name, err)
			}
		}
		cutEvery(t, c)
		if err := c.RestartNodes(ctx, c.Nodes()); err != nil {
			t.Fatalf("etcd after a power loss of every member: %v", err)
		}
		var resp *clientv3.GetResponse
		for resp, err = cli.Get(ctx, "k"); err != nil && ctx.Err() == nil; resp, err = cli.Get(ctx, "k") {
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "acknowledged" {
			t.Errorf("after the power loss k is %v, want the value etcd acknowledged", resp.Kvs)
		}
	})
	t.Run("nats-default-sync", func(t *testing.T) {
		c := startTraced(t, "nats")
		var urls []string
		for _, a := range testcluster.Addrs(c.Nodes()) {
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
		kv, err := natsbucket.Open(ctx, js, len(c.Nodes()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Create(ctx, "held", []byte("acknowledged")); err != nil {
			t.Fatal(err)
		}
		if lost := cutEvery(t, c); lost <= 0 {
			t.Errorf("a power loss of every server lost %d bytes after an acknowledged create under the default sync, want some", lost)
		}
	})
}

// Power loss is unavailable, with the reason, where the nodes record no
// syncs: a run that did not ask for records, a backend whose nodes
// cannot record them, and a C server without the clock shim.
func TestPowerCutReason(t *testing.T) {
	shim := func(string) (string, string, error) { return "", "", nil }
	for _, tc := range []struct {
		backend string
		opts    Options
		want    string
	}{
		{"etcd", Options{SyncRecords: true}, ""},
		{"nats", Options{SyncRecords: true}, ""},
		{"redis", Options{SyncRecords: true, Shim: shim}, ""},
		{"etcd", Options{}, "do not record what they sync"},
		{"redis", Options{SyncRecords: true}, "no clock shim"},
		{"zookeeper", Options{SyncRecords: true}, "locktest records the syncs of the nodes of"},
	} {
		l, err := backend.NewLayout(tc.backend, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		tc.opts.Backend = tc.backend
		c := &Cluster{layout: l, opts: tc.opts}
		got := c.PowerCutReason()
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s %+v: PowerCutReason() = %q, want %q", tc.backend, tc.opts, got, tc.want)
		}
	}
}
