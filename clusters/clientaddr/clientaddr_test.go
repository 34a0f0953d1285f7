package clientaddr

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as the listener inside the test's
// network namespace: it prints the source address of each connection.
func TestMain(m *testing.M) {
	if addr := os.Getenv("CLIENTADDR_TEST_LISTEN"); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Println(host)
			c.Close()
		}
	}
	os.Exit(m.Run())
}

// peer is a network namespace joined to this host by a veth pair, with
// a listener in it that reports each connection's source address.
type peer struct {
	ns, hostEnd string
	host, addr  netip.Addr // this host's end, the namespace's
	port        int
	seen        chan string
}

func newPeer(t *testing.T) *peer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, cgroups and nat rules")
	}
	if why := Reason(); why != "" {
		t.Fatalf("Reason() = %q on this host", why)
	}
	r := rand.IntN(200) + 20
	p := &peer{ns: fmt.Sprintf("lt-clientaddr-%d", os.Getpid()), hostEnd: fmt.Sprintf("ltca%dh", r),
		host: netip.AddrFrom4([4]byte{10, 76, byte(r), 1}), addr: netip.AddrFrom4([4]byte{10, 76, byte(r), 2}), port: 7000 + r, seen: make(chan string, 16)}
	sh := func(cmd string) {
		t.Helper()
		if out, err := exec.Command("sh", "-ec", cmd).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", cmd, err, out)
		}
	}
	sh(fmt.Sprintf("ip netns add %[1]s && ip link add %[2]s type veth peer name %[2]sx && ip link set %[2]sx netns %[1]s && ip addr add %[3]s/24 dev %[2]s && ip link set %[2]s up && ip -n %[1]s addr add %[4]s/24 dev %[2]sx && ip -n %[1]s link set %[2]sx up && ip -n %[1]s link set lo up",
		p.ns, p.hostEnd, p.host, p.addr))
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", p.hostEnd).Run()
		exec.Command("ip", "netns", "del", p.ns).Run()
	})
	cmd := exec.Command("ip", "netns", "exec", p.ns, os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("CLIENTADDR_TEST_LISTEN=%s:%d", p.addr, p.port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "listening" {
		t.Fatalf("listener: %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
			p.seen <- sc.Text()
		}
	}()
	return p
}

// connect opens a connection to the peer from a new process, started in
// cgroup cg ("" for this process's own), and returns the source address
// the peer saw.
func (p *peer) connect(t *testing.T, cg string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", p.addr, p.port))
	if cg != "" {
		fd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("connect from %q: %v: %s", cg, err, out)
	}
	select {
	case s := <-p.seen:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("the peer saw no connection from %q", cg)
	}
	return ""
}

// sleepIn starts a long sleep in cgroup cg; the channel gets its end.
func sleepIn(t *testing.T, cg string) <-chan error {
	t.Helper()
	sleeper := exec.Command("sleep", "60")
	fd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	sleeper.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill() })
	reaped := make(chan error, 1)
	go func() { reaped <- sleeper.Wait() }()
	return reaped
}

func natRules(t *testing.T, id string) []string {
	t.Helper()
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatal(err)
	}
	var rs []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, commentPrefix+id) {
			rs = append(rs, l)
		}
	}
	return rs
}

func hasAddr(t *testing.T, a netip.Addr) bool {
	t.Helper()
	m, err := hostAddrs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m[a]
}

func TestEachClientHostConnectsFromItsOwnAddress(t *testing.T) {
	ctx := context.Background()
	p := newPeer(t)
	a0 := netip.AddrFrom4([4]byte{10, 76, p.addr.As4()[2], 200})
	a1 := a0.Next()
	id := fmt.Sprintf("test-%d", os.Getpid())
	s, err := New(ctx, Options{RunID: id, Addresses: []netip.Addr{a0, a1}, Toward: p.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if s.Device() != p.hostEnd {
		t.Errorf("device %q, want %q", s.Device(), p.hostEnd)
	}
	if !hasAddr(t, a0) || !hasAddr(t, a1) {
		t.Fatalf("the addresses were not added to this host")
	}
	if got := p.connect(t, s.Cgroup(0)); got != a0.String() {
		t.Errorf("c0 came from %s, want %s", got, a0)
	}
	if got := p.connect(t, s.Cgroup(1)); got != a1.String() {
		t.Errorf("c1 came from %s, want %s", got, a1)
	}
	if got := p.connect(t, ""); got != p.host.String() {
		t.Errorf("a process outside the set came from %s, want the host's own %s", got, p.host)
	}
	if n := len(natRules(t, id)); n != 2 {
		t.Errorf("%d nat rules, want 2", n)
	}
	// A process still in a cgroup at Close is killed, not left behind.
	reaped := sleepIn(t, s.Cgroup(1))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("the process left in a cgroup still runs after Close")
	}
	if rs := natRules(t, id); len(rs) > 0 {
		t.Errorf("rules left after Close: %q", rs)
	}
	if hasAddr(t, a0) || hasAddr(t, a1) {
		t.Errorf("addresses left after Close")
	}
	if _, err := os.Stat(filepath.Dir(s.Cgroup(0))); !os.IsNotExist(err) {
		t.Errorf("cgroup left after Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ownerDir, id)); !os.IsNotExist(err) {
		t.Errorf("owner file left after Close: %v", err)
	}
}

// TestAnAddressTheHostHasIsKept: an address the host already had is used
// but neither added nor removed.
func TestAnAddressTheHostHasIsKept(t *testing.T) {
	ctx := context.Background()
	p := newPeer(t)
	id := fmt.Sprintf("test-kept-%d", os.Getpid())
	s, err := New(ctx, Options{RunID: id, Addresses: []netip.Addr{p.host}, Toward: p.addr})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.connect(t, s.Cgroup(0)); got != p.host.String() {
		t.Errorf("c0 came from %s, want %s", got, p.host)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !hasAddr(t, p.host) {
		t.Errorf("Close removed an address the host had before")
	}
}

// TestCleanupRemovesWhatADeadDriverLeft: a set whose owner is gone is
// found (dry run: and left), then removed with its process; a live set is
// left alone.
func TestCleanupRemovesWhatADeadDriverLeft(t *testing.T) {
	ctx := context.Background()
	p := newPeer(t)
	base := netip.AddrFrom4([4]byte{10, 76, p.addr.As4()[2], 210})
	live, err := New(ctx, Options{RunID: fmt.Sprintf("test-live-%d", os.Getpid()), Addresses: []netip.Addr{base}, Toward: p.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close(ctx)
	deadID := fmt.Sprintf("test-dead-%d", os.Getpid())
	dead, err := New(ctx, Options{RunID: deadID, Addresses: []netip.Addr{base.Next()}, Toward: p.addr})
	if err != nil {
		t.Fatal(err)
	}
	// Its driver is gone: the owner file names an exited process.
	gone := exec.Command("true")
	gone.Run()
	o := fmt.Sprintf(`{"pid":%d,"start":"1","dev":%q,"added":[%q]}`, gone.Process.Pid, p.hostEnd, base.Next().String())
	if err := os.WriteFile(filepath.Join(ownerDir, deadID), []byte(o), 0o644); err != nil {
		t.Fatal(err)
	}
	reaped := sleepIn(t, dead.Cgroup(0))

	found := func(dry bool) []string {
		t.Helper()
		// Only this test's sets: another package's test may have a dead
		// run's set that its own cleanup is to find.
		left, err := cleanup(ctx, dry, func(id string) bool { return strings.HasSuffix(id, fmt.Sprint(os.Getpid())) })
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, l := range left {
			ids = append(ids, l.RunID)
		}
		return ids
	}
	if ids := found(true); len(ids) != 1 || ids[0] != deadID {
		t.Fatalf("dry cleanup found %q, want only %s", ids, deadID)
	}
	if len(natRules(t, deadID)) != 1 || !hasAddr(t, base.Next()) {
		t.Fatal("a dry cleanup removed something")
	}
	if ids := found(false); len(ids) != 1 || ids[0] != deadID {
		t.Fatalf("cleanup found %q, want only %s", ids, deadID)
	}
	select {
	case <-reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("the dead run's client process still runs after cleanup")
	}
	if rs := natRules(t, deadID); len(rs) > 0 || hasAddr(t, base.Next()) {
		t.Errorf("cleanup left rules %q or the address", rs)
	}
	if len(natRules(t, live.id)) != 1 || !hasAddr(t, base) {
		t.Errorf("cleanup touched a live run's set")
	}
	if ids := found(true); len(ids) != 0 {
		t.Errorf("after cleanup, still found %q", ids)
	}
}

func TestBadOptions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	a := netip.MustParseAddr("10.76.1.200")
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"bad id", Options{RunID: "a/b", Addresses: []netip.Addr{a}, Toward: a}, "bad run id"},
		{"none", Options{RunID: "x"}, "none given"},
		{"twice", Options{RunID: "x", Addresses: []netip.Addr{a, a}, Toward: a}, "given twice"},
		{"ipv6", Options{RunID: "x", Addresses: []netip.Addr{netip.MustParseAddr("fd00::1")}, Toward: a}, "not an IPv4"},
		{"loopback", Options{RunID: "x", Addresses: []netip.Addr{a}, Toward: netip.MustParseAddr("127.0.0.1")}, "this host's own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(context.Background(), c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

func TestSplitRule(t *testing.T) {
	got, ok := splitRule(`-A POSTROUTING -o br0 -m comment --comment "a b \"c\"" -j SNAT --to-source 10.0.0.1`)
	want := []string{"-A", "POSTROUTING", "-o", "br0", "-m", "comment", "--comment", `a b "c"`, "-j", "SNAT", "--to-source", "10.0.0.1"}
	if !ok || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q", got)
	}
	if _, ok := splitRule(`-A X --comment "open`); ok {
		t.Fatal("an open quote was accepted")
	}
}

func TestLeftoverString(t *testing.T) {
	for _, c := range []struct {
		l    Leftover
		want string
	}{
		{Leftover{RunID: "ssh-r1", Added: []string{"10.0.0.193", "10.0.0.194"}, Owner: "4242"}, "the client addresses of run ssh-r1 (added 10.0.0.193,10.0.0.194; owner 4242)"},
		{Leftover{RunID: "docker-r2"}, "the client addresses of run docker-r2 (added none; owner none)"},
	} {
		if got := c.l.String(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.l, got, c.want)
		}
	}
}
