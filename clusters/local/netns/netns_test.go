package netns

import (
	"context"
	"net"
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

// testLab makes a lab for a test that needs one (or skips it), closes it
// when the test ends, and then fails the test if anything of it is left.
func testLab(t *testing.T) *Network {
	t.Helper()
	needLab(t)
	lab, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertGone(t, lab.ID()) }) // runs after the Close below
	t.Cleanup(func() { lab.Close(context.Background()) })
	return lab
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
	ctx := context.Background()
	lab := testLab(t)
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

// TestAddAllMakesHostsAtOnceOrNone makes three hosts in one AddAll and
// checks each is set up as Add makes one (its address on eth0, lo up, the
// fault chains in place, its veth on the bridge, reachable from the
// driver); then an AddAll whose second host's namespace already exists
// fails before it makes anything: neither host is left, the namespace it
// found is untouched (its delete below succeeds), and the lab takes the
// same names afterwards.
func TestAddAllMakesHostsAtOnceOrNone(t *testing.T) {
	ctx := context.Background()
	lab := testLab(t)
	hs, err := lab.AddAll(ctx, "a1", "a2", "a3")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", lab.Gateway()+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if len(hs) != 3 || hs[0].Name != "a1" || hs[2].Name != "a3" || hs[0].IP == hs[1].IP {
		t.Fatalf("hosts %+v", hs)
	}
	for _, h := range hs {
		out, err := exec.Command("ip", "-n", h.NS, "-o", "-4", "addr", "show", "dev", "eth0").CombinedOutput()
		if err != nil || !strings.Contains(string(out), h.IP+"/24") {
			t.Errorf("%s: eth0 has not %s: %s %v", h.Name, h.IP, out, err)
		}
		if out, err := exec.Command("ip", "-n", h.NS, "link", "show", "lo").CombinedOutput(); err != nil || !strings.Contains(string(out), "UP") {
			t.Errorf("%s: lo is not up: %s", h.Name, out)
		}
		if out, err := exec.Command("ip", "link", "show", h.Veth).CombinedOutput(); err != nil || !strings.Contains(string(out), "master "+"lt"+lab.ID()) {
			t.Errorf("%s: veth %s is not on the bridge: %s", h.Name, h.Veth, out)
		}
		if out, err := exec.Command("ip", "netns", "exec", h.NS, "iptables", "-w", "-S").CombinedOutput(); err != nil || !strings.Contains(string(out), "-A INPUT -j LOCKTEST-IN") || !strings.Contains(string(out), "-A OUTPUT -j LOCKTEST-OUT") {
			t.Errorf("%s: fault chains missing: %s", h.Name, out)
		}
		if out, err := exec.Command("ip", "netns", "exec", h.NS, "bash", "-c", "exec 3<>/dev/tcp/"+ln.Addr().String()[:strings.LastIndex(ln.Addr().String(), ":")]+"/"+ln.Addr().String()[strings.LastIndex(ln.Addr().String(), ":")+1:]).CombinedOutput(); err != nil {
			t.Errorf("%s: cannot reach the driver on the bridge (%s): %s %v", h.Name, ln.Addr(), out, err)
		}
	}

	// A namespace the batch will find taken: the lab's name for host b2.
	taken := nsPrefix + lab.ID() + "-b2"
	if out, err := exec.Command("ip", "netns", "add", taken).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if _, err := lab.AddAll(ctx, "b1", "b2"); err == nil {
		t.Fatal("AddAll over a namespace that exists succeeded")
	}
	if err := exec.Command("ip", "netns", "del", taken).Run(); err != nil {
		t.Fatal(err)
	}
	f, err := Find(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range f.Of(lab.ID()).Namespaces {
		if strings.HasSuffix(ns, "-b1") || strings.HasSuffix(ns, "-b2") {
			t.Errorf("the failed AddAll left namespace %s", ns)
		}
	}
	for _, l := range f.Of(lab.ID()).Links {
		if strings.HasSuffix(l, "b1") || strings.HasSuffix(l, "b2") {
			t.Errorf("the failed AddAll left link %s", l)
		}
	}
	if got := len(lab.Hosts()); got != 3 {
		t.Errorf("the lab has %d hosts after the failed AddAll, want 3", got)
	}
	b, err := lab.AddAll(ctx, "b1", "b2")
	if err != nil {
		t.Fatalf("the names of a failed AddAll: %v", err)
	}
	if b[0].IP != hs[2].IP[:strings.LastIndex(hs[2].IP, ".")]+".5" {
		t.Errorf("b1 got %s, want the address after a3's (%s)", b[0].IP, hs[2].IP)
	}
}
