package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/powertest"
)

// startTraced starts a cluster of backend b whose containers record their
// syncs (Options.SyncRecords): locktest's node program in the image runs
// each server under its sync tracer, in a container under Docker's
// default seccomp profile.
func startTraced(t *testing.T, b string) *Containers {
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

// Power loss of the node program's servers in containers: the tracer
// records their syncs into a bind mount of the node's folder, where the
// cut is made after the container's kill. An etcd key put before every
// member's power is cut at once is there after RestartNodes starts them
// all together (one member at a time would never see a quorum); a NATS
// create under the default sync is in no server's synced bytes, so the
// cut of every server loses bytes (testkit/powertest).
func TestPowerLossOfGoNodesInContainers(t *testing.T) {
	t.Run("etcd", func(t *testing.T) {
		c := startTraced(t, "etcd")
		powertest.EtcdKeepsWhatItAcknowledged(t, c, c.Nodes(), func(ctx context.Context) error { return c.RestartNodes(ctx, c.Nodes()) }, nil)
	})
	t.Run("nats-default-sync", func(t *testing.T) {
		c := startTraced(t, "nats")
		powertest.NatsLosesUnsynced(t, c, c.Nodes())
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
		c := &Containers{layout: l, opts: tc.opts}
		got := c.PowerCutReason()
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s %+v: PowerCutReason() = %q, want %q", tc.backend, tc.opts, got, tc.want)
		}
	}
}
