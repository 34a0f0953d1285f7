package backend

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
)

// bookNode is a node of bookDriver: a pid and what its host's log holds.
type bookNode struct {
	name string
	pid  int
	log  string
}

// bookDriver is a Driver that runs nothing: it keeps each node's pid and
// writes down every call, to check what Cluster asks of a driver, in what
// order and under what lock. It stands for no lock service: the backends
// run on real servers in each provider's tests.
type bookDriver struct {
	mu      sync.Mutex
	calls   []string
	failOn  string // a node whose Start fails
	next    int
	held    *sync.Mutex // Cluster's lock, to check that a call holds it
	unheld  []string    // calls made without the lock
	blockOn chan struct{}
}

func (d *bookDriver) note(call string) {
	if d.held != nil && d.held.TryLock() {
		d.held.Unlock()
		d.mu.Lock()
		d.unheld = append(d.unheld, call)
		d.mu.Unlock()
	}
	d.mu.Lock()
	d.calls = append(d.calls, call)
	d.mu.Unlock()
}

func (d *bookDriver) Node(n *bookNode) clusters.Node {
	return clusters.Node{Name: n.name, Addr: "10.0.0.1:" + strings.TrimPrefix(n.name, "n")}
}

func (d *bookDriver) Pid(n *bookNode) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return n.pid
}

func (d *bookDriver) start(call string, ns []*bookNode) error {
	var names []string
	for _, n := range ns {
		names = append(names, n.name)
	}
	d.note(call + " " + strings.Join(names, ","))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range ns {
		if n.name == d.failOn {
			return errors.New(n.name + " did not serve")
		}
		if n.pid == 0 {
			d.next++
			n.pid = 100 + d.next
			n.log += "started\n"
		}
	}
	return nil
}

func (d *bookDriver) Start(ctx context.Context, ns []*bookNode) error { return d.start("start", ns) }
func (d *bookDriver) Restart(ctx context.Context, ns []*bookNode) error {
	return d.start("restart", ns)
}

func (d *bookDriver) down(call string, n *bookNode) error {
	d.note(call + " " + n.name)
	if d.blockOn != nil && call == "kill" {
		<-d.blockOn
	}
	d.mu.Lock()
	n.pid = 0
	d.mu.Unlock()
	return nil
}

func (d *bookDriver) Stop(ctx context.Context, n *bookNode) error { return d.down("stop", n) }
func (d *bookDriver) Kill(ctx context.Context, n *bookNode) error { return d.down("kill", n) }

func (d *bookDriver) Pause(ctx context.Context, n *bookNode) error {
	d.note("pause " + n.name)
	return nil
}

func (d *bookDriver) Resume(ctx context.Context, n *bookNode) error {
	d.note("resume " + n.name)
	return nil
}

func (d *bookDriver) CollectLog(ctx context.Context, n *bookNode, path string) error {
	d.note("collect " + n.name)
	if n.log == "" {
		return nil
	}
	return os.WriteFile(path, []byte(n.log), 0o644)
}

// bookCluster returns a Cluster of b's default layout over a bookDriver.
func bookCluster(t *testing.T, b string) (*Deployment[*bookNode], *bookDriver) {
	t.Helper()
	l, err := NewLayout(b, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ns []*bookNode
	for _, spec := range l.Nodes {
		ns = append(ns, &bookNode{name: spec.Name})
	}
	d := &bookDriver{}
	c := NewDeployment("test", l, ns, d)
	d.held = &c.mu
	return c, d
}

// sorted returns calls with the names of each call's nodes in order, and
// the calls in order: Stop's calls come from goroutines.
func sorted(calls []string) []string {
	out := slices.Clone(calls)
	slices.Sort(out)
	return out
}

// TestClusterDrivesItsNodes checks what Cluster asks of its driver for
// each of its methods, that every call that changes a node holds the
// cluster's lock, and what it does itself: a node that is not running is
// not killed or resumed and is an error to pause, a node it lacks is an
// error naming the cluster, Nodes and Pids give each node as its driver
// has it.
func TestClusterDrivesItsNodes(t *testing.T) {
	ctx := context.Background()
	c, d := bookCluster(t, "etcd")
	n1, n2 := clusters.Node{Name: "n1"}, clusters.Node{Name: "n2"}

	if err := c.Pause(ctx, n1); err == nil || !strings.Contains(err.Error(), "test etcd: pause n1: the node is not running") {
		t.Errorf("pause before start: %v", err)
	}
	if err := c.Kill(ctx, n1); err != nil {
		t.Errorf("kill before start: %v", err)
	}
	if err := c.Resume(ctx, n1); err != nil {
		t.Errorf("resume before start: %v", err)
	}
	if len(d.calls) != 0 {
		t.Errorf("calls before start: %q, want none", d.calls)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Pids(), map[string]int{"n1": 101, "n2": 102, "n3": 103}; !maps.Equal(got, want) {
		t.Errorf("Pids = %v, want %v", got, want)
	}
	if got := c.Nodes(); len(got) != 3 || got[1].Name != "n2" || got[1].Addr != "10.0.0.1:2" {
		t.Errorf("Nodes = %+v", got)
	}
	steps := []func() error{
		func() error { return c.Pause(ctx, n2) },
		func() error { return c.Resume(ctx, n2) },
		func() error { return c.Kill(ctx, n2) },
		func() error { return c.Kill(ctx, n2) }, // not running: nothing
		func() error { return c.Resume(ctx, n2) },
		func() error { return c.Restart(ctx, n2) },
		func() error { return c.RestartNodes(ctx, []clusters.Node{n1, n2}) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := []string{"start n1,n2,n3", "pause n2", "resume n2", "kill n2", "restart n2", "restart n1,n2"}
	if !slices.Equal(d.calls, want) {
		t.Errorf("calls = %q, want %q", d.calls, want)
	}
	if c.Pids()["n2"] != 104 {
		t.Errorf("n2's pid after its restart = %d, want 104", c.Pids()["n2"])
	}
	for name, err := range map[string]error{
		"kill":    c.Kill(ctx, clusters.Node{Name: "n9"}),
		"restart": c.Restart(ctx, clusters.Node{Name: "n9"}),
		"group":   c.RestartNodes(ctx, []clusters.Node{n1, {Name: "n9"}}),
		"with":    c.With(clusters.Node{Name: "n9"}, func(*bookNode) error { return nil }),
	} {
		if err == nil || err.Error() != `test etcd: no node "n9"` {
			t.Errorf("%s of n9: %v, want `test etcd: no node \"n9\"`", name, err)
		}
	}

	dir := t.TempDir()
	d.calls = nil
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.CollectLogs(filepath.Join(dir, "logs")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "logs", "n2.log")); err != nil || string(b) != "started\nstarted\n" {
		t.Errorf("n2.log = %q, %v", b, err)
	}
	if want := []string{"collect n1", "collect n2", "collect n3", "stop n1", "stop n2", "stop n3"}; !slices.Equal(sorted(d.calls), want) {
		t.Errorf("calls of Stop and CollectLogs = %q, want %q", sorted(d.calls), want)
	}
	if len(d.unheld) != 0 {
		t.Errorf("calls made without the cluster's lock: %q", d.unheld)
	}
}

// TestClusterStopsWhatAFailedStartStarted checks that a Start that fails
// returns the driver's error and stops every node, so that nothing of a
// cluster that never formed stays running: here n1 started, n2 did not.
func TestClusterStopsWhatAFailedStartStarted(t *testing.T) {
	c, d := bookCluster(t, "etcd")
	d.failOn = "n2"
	err := c.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "n2 did not serve") {
		t.Fatalf("Start = %v, want n2's failure", err)
	}
	for name, pid := range c.Pids() {
		if pid != 0 {
			t.Errorf("%s still runs (pid %d) after the failed start", name, pid)
		}
	}
	if want := []string{"start n1,n2,n3", "stop n1", "stop n2", "stop n3"}; !slices.Equal(sorted(d.calls), want) {
		t.Errorf("calls = %q, want the nodes started, then every node stopped", sorted(d.calls))
	}
}

// TestClusterReadsRolesWithoutTheLock checks that Nodes, Pids and Targets
// answer while a Kill holds the cluster's lock, and that a Stop waits for
// that Kill.
func TestClusterReadsRolesWithoutTheLock(t *testing.T) {
	ctx := context.Background()
	c, d := bookCluster(t, "zookeeper")
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	d.blockOn = make(chan struct{})
	killed := make(chan error)
	go func() { killed <- c.Kill(ctx, clusters.Node{Name: "n1"}) }()
	for !slices.Contains(d.snapshot(), "kill n1") {
		time.Sleep(time.Millisecond)
	}
	if got := len(c.Nodes()) + len(c.Pids()) + len(c.Targets()); got != 9 {
		t.Errorf("Nodes, Pids and Targets during a kill: %d nodes, want 9", got)
	}
	stopped := make(chan error)
	go func() { stopped <- c.Stop(ctx) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a Kill held the lock")
	case <-time.After(50 * time.Millisecond):
	}
	close(d.blockOn)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

func (d *bookDriver) snapshot() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}
