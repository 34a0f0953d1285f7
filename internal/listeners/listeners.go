// Package listeners lists the sockets that processes accept traffic on — TCP
// sockets in the LISTEN state, unconnected bound UDP sockets and listening
// or bound Unix sockets — by reading /proc, each in the network namespace of
// the process that holds it, and says which of them are exposed beyond the
// addresses a run may use. It serves the tests that show a run binds only
// to loopback or to its own namespaces' addresses.
package listeners

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Socket is one socket a process accepts traffic on.
type Socket struct {
	// Proto is "tcp", "tcp6", "udp", "udp6" or "unix".
	Proto string
	// Addr is the local address of an inet socket; 0.0.0.0 or :: is a
	// socket bound to every address.
	Addr netip.AddrPort
	// Path is a Unix socket's path; an abstract socket's name starts with
	// "@"; an unnamed one's is "".
	Path string
	// Inode identifies the socket.
	Inode uint64
	// PID and Comm are the process that holds it (0 and "" until Of fills
	// them in).
	PID  int
	Comm string
}

// String renders s as `ss` would name it, with its process.
func (s Socket) String() string {
	where := s.Path
	if s.Proto != "unix" {
		where = s.Addr.String()
	}
	return fmt.Sprintf("%s %s (pid %d %s)", s.Proto, where, s.PID, s.Comm)
}

// TCP states and Unix socket flags of /proc/net.
const (
	tcpListen     = "0A"
	udpUnconnect  = "07" // TCP_CLOSE: a UDP socket with no peer
	unixAcceptCon = 0x10000
	unixDgram     = 2
)

// ParseInet reads a /proc/net/{tcp,tcp6,udp,udp6} table and returns its
// TCP sockets in the LISTEN state, or its UDP sockets that have no peer
// (they receive from anyone). proto is "tcp", "tcp6", "udp" or "udp6". A
// malformed line is an error naming it.
func ParseInet(r io.Reader, proto string) ([]Socket, error) {
	want := tcpListen
	if strings.HasPrefix(proto, "udp") {
		want = udpUnconnect
	}
	var out []Socket
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 1 || len(f) == 0 {
			continue // the header
		}
		if len(f) < 10 {
			return nil, fmt.Errorf("%s line %d: %d fields, want at least 10", proto, n, len(f))
		}
		if f[3] != want {
			continue
		}
		local, err := parseHexAddr(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: local address %q: %w", proto, n, f[1], err)
		}
		if want == udpUnconnect {
			remote, err := parseHexAddr(f[2])
			if err != nil {
				return nil, fmt.Errorf("%s line %d: remote address %q: %w", proto, n, f[2], err)
			}
			if remote.Port() != 0 {
				continue // connected: it takes datagrams of its peer only
			}
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: inode %q: %w", proto, n, f[9], err)
		}
		out = append(out, Socket{Proto: proto, Addr: local, Inode: ino})
	}
	return out, sc.Err()
}

// parseHexAddr decodes the kernel's "ADDR:PORT": the address as 32-bit
// words in host (little-endian) order, the port in big-endian hex.
func parseHexAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, errors.New("no port")
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port: %w", err)
	}
	b, err := hex.DecodeString(a)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}, errors.New("address is not 8 or 32 hex digits")
	}
	for i := 0; i < len(b); i += 4 { // each word is little-endian
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// ParseUnix reads /proc/net/unix and returns its listening sockets and its
// bound datagram sockets (those with a path). A malformed line is an error
// naming it.
func ParseUnix(r io.Reader) ([]Socket, error) {
	var out []Socket
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 1 || len(f) == 0 {
			continue
		}
		if len(f) < 7 {
			return nil, fmt.Errorf("unix line %d: %d fields, want at least 7", n, len(f))
		}
		flags, err1 := strconv.ParseUint(f[3], 16, 32)
		typ, err2 := strconv.ParseUint(f[4], 16, 16)
		ino, err3 := strconv.ParseUint(f[6], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("unix line %d: %w", n, err)
		}
		path := ""
		if len(f) > 7 {
			path = strings.Join(f[7:], " ")
		}
		if flags&unixAcceptCon == 0 && !(typ == unixDgram && path != "") {
			continue
		}
		out = append(out, Socket{Proto: "unix", Path: path, Inode: ino})
	}
	return out, sc.Err()
}

// Of returns the sockets that process pid holds open and accepts traffic
// on, read from its descriptors and from the tables of its own network
// namespace (/proc/<pid>/net). A process that exits meanwhile gives what
// could be read, or an error satisfying errors.Is(err, os.ErrNotExist).
func Of(pid int) ([]Socket, error) {
	dir := fmt.Sprintf("/proc/%d", pid)
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if s, ok := strings.CutPrefix(link, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[ino] = true
			}
		}
	}
	comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
	var out []Socket
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6", "unix"} {
		f, err := os.Open(filepath.Join(dir, "net", proto))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && proto != "tcp" {
				continue // no IPv6, say
			}
			return out, err
		}
		var socks []Socket
		if proto == "unix" {
			socks, err = ParseUnix(f)
		} else {
			socks, err = ParseInet(f, proto)
		}
		f.Close()
		if err != nil {
			return out, fmt.Errorf("pid %d: %w", pid, err)
		}
		for _, s := range socks {
			if inodes[s.Inode] {
				s.PID, s.Comm = pid, strings.TrimSpace(string(comm))
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// Descendants returns pid and every process below it, read from the parent
// pids in /proc/*/stat.
func Descendants(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	kids := map[int][]int{}
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue // exited meanwhile
		}
		p, pp, ok := parseStat(b)
		if ok {
			kids[pp] = append(kids[pp], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, kids[out[i]]...)
	}
	return out, nil
}

// parseStat returns the pid and parent pid of a /proc/<pid>/stat line. The
// command name, in parentheses, may itself hold spaces and parentheses.
func parseStat(b []byte) (pid, ppid int, ok bool) {
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return 0, 0, false
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(s[:open]))
	ppid, err2 := strconv.Atoi(f[1])
	return pid, ppid, err1 == nil && err2 == nil
}

// Exposed returns the inet sockets among socks that accept traffic from
// beyond loopback and the given prefixes — a wildcard address (0.0.0.0, ::)
// always does — and the Unix sockets that anyone on the host could reach:
// abstract ones (named by the network namespace, not the file system) and
// those whose path is not under one of dirs.
func Exposed(socks []Socket, allowed []netip.Prefix, dirs []string) []Socket {
	var out []Socket
	for _, s := range socks {
		if s.Proto == "unix" {
			if s.Path == "" {
				continue // unnamed: reachable only through its descriptor
			}
			if strings.HasPrefix(s.Path, "@") || !slices.ContainsFunc(dirs, func(d string) bool { return within(s.Path, d) }) {
				out = append(out, s)
			}
			continue
		}
		a := s.Addr.Addr().Unmap()
		if a.IsLoopback() {
			continue
		}
		if !a.IsUnspecified() && slices.ContainsFunc(allowed, func(p netip.Prefix) bool { return p.Contains(a) }) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
