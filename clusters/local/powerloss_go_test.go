package local

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/locktest/locktest/testkit/powertest"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
)

// startTracked starts a cluster of backend b whose nodes record their
// syncs: locktest's node program (here the test binary) runs them under
// its sync tracer.
func startTracked(t *testing.T, b string, params map[string]string) *Processes {
	t.Helper()
	exe, env := testexe.Node()
	c, err := New(b, Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env, TrackSyncs: true, Params: params})
	kc, _ := c.(*Processes)
	testcluster.Started(t, c, err)
	if why := kc.PowerCutReason(); why != "" {
		t.Fatalf("a tracked %s cannot cut power: %s", b, why)
	}
	return kc
}

// restartAll restarts every node at once (RestartNodes); a cluster that
// needs a quorum serves only when enough are back.
func restartAll(ctx context.Context, c *Processes) error {
	return c.RestartNodes(ctx, c.Nodes())
}

// recordLines counts the lines of every node's sync record.
func recordLines(t *testing.T, c *Processes) int {
	t.Helper()
	lines := 0
	for _, n := range c.nodes {
		b, err := os.ReadFile(n.syncs.Path())
		if err != nil {
			t.Fatalf("node %s keeps no sync record: %v", n.name, err)
		}
		lines += strings.Count(string(b), "\n")
	}
	return lines
}

// TestPowerLossOfEtcd: an etcd member, a Go program, records its syncs
// under the node program's tracer: etcd syncs its WAL before it
// acknowledges a write, so a key put before every member's power is cut
// at once is there after they all restart.
func TestPowerLossOfEtcd(t *testing.T) {
	c := startTracked(t, "etcd", nil)
	powertest.EtcdKeepsWhatItAcknowledged(t, c, c.Nodes(), func(ctx context.Context) error { return restartAll(ctx, c) }, func() {
		if recordLines(t, c) == 0 {
			t.Fatal("the members recorded no sync: the tracer did not see etcd's")
		}
	})
}

// TestPowerLossOfNats: NATS servers record their syncs under the tracer.
// With sync=always a key the cluster acknowledged survives a power loss
// of every server at once, with its revision. With the default sync
// (every two minutes) the same acknowledged write is in no server's
// synced bytes: the cut of every server loses it, which is Jepsen's NATS
// 2.12.1 finding, seen in the files; what the cluster does after that
// restart is the scenarios' to show, not asserted here.
func TestPowerLossOfNats(t *testing.T) {
	t.Run("sync-always", func(t *testing.T) {
		c := startTracked(t, "nats", map[string]string{"sync": "always"})
		rev := powertest.NatsCreate(t, c.Nodes(), "held")
		if recordLines(t, c) == 0 {
			t.Fatal("the servers recorded no sync: the tracer did not see NATS's")
		}
		powertest.CutEvery(t, c, c.Nodes())
		ctx, cancel := context.WithTimeout(context.Background(), powertest.Wait)
		defer cancel()
		if err := restartAll(ctx, c); err != nil {
			t.Fatalf("NATS after a power loss of every server: %v", err)
		}
		kv, done := powertest.NatsBucket(t, c.Nodes())
		defer done()
		var e jetstream.KeyValueEntry
		var err error
		for e, err = kv.Get(ctx, "held"); err != nil && ctx.Err() == nil; e, err = kv.Get(ctx, "held") {
			time.Sleep(100 * time.Millisecond) // the stream's leader is elected again
		}
		if err != nil || e.Revision() != rev || string(e.Value()) != "acknowledged" {
			t.Errorf("after the power loss: %v, %v; want revision %d", e, err, rev)
		}
	})
	t.Run("default-sync", func(t *testing.T) {
		c := startTracked(t, "nats", nil)
		powertest.NatsLosesUnsynced(t, c, c.Nodes())
		// Whatever the restart does, nothing of the run stays behind: Stop
		// (the test's clean-up) ends every server, up or not.
		ctx, cancel := context.WithTimeout(context.Background(), powertest.Wait)
		defer cancel()
		if err := restartAll(ctx, c); err != nil {
			t.Logf("NATS after a power loss of every server with the default sync: %v", err)
		}
	})
}
