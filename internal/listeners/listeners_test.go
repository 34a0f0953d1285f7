package listeners

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// The tables in testdata are hand-written in the kernel's format: listening
// and established TCP sockets, IPv4-mapped IPv6, bound and connected UDP.
func TestParseInet(t *testing.T) {
	for _, tc := range []struct {
		proto string
		want  []Socket
	}{
		{"tcp", []Socket{
			{Proto: "tcp", Addr: ap("127.0.0.1:6379"), Inode: 1001},
			{Proto: "tcp", Addr: ap("10.77.3.2:2181"), Inode: 1002},
			{Proto: "tcp", Addr: ap("0.0.0.0:8080"), Inode: 1003},
			// 1004 is an established connection: not listed.
		}},
		{"tcp6", []Socket{
			{Proto: "tcp6", Addr: ap("[::1]:3306"), Inode: 2001},
			{Proto: "tcp6", Addr: ap("[::]:3307"), Inode: 2002},
			{Proto: "tcp6", Addr: ap("[::ffff:127.0.0.1]:3308"), Inode: 2003},
		}},
		{"udp", []Socket{
			{Proto: "udp", Addr: ap("0.0.0.0:5353"), Inode: 3001},
			// 3002 is connected to a peer: not listed.
		}},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			got, err := ParseInet(open(t, tc.proto), tc.proto)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestParseUnix(t *testing.T) {
	got, err := ParseUnix(open(t, "unix"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Socket{
		{Proto: "unix", Path: "/tmp/run/nodes/n1/mysqld.sock", Inode: 4001},
		{Proto: "unix", Path: "@locktest-abstract", Inode: 4002},
		// 4003 is a connection, 4005 an unbound datagram socket.
		{Proto: "unix", Path: "/var/run/some dgram.sock", Inode: 4004},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestParseRejectsMalformedLines(t *testing.T) {
	for _, tc := range []struct{ proto, table, want string }{
		{"tcp", "header\n   0: 0100007F:18EB 00000000:0000 0A\n", "tcp line 2: 4 fields"},
		{"tcp", "header\n   0: 0100007F 00000000:0000 0A 0 0 0 0 0 1001\n", `tcp line 2: local address "0100007F": no port`},
		{"tcp", "header\n   0: 0100:18EB 00000000:0000 0A 0 0 0 0 0 1001\n", "not 8 or 32 hex digits"},
		{"udp", "header\n   0: 0100007F:18EB 00000000:0000 07 0 0 0 0 0 x\n", `udp line 2: inode "x"`},
		{"unix", "header\n0: 00000002 00000000 0001000 0001 01\n", "unix line 2: 6 fields"},
	} {
		var err error
		if tc.proto == "unix" {
			_, err = ParseUnix(strings.NewReader(tc.table))
		} else {
			_, err = ParseInet(strings.NewReader(tc.table), tc.proto)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: error %v, want one containing %q", tc.proto, tc.table, err, tc.want)
		}
	}
}

// Exposed lets through loopback, the run's prefixes and Unix sockets below
// its folders, and nothing else: a wildcard address is exposed even when a
// prefix would contain it.
func TestExposed(t *testing.T) {
	lab := []netip.Prefix{netip.MustParsePrefix("10.77.3.0/24")}
	dirs := []string{"/store/run"}
	for _, tc := range []struct {
		name    string
		s       Socket
		allowed []netip.Prefix
		exposed bool
	}{
		{"loopback", Socket{Proto: "tcp", Addr: ap("127.0.0.1:6379")}, nil, false},
		{"other loopback", Socket{Proto: "tcp", Addr: ap("127.0.0.2:6379")}, nil, false},
		{"loopback v6", Socket{Proto: "tcp6", Addr: ap("[::1]:6379")}, nil, false},
		{"mapped loopback", Socket{Proto: "tcp6", Addr: ap("[::ffff:127.0.0.1]:6379")}, nil, false},
		{"lab address", Socket{Proto: "tcp", Addr: ap("10.77.3.2:2181")}, lab, false},
		{"lab address, no lab", Socket{Proto: "tcp", Addr: ap("10.77.3.2:2181")}, nil, true},
		{"another subnet", Socket{Proto: "tcp", Addr: ap("10.77.4.2:2181")}, lab, true},
		{"wildcard", Socket{Proto: "tcp", Addr: ap("0.0.0.0:8080")}, lab, true},
		{"wildcard in a catch-all prefix", Socket{Proto: "tcp", Addr: ap("0.0.0.0:8080")}, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, true},
		{"wildcard v6", Socket{Proto: "tcp6", Addr: ap("[::]:3888")}, lab, true},
		{"wildcard udp", Socket{Proto: "udp", Addr: ap("0.0.0.0:5353")}, lab, true},
		{"host address", Socket{Proto: "tcp", Addr: ap("192.168.1.5:22")}, lab, true},
		{"unix below the run", Socket{Proto: "unix", Path: "/store/run/nodes/n1/mysqld.sock"}, nil, false},
		{"unix elsewhere", Socket{Proto: "unix", Path: "/tmp/mysqld.sock"}, nil, true},
		{"unix beside the run", Socket{Proto: "unix", Path: "/store/run2/x.sock"}, nil, true},
		{"unix abstract", Socket{Proto: "unix", Path: "@jvm"}, nil, true},
		{"unix unnamed", Socket{Proto: "unix"}, nil, false},
	} {
		got := Exposed([]Socket{tc.s}, tc.allowed, dirs)
		if (len(got) > 0) != tc.exposed {
			t.Errorf("%s: %v exposed = %v, want %v", tc.name, tc.s, len(got) > 0, tc.exposed)
		}
	}
}

// Of finds this process's own listeners in the kernel's tables, and a
// listener on every address is exposed.
func TestOfFindsRealListeners(t *testing.T) {
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	all, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	socks, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	find := func(addr string) bool {
		return slices.ContainsFunc(socks, func(s Socket) bool { return s.Addr.String() == addr && s.PID == os.Getpid() })
	}
	for _, l := range []net.Listener{lo, all} {
		if !find(l.Addr().String()) {
			t.Errorf("listener %s not found in %v", l.Addr(), socks)
		}
	}
	exp := Exposed(socks, nil, nil)
	if len(exp) != 1 || exp[0].Addr.String() != all.Addr().String() {
		t.Errorf("exposed %v, want only %s", exp, all.Addr())
	}
}

func TestDescendants(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ps, err := Descendants(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if ps[0] != os.Getpid() || !slices.Contains(ps, cmd.Process.Pid) {
		t.Errorf("descendants %v: want this process first and the child %d", ps, cmd.Process.Pid)
	}
}

func TestParseStat(t *testing.T) {
	pid, ppid, ok := parseStat([]byte("1234 (a (weird) name) S 99 1234 1234 0 -1"))
	if !ok || pid != 1234 || ppid != 99 {
		t.Errorf("got %d %d %v, want 1234 99 true", pid, ppid, ok)
	}
	if _, _, ok := parseStat([]byte("garbage")); ok {
		t.Error("garbage parsed")
	}
}
