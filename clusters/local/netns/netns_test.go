package netns

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/testkit/gate"
)

func needLab(t *testing.T) {
	t.Helper()
	if err := Check(); err != nil {
		t.Skip(err)
	}
	gate.Need(t, "redis-server")
}

// ping asks the redis node at addr for PONG from inside namespace ns, with a
// short timeout, and reports whether it answered.
func ping(ns, addr string) bool {
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	argv := []string{"timeout", "1", "redis-cli", "-h", host, "-p", port, "PING"}
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	return err == nil && strings.TrimSpace(string(out)) == "PONG"
}

// assertGone fails the test if any object of lab id is left on the host.
func assertGone(t *testing.T, id string) {
	t.Helper()
	f, err := Find(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if left := f.Of(id); !left.Empty() {
		t.Errorf("lab %s left behind: %+v", id, left)
	}
}

// TestLabPartitionsLossAndHeal starts two redis nodes in namespaces of
// their own and a client host, and checks reachability through each fault
// and its inverse.
func TestLabPartitionsLossAndHeal(t *testing.T) {
	needLab(t)
	ctx := context.Background()
	lab, err := New(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer assertGone(t, lab.ID())
	defer lab.Close(ctx)
	var hosts []local.Host
	for _, n := range []string{"n1", "n2"} {
		h, err := lab.Add(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, local.Host{IP: h.IP, NetNS: h.NS})
	}
	client, err := lab.Add(ctx, "c0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Add(ctx, "c0"); err == nil {
		t.Error("adding a host twice succeeded")
	}
	if _, err := lab.Add(ctx, "Bad_Name"); err == nil {
		t.Error("a host name with capitals and _ was accepted")
	}
	cl, err := local.NewProcesses("redis", local.Options{Nodes: 2, Dir: t.TempDir(), Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cl.Stop(ctx)
	n1, n2 := cl.Nodes()[0].Addr, cl.Nodes()[1].Addr
	if !strings.HasPrefix(n1, hosts[0].IP+":") {
		t.Fatalf("node n1 at %s, want it on its namespace address %s", n1, hosts[0].IP)
	}
	if !ping(client.NS, n1) || !ping(client.NS, n2) || !ping("", n1) {
		t.Fatal("nodes unreachable before any fault")
	}

	if err := lab.Cut(ctx, []string{"c0"}, []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	if ping(client.NS, n1) {
		t.Error("c0 reached n1 across a cut")
	}
	if !ping(client.NS, n2) {
		t.Error("c0 lost n2, which the cut did not name")
	}
	if !ping("", n1) {
		t.Error("the driver lost n1, which the cut did not name")
	}
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if !ping(client.NS, n1) {
		t.Error("c0 cannot reach n1 after heal")
	}

	if err := lab.Partition(ctx, [][]string{{"c0", "n1"}, {"n2"}}); err != nil {
		t.Fatal(err)
	}
	if !ping(client.NS, n1) || ping(client.NS, n2) {
		t.Error("partition {c0 n1} | {n2}: c0 should reach n1 only")
	}
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := lab.Rules(ctx, "c0"); len(r) != 0 {
		t.Errorf("rules left after heal: %v", r)
	}

	if err := lab.Loss(ctx, []string{"n2"}, 1); err != nil {
		t.Fatal(err)
	}
	if ping(client.NS, n2) {
		t.Error("n2 answered with 100% loss")
	}
	if r, _ := lab.Rules(ctx, "n2"); len(r) != 1 || !strings.Contains(r[0], "statistic") {
		t.Errorf("loss rules of n2: %v", r)
	}
	if err := lab.Loss(ctx, []string{"n2"}, 1.5); err == nil {
		t.Error("loss probability 1.5 accepted")
	}
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if !ping(client.NS, n2) {
		t.Error("n2 unreachable after heal of loss")
	}
	if err := cl.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lab.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lab.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCleanupRemovesWhatACrashedRunLeft leaves a lab unclosed, with a
// process in one of its namespaces, and checks Cleanup removes all of it.
func TestCleanupRemovesWhatACrashedRunLeft(t *testing.T) {
	needLab(t)
	ctx := context.Background()
	lab, err := New(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := lab.Add(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("ip", "netns", "exec", h.NS, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	f, err := Find(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mine := f.Of(lab.ID())
	if len(mine.Namespaces) != 1 || len(mine.Links) != 2 || len(mine.Rules) != 1 {
		t.Fatalf("Find missed part of the lab: %+v", mine)
	}
	// A lab whose owner lives is spared.
	if removed, err := Cleanup(ctx); err != nil || !removed.Of(lab.ID()).Empty() {
		t.Fatalf("Cleanup removed a live run's lab: %+v, %v", removed, err)
	}
	// Make the owner a process that has exited: the lab is now an orphan.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := writeOwner(lab.ID(), dead.Process.Pid); err != nil {
		t.Fatal(err)
	}
	// (Another test's `locktest cleanup` may get to the orphan first; what
	// matters is that it is gone.)
	if _, err := Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		sleeper.Process.Kill()
		t.Error("the process in the namespace survived Cleanup")
	}
	assertGone(t, lab.ID())
}

func TestNewRejectsABadSubnet(t *testing.T) {
	needLab(t)
	for _, s := range []string{"10.0.0.0/16", "nonsense", "fd00::/64"} {
		if l, err := New(context.Background(), Options{Subnet: s}); err == nil {
			l.Close(context.Background())
			t.Errorf("subnet %q accepted", s)
		}
	}
}

func TestNetemDetection(t *testing.T) {
	if err := Check(); err != nil {
		t.Skip(err)
	}
	err := NetemAvailable(context.Background())
	t.Logf("netem: %v", err)
	if err != nil && !strings.Contains(err.Error(), "netem") && !strings.Contains(err.Error(), "tc") {
		t.Errorf("netem probe error does not say what is missing: %v", err)
	}
	// The probe's namespace is gone; a probe of a run still going (in
	// another package's tests) has a live owner and is not an orphan.
	f, _ := Find(context.Background())
	for _, ns := range f.Orphans().Namespaces {
		if strings.HasSuffix(ns, "-probe") {
			t.Errorf("the probe left namespace %s", ns)
		}
	}
}
