// Package powertest holds the checks that every provider's tests make of
// a power loss of the servers locktest's node program embeds (etcd,
// NATS), which record their syncs under the node program's sync tracer:
// the same experiments, run on local processes, containers and the ssh
// lab's hosts.
package powertest

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
	"github.com/locktest/locktest/internal/natsbucket"
	"github.com/locktest/locktest/testkit/testcluster"
)

// Wait bounds each wait of these checks for a cluster that every node of
// which lost its power: its restart, and its first answers after it. A
// loaded machine (stress-ng and go test -p 3) took more than 30 s for a
// NATS stream to elect its leader again.
const Wait = 2 * time.Minute

// CutEvery cuts the power of every one of nodes at once and returns the
// bytes the cuts lost; a cut that failed fails t.
func CutEvery(t testing.TB, c clusters.PowerCutter, nodes []clusters.Node) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
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

// EtcdKeepsWhatItAcknowledged puts a key through the etcd members nodes of
// c, calls recorded (when not nil) to check the members' sync records,
// reads what a cut would lose of each member (Unsynced, which reads the
// records where the provider keeps them), cuts every member's power at
// once, restarts them with restart, and wants the key back with its
// value: etcd syncs its WAL before it acknowledges a write.
func EtcdKeepsWhatItAcknowledged(t *testing.T, c clusters.PowerCutter, nodes []clusters.Node, restart func(context.Context) error, recorded func()) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: testcluster.Addrs(nodes), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "acknowledged"); err != nil {
		t.Fatal(err)
	}
	if recorded != nil {
		recorded()
	}
	for _, n := range nodes {
		if _, err := c.Unsynced(ctx, n); err != nil {
			t.Fatalf("node %s: %v", n.Name, err)
		}
	}
	CutEvery(t, c, nodes)
	if err := restart(ctx); err != nil {
		t.Fatalf("etcd after a power loss of every member: %v", err)
	}
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
}

// NatsBucket opens the lock bucket through the NATS servers nodes, asking
// until its stream answers, for up to Wait: after a restart of every
// server the stream elects its leader again. The returned function closes
// the connection.
func NatsBucket(t testing.TB, nodes []clusters.Node) (jetstream.KeyValue, func()) {
	t.Helper()
	var urls []string
	for _, a := range testcluster.Addrs(nodes) {
		urls = append(urls, "nats://"+a)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	for {
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		kv, err := natsbucket.Open(qctx, js, len(nodes))
		qcancel()
		if err == nil {
			return kv, nc.Close
		}
		if ctx.Err() != nil {
			nc.Close()
			t.Fatalf("the lock bucket did not answer within %v: %v", Wait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// NatsCreate creates key in the lock bucket through the NATS servers
// nodes and returns its revision once the cluster acknowledged it.
func NatsCreate(t testing.TB, nodes []clusters.Node, key string) uint64 {
	t.Helper()
	kv, done := NatsBucket(t, nodes)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := kv.Create(ctx, key, []byte("acknowledged"))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// NatsLosesUnsynced creates a key through the NATS servers nodes of c,
// under the default sync (every two minutes), and cuts every server's
// power at once: the acknowledged create is in no server's synced bytes,
// so the cuts must lose some, which is Jepsen's NATS 2.12.1 finding seen
// in the files. What the cluster does after a restart is the scenarios'
// to show.
func NatsLosesUnsynced(t *testing.T, c clusters.PowerCutter, nodes []clusters.Node) {
	t.Helper()
	NatsCreate(t, nodes, "held")
	if lost := CutEvery(t, c, nodes); lost <= 0 {
		t.Errorf("a power loss of every server lost %d bytes after an acknowledged create under the default sync, want some", lost)
	}
}
