// Package clientaddr gives each client host of a run an address of its
// own on the control host, when the clients run as plain processes there
// (the ssh provider's clients) and the nodes see them all come from one
// address. Without it no network fault can single out one client, or put
// two clients on different sides of a partition.
//
// Each client host gets a cgroup v2 directory and an address. A worker
// process starts inside its host's cgroup (clone3's CLONE_INTO_CGROUP, so
// it never runs a moment outside it), and one SNAT rule in the nat table's
// POSTROUTING chain, matched by that cgroup (the xt_cgroup match) and by the
// interface that leads to the nodes, rewrites the source of every
// connection the process opens to the host's address. Any client program
// in any language is covered: nothing in it needs to bind an address. The
// nodes then see client host c0 come from its own address, and a rule on a
// node host that drops that address cuts c0 alone.
//
// An address the control host does not have yet is added to that
// interface as a /32 and removed again at Close; one it has is left as it
// is. The nodes' hosts must route the addresses back to the control host:
// on one Ethernet segment (the ssh lab's Docker network) an address of the
// segment's subnet is enough, since the control host answers ARP for it.
//
// Everything a Set makes is named by its run id: the cgroups
// <cgroup2 root>/locktest-clients-<id>/c<i>, the rules' comment
// "locktest-clients:<id>", and an owner file in /run/locktest-clientaddr
// that holds the driver's pid and start time and the addresses it added,
// so that Cleanup finds what a killed driver left and nothing else.
//
// The commands are `ip` (iproute2) and `iptables`; no Go library manages
// either without shelling out to them.
package clientaddr

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/procfs"
)

// ownerDir holds one owner file per live Set, named by its run id.
var ownerDir = "/run/locktest-clientaddr"

const (
	cgroupPrefix  = "locktest-clients-"
	commentPrefix = "locktest-clients:"
)

// Options configures a Set.
type Options struct {
	// RunID names everything the Set makes; letters, digits and '-' only.
	RunID string
	// Addresses are the client hosts' addresses, c0's first.
	Addresses []netip.Addr
	// Toward is an address of a node host: the interface the control host
	// reaches it through is the one the addresses go on and the rewrite
	// applies to.
	Toward netip.Addr
}

// Set is one run's client addresses: a cgroup and an address per client
// host. Close removes what it made.
type Set struct {
	id     string
	dev    string
	root   string // the cgroup2 mount point
	addrs  []netip.Addr
	added  []netip.Addr
	closed bool
}

// owner is the content of an owner file.
type owner struct {
	PID   int      `json:"pid"`
	Start string   `json:"start"`
	Dev   string   `json:"dev"`
	Added []string `json:"added,omitempty"`
}

// Reason says why client addresses cannot be made on this host, or "":
// they need root, `ip`, `iptables` and a mounted cgroup v2 hierarchy.
func Reason() string {
	if os.Geteuid() != 0 {
		return "client addresses need root (cgroups, addresses, iptables nat rules)"
	}
	for _, bin := range []string{"ip", "iptables", "iptables-save"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "client addresses need " + bin + ": run `make setup`"
		}
	}
	if _, err := cgroup2Root(); err != nil {
		return err.Error()
	}
	return ""
}

// New makes the cgroups, addresses and rules of opts. On an error it
// removes whatever it had made.
func New(ctx context.Context, opts Options) (s *Set, err error) {
	if why := Reason(); why != "" {
		return nil, errors.New(why)
	}
	if opts.RunID == "" || strings.ContainsFunc(opts.RunID, func(r rune) bool {
		return !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return nil, fmt.Errorf("client addresses: bad run id %q", opts.RunID)
	}
	if len(opts.Addresses) == 0 {
		return nil, errors.New("client addresses: none given")
	}
	seen := map[netip.Addr]bool{}
	for _, a := range opts.Addresses {
		if !a.Is4() {
			return nil, fmt.Errorf("client addresses: %v is not an IPv4 address", a)
		}
		if seen[a] {
			return nil, fmt.Errorf("client addresses: %v is given twice", a)
		}
		seen[a] = true
	}
	root, err := cgroup2Root()
	if err != nil {
		return nil, err
	}
	dev, err := routeDev(ctx, opts.Toward)
	if err != nil {
		return nil, err
	}
	s = &Set{id: opts.RunID, dev: dev, root: root, addrs: slices.Clone(opts.Addresses)}
	// The owner file comes first, so that whatever follows can be found.
	if err := s.writeOwner(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close(context.WithoutCancel(ctx))
			s = nil
		}
	}()
	have, err := hostAddrs(ctx)
	if err != nil {
		return s, err
	}
	for _, a := range s.addrs {
		if have[a] {
			continue
		}
		if err := run(ctx, "ip", "addr", "add", a.String()+"/32", "dev", dev); err != nil {
			return s, fmt.Errorf("client addresses: add %v to %s: %w", a, dev, err)
		}
		s.added = append(s.added, a)
		if err := s.writeOwner(); err != nil {
			return s, err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, cgroupPrefix+s.id), 0o755); err != nil {
		return s, fmt.Errorf("client addresses: %w", err)
	}
	for i, a := range s.addrs {
		if err := os.Mkdir(s.Cgroup(i), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return s, fmt.Errorf("client addresses: %w", err)
		}
		rel := cgroupPrefix + s.id + "/c" + strconv.Itoa(i)
		if err := run(ctx, "iptables", "-w", "-t", "nat", "-I", "POSTROUTING", "-o", dev, "-m", "cgroup", "--path", rel,
			"-m", "comment", "--comment", commentPrefix+s.id, "-j", "SNAT", "--to-source", a.String()); err != nil {
			return s, fmt.Errorf("client addresses: the rule that gives c%d its address (it needs the kernel's xt_cgroup match): %w", i, err)
		}
	}
	return s, nil
}

// Address returns client host i's address.
func (s *Set) Address(i int) netip.Addr { return s.addrs[i] }

// Len is how many client hosts the set has.
func (s *Set) Len() int { return len(s.addrs) }

// Device is the interface the addresses are on.
func (s *Set) Device() string { return s.dev }

// Cgroup returns the cgroup v2 directory client host i's processes must
// start in, for SysProcAttr.CgroupFD.
func (s *Set) Cgroup(i int) string {
	return filepath.Join(s.root, cgroupPrefix+s.id, "c"+strconv.Itoa(i))
}

// Cgroups returns the cgroup each worker process starts in
// (workloads.PoolConfig.Cgroup): client host i's for process i, "" (the
// driver's) for a process beyond the set. A nil set gives nil: no cgroups.
func (s *Set) Cgroups() func(process int) string {
	if s == nil {
		return nil
	}
	return func(i int) string {
		if i >= len(s.addrs) {
			return ""
		}
		return s.Cgroup(i)
	}
}

// Close kills any process still in the set's cgroups, removes the cgroups,
// the rules and the addresses it added, and its owner file. It is
// idempotent.
func (s *Set) Close(ctx context.Context) error {
	if s == nil || s.closed {
		return nil
	}
	s.closed = true
	err := remove(ctx, s.root, s.id, s.added)
	if err == nil {
		os.Remove(filepath.Join(ownerDir, s.id))
	}
	return err
}

func (s *Set) writeOwner() error {
	o := owner{PID: os.Getpid(), Start: procfs.StartTime(os.Getpid()), Dev: s.dev}
	for _, a := range s.added {
		o.Added = append(o.Added, a.String())
	}
	b, _ := json.Marshal(o)
	if err := os.MkdirAll(ownerDir, 0o755); err != nil {
		return fmt.Errorf("client addresses: %w", err)
	}
	if err := os.WriteFile(filepath.Join(ownerDir, s.id), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("client addresses: %w", err)
	}
	return nil
}

// remove undoes what the set of run id made: processes, cgroups, rules,
// added addresses. Each step runs even when an earlier one failed.
func remove(ctx context.Context, root, id string, added []netip.Addr) error {
	var errs []error
	if err := removeRules(ctx, id); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(filepath.Join(root, cgroupPrefix+id)); err != nil {
		errs = append(errs, err)
	}
	if len(added) > 0 {
		have, err := hostAddrDevs(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		for _, a := range added {
			dev, ok := have[a]
			if !ok {
				continue
			}
			if err := run(ctx, "ip", "addr", "del", a.String()+"/32", "dev", dev); err != nil {
				errs = append(errs, fmt.Errorf("client addresses: remove %v: %w", a, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeRules deletes the nat rules whose comment is run id's.
func removeRules(ctx context.Context, id string) error {
	out, err := output(ctx, "iptables-save", "-t", "nat")
	if err != nil {
		return fmt.Errorf("client addresses: %w", err)
	}
	var errs []error
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "-A ") || !strings.Contains(l, commentPrefix+id) {
			continue
		}
		args, ok := splitRule(l)
		if !ok {
			errs = append(errs, fmt.Errorf("client addresses: cannot read rule %q", l))
			continue
		}
		args[0] = "-D"
		if err := run(ctx, append([]string{"iptables", "-w", "-t", "nat"}, args...)...); err != nil {
			errs = append(errs, fmt.Errorf("client addresses: %w", err))
		}
	}
	return errors.Join(errs...)
}

// splitRule splits an iptables-save line into arguments, honouring the
// double quotes iptables-save puts around a comment with spaces.
func splitRule(l string) ([]string, bool) {
	var args []string
	var cur strings.Builder
	inQ, have := false, false
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c == '"':
			inQ, have = !inQ, true
		case c == '\\' && inQ && i+1 < len(l):
			i++
			cur.WriteByte(l[i])
		case c == ' ' && !inQ:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if have {
		args = append(args, cur.String())
	}
	return args, !inQ
}

// removeCgroups kills the processes left in the cgroups under dir and
// removes them, then dir.
func removeCgroups(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("client addresses: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		cg := filepath.Join(dir, e.Name())
		if err := emptyCgroup(cg); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("client addresses: remove %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

// emptyCgroup SIGKILLs every process in cg, waits for them to go and
// removes cg.
func emptyCgroup(cg string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(cg)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("client addresses: remove %s: %w", cg, err)
		}
		for _, pid := range procs(cg) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procs lists the pids in cgroup cg.
func procs(cg string) []int {
	b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Owned returns the run ids of the sets whose owner file names process
// pid: those it made and has not closed.
func Owned(pid int) []string {
	ents, _ := os.ReadDir(ownerDir)
	var ids []string
	for _, e := range ents {
		raw, _ := os.ReadFile(filepath.Join(ownerDir, e.Name()))
		var o owner
		if json.Unmarshal(raw, &o) == nil && o.PID == pid {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// Leftover is what a driver that is gone left of its client addresses.
type Leftover struct {
	RunID string
	// Added are the addresses it had added; Owner its owner file's
	// content, or "" when there was none.
	Added []string
	Owner string
}

// String names l as cleanup lists it: "the client addresses of run R
// (added A,B; owner O)", with "none" for no addresses or no owner.
func (l Leftover) String() string {
	added, owner := strings.Join(l.Added, ","), l.Owner
	if added == "" {
		added = "none"
	}
	if owner == "" {
		owner = "none"
	}
	return fmt.Sprintf("the client addresses of run %s (added %s; owner %s)", l.RunID, added, owner)
}

// Cleanup finds the sets whose driver is gone (its owner file names a
// process that no longer runs, or there is none) and, unless dry, removes
// what they made. Live runs' sets are left alone.
func Cleanup(ctx context.Context, dry bool) ([]Leftover, error) {
	return cleanup(ctx, dry, nil)
}

// cleanup is Cleanup of the sets whose run id match accepts (every set's,
// when match is nil).
func cleanup(ctx context.Context, dry bool, match func(id string) bool) ([]Leftover, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	ids := map[string]bool{}
	if ents, err := os.ReadDir(ownerDir); err == nil {
		for _, e := range ents {
			ids[e.Name()] = true
		}
	}
	root, rerr := cgroup2Root()
	if rerr == nil {
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if id, ok := strings.CutPrefix(e.Name(), cgroupPrefix); ok && e.IsDir() {
				ids[id] = true
			}
		}
	}
	if out, err := output(ctx, "iptables-save", "-t", "nat"); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if _, rest, ok := strings.Cut(l, commentPrefix); ok {
				if id, _, _ := strings.Cut(strings.Trim(rest, `"`), " "); id != "" {
					ids[strings.Trim(id, `"`)] = true
				}
			}
		}
	}
	var left []Leftover
	var errs []error
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range ids {
			if !yield(id) {
				return
			}
		}
	}) {
		if match != nil && !match(id) {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join(ownerDir, id))
		var o owner
		if len(raw) > 0 && json.Unmarshal(raw, &o) == nil && o.PID > 0 && procfs.StartTime(o.PID) != "" && procfs.StartTime(o.PID) == o.Start {
			continue // its driver runs
		}
		l := Leftover{RunID: id, Added: o.Added, Owner: strings.TrimSpace(string(raw))}
		left = append(left, l)
		if dry {
			continue
		}
		var added []netip.Addr
		for _, a := range o.Added {
			if p, err := netip.ParseAddr(a); err == nil {
				added = append(added, p)
			}
		}
		r := root
		if rerr != nil {
			r = ""
		}
		var err error
		if r != "" {
			err = remove(ctx, r, id, added)
		} else {
			err = removeRules(ctx, id)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		os.Remove(filepath.Join(ownerDir, id))
	}
	return left, errors.Join(errs...)
}

// Root returns where the cgroup v2 hierarchy is mounted: the unified
// hierarchy of a cgroup v2 host, or its "unified" mount under a hybrid v1
// layout.
func Root() (string, error) { return cgroup2Root() }

// cgroup2Root returns where the cgroup v2 hierarchy is mounted: the
// unified hierarchy of a cgroup v2 host, or its "unified" mount under a
// hybrid v1 layout.
func cgroup2Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("client addresses: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint opts ... - fstype source superopts
		l := sc.Text()
		pre, post, ok := strings.Cut(l, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 1 && qf[0] == "cgroup2" && pf[3] == "/" {
			return pf[4], nil
		}
	}
	return "", errors.New("client addresses need a cgroup v2 hierarchy, and none is mounted here")
}

// routeDev returns the interface this host reaches a through.
func routeDev(ctx context.Context, a netip.Addr) (string, error) {
	if !a.IsValid() {
		return "", errors.New("client addresses: no node host address to route to")
	}
	out, err := output(ctx, "ip", "-j", "route", "get", a.String())
	if err != nil {
		return "", fmt.Errorf("client addresses: route to %v: %w", a, err)
	}
	var rs []struct {
		Dev string `json:"dev"`
	}
	if err := json.Unmarshal(out, &rs); err != nil || len(rs) == 0 || rs[0].Dev == "" {
		return "", fmt.Errorf("client addresses: route to %v: cannot read %q", a, strings.TrimSpace(string(out)))
	}
	if rs[0].Dev == "lo" {
		return "", fmt.Errorf("client addresses: %v is this host's own address: the nodes must be on other hosts", a)
	}
	return rs[0].Dev, nil
}

// hostAddrs returns every IPv4 address of this host.
func hostAddrs(ctx context.Context) (map[netip.Addr]bool, error) {
	m, err := hostAddrDevs(ctx)
	out := map[netip.Addr]bool{}
	for a := range m {
		out[a] = true
	}
	return out, err
}

// hostAddrDevs maps every IPv4 address of this host to its interface.
func hostAddrDevs(ctx context.Context) (map[netip.Addr]string, error) {
	out, err := output(ctx, "ip", "-j", "-4", "addr", "show")
	if err != nil {
		return nil, fmt.Errorf("client addresses: %w", err)
	}
	var links []struct {
		Name  string `json:"ifname"`
		Addrs []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("client addresses: read `ip -j addr show`: %w", err)
	}
	m := map[netip.Addr]string{}
	for _, l := range links {
		for _, a := range l.Addrs {
			if p, err := netip.ParseAddr(a.Local); err == nil {
				m[p] = l.Name
			}
		}
	}
	return m, nil
}

func run(ctx context.Context, argv ...string) error {
	_, err := output(ctx, argv...)
	return err
}

func output(ctx context.Context, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return out, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, msg)
	}
	return out, nil
}
