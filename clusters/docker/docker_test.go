package docker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/images"
	"github.com/locktest/locktest/testkit/dockertest"
)

var (
	buildMu   sync.Mutex
	built     = map[string]images.Image{}
	buildErrs = map[string]error{}
)

// needImage builds (or reuses) locktest's image of backend once per test
// binary, skipping the test when the host lacks what the image is made of.
func needImage(t *testing.T, e *engine.Engine, backend string) images.Image {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if img, ok := built[backend]; ok {
		return img
	}
	if err, ok := buildErrs[images.Of(backend)]; ok {
		t.Skip(err)
	}
	switch images.Of(backend) {
	case "redis":
		if _, err := exec.LookPath("redis-server"); err != nil {
			buildErrs["redis"] = errors.New("redis-server not installed (make setup)")
			t.Skip(buildErrs["redis"])
		}
	case "zookeeper":
		if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
			buildErrs[backend] = errors.New("zookeeper not installed (make setup)")
			t.Skip(buildErrs[backend])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	bs, err := images.Build(ctx, e, images.BuildOptions{Backends: []string{backend}})
	if err != nil {
		t.Fatalf("build %s image: %v", backend, err)
	}
	t.Logf("%s image %s: reused %v, %d MB, %v", backend, bs[0].Ref, bs[0].Reused, bs[0].Size>>20, time.Since(t0).Round(time.Millisecond))
	img, err := images.Resolve(ctx, e, backend, "")
	if err != nil {
		t.Fatal(err)
	}
	if !img.Built {
		t.Fatalf("resolved %+v, want the built image", img)
	}
	built[backend] = img
	return img
}

// newLab makes a run network and checks at the test's end that nothing of
// the run is left.
func newLab(t *testing.T, e *engine.Engine) *Network {
	t.Helper()
	l, err := NewLab(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("close lab: %v", err)
		}
		assertRunGone(t, e, l.ID())
	})
	return l
}

// startCluster starts nodes containers of backend on a lab of their own,
// stopped when the test ends; it skips the test without an engine or the
// backend's image.
func startCluster(t *testing.T, backend string, nodes int) *Containers {
	t.Helper()
	e := dockertest.Engine(t)
	img := needImage(t, e, backend)
	lab := newLab(t, e)
	c, err := New(Options{Backend: backend, Nodes: nodes, Dir: t.TempDir(), Lab: lab, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func assertRunGone(t *testing.T, e *engine.Engine, run string) {
	t.Helper()
	all, err := e.Find(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if left := engine.OfRun(all, run); len(left) > 0 {
		t.Errorf("run %s left %+v", run, left)
	}
}

// TestRedisNodesKillRestartPauseAndPartition starts two Redis containers,
// and checks each fault really happens: a killed node refuses, a restarted
// one answers at the same address, a paused one times out, a cut one is
// unreachable from the host and the other node until the heal.
func TestRedisNodesKillRestartPauseAndPartition(t *testing.T) {
	c := startCluster(t, "redis", 2)
	lab := c.opts.Lab
	ctx := context.Background()
	nodes := c.Nodes()
	ping := func(n clusters.Node) error {
		rc := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 300 * time.Millisecond,
			ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, Protocol: 2, DisableIdentity: true})
		defer rc.Close()
		return rc.Ping(ctx).Err()
	}
	// A node that must answer gets 10 s to do it: on a loaded machine a
	// resumed or healed container can miss one 300 ms ping. One that must
	// not answer gets one ping, which load cannot make it pass.
	answers := func(n clusters.Node) error {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := ping(n)
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, n := range nodes {
		if err := answers(n); err != nil {
			t.Fatalf("%s at %s: %v", n.Name, n.Addr, err)
		}
	}
	if err := c.Kill(ctx, nodes[0]); err != nil {
		t.Fatal(err)
	}
	if err := ping(nodes[0]); err == nil {
		t.Fatal("a killed node answered")
	}
	if err := c.Restart(ctx, nodes[0]); err != nil {
		t.Fatal(err)
	}
	if err := answers(nodes[0]); err != nil {
		t.Fatalf("restarted node: %v", err)
	}
	if err := c.Pause(ctx, nodes[1]); err != nil {
		t.Fatal(err)
	}
	if err := ping(nodes[1]); err == nil {
		t.Error("a paused node answered")
	}
	if err := c.Resume(ctx, nodes[1]); err != nil {
		t.Fatal(err)
	}
	if err := answers(nodes[1]); err != nil {
		t.Fatalf("resumed node: %v", err)
	}
	if reason := NetworkFaultsReason(lab.e); reason != "" {
		t.Logf("partition part skipped: %s", reason)
		return
	}
	// Every client is the host: c0 and c1 are one address, cut once.
	cut := func() {
		t.Helper()
		if err := lab.Cut(ctx, []string{"n1"}, []string{"n2", "c0", "c1"}); err != nil {
			t.Fatal(err)
		}
		rules, err := lab.Rules(ctx, "n1")
		if err != nil || len(rules) != 4 {
			t.Fatalf("rules of n1: %q %v, want 4", rules, err)
		}
		if err := ping(nodes[0]); err == nil {
			t.Error("the host reached a node cut from it")
		}
		if err := answers(nodes[1]); err != nil {
			t.Errorf("the node on the host's side: %v", err)
		}
	}
	heal := func() {
		t.Helper()
		if err := lab.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		if rules, _ := lab.Rules(ctx, "n1"); len(rules) != 0 {
			t.Errorf("rules left after the heal: %q", rules)
		}
		if err := answers(nodes[0]); err != nil {
			t.Errorf("healed node: %v", err)
		}
	}
	cut()
	heal()
	// A lab that lost track of the chains (as after a failed restore) finds
	// them there, and adds the rules once.
	lab.mu.Lock()
	clear(lab.chains)
	lab.mu.Unlock()
	cut()
	// A container restarted while cut has a fresh network namespace,
	// without the lab's chains: the heal finds nothing to flush there, and
	// the next cut makes them again.
	if err := c.Kill(ctx, nodes[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, nodes[0]); err != nil {
		t.Fatal(err)
	}
	heal()
	cut()
	heal()
	logs := t.TempDir()
	if err := c.CollectLogs(logs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logs + "/n1.log")
	if err != nil || !strings.Contains(string(b), "Ready to accept connections") {
		t.Errorf("n1.log: %v\n%s", err, b)
	}
}
