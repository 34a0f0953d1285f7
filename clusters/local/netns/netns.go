// Package netns gives every node and every client host of a run a network
// namespace of its own, attached by a veth pair to a bridge the run creates,
// with addresses from one private /24 the run owns. Network faults are
// iptables rules inside those namespaces: a partition DROPs the packets
// between two sets of hosts (connections hang, as in a real partition; no
// RST is sent), packet loss DROPs a random fraction with the `statistic`
// match. Healing flushes the rules; Close deletes the namespaces (which
// removes their rules and veths), the bridge and the one FORWARD rule the
// lab adds to the host.
//
// Every object carries the lab's id in its name — namespaces
// "locktest-<id>-<host>", links "lt<id>…", the FORWARD rule's comment
// "locktest-<id>" — so Cleanup can find what a crashed run left without
// touching anything else.
//
// The host may run a Docker engine, which sets the FORWARD policy to DROP
// and loads br_netfilter, so that frames crossing any Linux bridge traverse
// iptables' FORWARD chain. A lab therefore inserts, at the top of FORWARD, an
// ACCEPT for traffic from its bridge to its bridge.
//
// The commands are `ip` (iproute2), `iptables` and `iptables-restore`; no
// Go library manages iptables without shelling out to it either. A fault
// puts each host's rules in with one iptables-restore, all or none.
package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/locktest/locktest/clusters/netrules"
)

// Prefixes of everything a lab names; Cleanup matches them.
const (
	nsPrefix      = "locktest-"
	commentPrefix = "locktest-"
	// lockPath serialises subnet picking between labs of concurrent runs.
	lockPath = "/run/lock/locktest-netns.lock"
	// ownerDir holds one file per live lab, named by its id and holding the
	// pid of the process that made it; Cleanup spares labs whose owner lives.
	ownerDir = "/run/locktest-labs"
)

var (
	nsPattern   = regexp.MustCompile(`^locktest-([0-9a-f]{4})-`)
	linkPattern = regexp.MustCompile(`^lt([0-9a-f]{4})`)
)

// Check reports why network namespaces cannot be used here, or nil if they
// can: it needs root, `ip`, `iptables` and `iptables-restore`.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("network faults need root (network namespaces, veth, iptables)")
	}
	for _, bin := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("network faults need %s: run `make setup`", bin)
		}
	}
	return nil
}

// Options configures a lab.
type Options struct {
	// Subnet is the /24 the lab uses, e.g. "10.77.3.0/24"; "" picks the
	// first 10.77.N.0/24 that no interface of this host uses.
	Subnet string
	Logger *slog.Logger
}

// Host is one namespace of a lab.
type Host struct {
	// Name is the lab-wide name, e.g. "n1" or "c0".
	Name string
	// NS is the network namespace's name.
	NS string
	// IP is the host's address on the lab's bridge.
	IP string
	// Veth is the host-side end of the host's veth pair.
	Veth string
}

// Network is one run's namespaces, bridge and rules. Its methods are safe for
// concurrent use.
type Network struct {
	id     string
	bridge string
	subnet netip.Prefix
	gw     netip.Addr
	fwd    []string // the FORWARD rule's match and target
	lg     *slog.Logger

	mu     sync.Mutex
	hosts  map[string]*Host
	order  []string
	next   netip.Addr
	faulty map[string]bool // hosts with rules in their chains
	made   *State          // the lab as made (Record), or nil
	closed bool
}

// New creates a lab: a bridge with the subnet's first address and the
// FORWARD rule. Close removes both.
func New(ctx context.Context, opts Options) (*Network, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	unlock, err := lockFile()
	if err != nil {
		return nil, err
	}
	defer unlock()
	id, err := freeID(ctx)
	if err != nil {
		return nil, err
	}
	made := false
	defer func() {
		if !made {
			os.Remove(ownerDir + "/" + id) // nothing of the lab exists
		}
	}()
	l := &Network{id: id, bridge: "lt" + id, lg: lg, hosts: map[string]*Host{}, faulty: map[string]bool{}}
	if opts.Subnet != "" {
		p, err := netip.ParsePrefix(opts.Subnet)
		if err != nil || !p.Addr().Is4() || p.Bits() != 24 {
			return nil, fmt.Errorf("subnet %q: want an IPv4 /24 such as 10.77.0.0/24", opts.Subnet)
		}
		l.subnet = p.Masked()
		if used, err := subnetsInUse(ctx); err == nil && used[l.subnet] {
			return nil, fmt.Errorf("subnet %s is already used by an interface of this host", l.subnet)
		}
	} else if l.subnet, err = freeSubnet(ctx); err != nil {
		return nil, err
	}
	l.gw = l.subnet.Addr().Next()
	l.next = l.gw.Next()
	l.fwd = []string{"-i", l.bridge, "-o", l.bridge, "-m", "comment", "--comment", commentPrefix + id, "-j", "ACCEPT"}
	steps := [][]string{
		{"ip", "link", "add", l.bridge, "type", "bridge"},
		{"ip", "addr", "add", l.gw.String() + "/24", "dev", l.bridge},
		{"ip", "link", "set", l.bridge, "up"},
		append([]string{"iptables", "-w", "-I", "FORWARD", "1"}, l.fwd...),
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			l.Close(context.Background())
			return nil, err
		}
	}
	made = true
	lg.Info("network lab created", "lab", id, "bridge", l.bridge, "subnet", l.subnet)
	return l, nil
}

// ID returns the lab's id, part of every name it gives.
func (l *Network) ID() string { return l.id }

// Subnet returns the lab's /24.
func (l *Network) Subnet() string { return l.subnet.String() }

// Gateway returns the bridge's address: the driver's own address on the lab,
// where services of the driver (the resource store) listen for workers.
func (l *Network) Gateway() string { return l.gw.String() }

// Add creates the namespace of a host called name, with the next address.
func (l *Network) Add(ctx context.Context, name string) (Host, error) {
	hs, err := l.AddAll(ctx, name)
	if err != nil {
		return Host{}, err
	}
	return hs[0], nil
}

// AddAll creates the namespaces of hosts called names, in order, each with
// the next address, and returns them in that order. It makes them in a few
// processes whatever their number: one `ip -batch` makes every namespace
// and veth pair and puts the veths on the bridge, then, for each host at
// once, one `ip -batch` inside its namespace sets its addresses up and one
// iptables-restore adds the fault chains. A loaded machine makes each
// process wait for the CPU (13 per host, one after the other, took up to
// 48 s for the 14 hosts of a run beside six others). On an error no host of
// names is left, and the lab is as it was.
func (l *Network) AddAll(ctx context.Context, names ...string) ([]Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("netns: lab is closed")
	}
	hs := make([]*Host, 0, len(names))
	next := l.next
	for _, name := range names {
		if _, dup := l.hosts[name]; dup || slices.ContainsFunc(hs, func(h *Host) bool { return h.Name == name }) {
			return nil, fmt.Errorf("netns: host %s exists", name)
		}
		veth := "lt" + l.id + name
		if len(veth) > 15 || !hostName.MatchString(name) {
			return nil, fmt.Errorf("netns: host name %q must be lower-case letters and digits, at most 9", name)
		}
		if !l.subnet.Contains(next) || next == netip.AddrFrom4([4]byte{l.subnet.Addr().As4()[0], l.subnet.Addr().As4()[1], l.subnet.Addr().As4()[2], 255}) {
			return nil, errors.New("netns: subnet has no address left")
		}
		hs = append(hs, &Host{Name: name, NS: nsPrefix + l.id + "-" + name, IP: next.String(), Veth: veth})
		next = next.Next()
	}
	if len(hs) == 0 {
		return nil, nil
	}
	for _, h := range hs {
		// Names carry the lab's id, so these are leftovers of nobody's
		// lab but this one; refused before anything is made, the undo
		// below removes only what this call made.
		if _, err := os.Stat(netnsDir + "/" + h.NS); err == nil {
			return nil, fmt.Errorf("netns: host %s: namespace %s exists", h.Name, h.NS)
		}
		if _, err := os.Stat("/sys/class/net/" + h.Veth); err == nil {
			return nil, fmt.Errorf("netns: host %s: link %s exists", h.Name, h.Veth)
		}
	}
	var outside []string
	for _, h := range hs {
		outside = append(outside,
			"netns add "+h.NS,
			"link add "+h.Veth+" type veth peer name eth0 netns "+h.NS,
			"link set "+h.Veth+" master "+l.bridge+" up")
	}
	err := batch(ctx, "", outside)
	if err == nil {
		errs := make([]error, len(hs))
		var wg sync.WaitGroup
		for i, h := range hs {
			wg.Go(func() {
				if err := batch(ctx, h.NS, []string{"addr add " + h.IP + "/24 dev eth0", "link set eth0 up", "link set lo up"}); err != nil {
					errs[i] = fmt.Errorf("netns: host %s: %w", h.Name, err)
					return
				}
				if err := restore(ctx, h, netrules.Setup()); err != nil { // the fault chains and their jumps
					errs[i] = err
				}
			})
		}
		wg.Wait()
		err = errors.Join(errs...)
	} else {
		err = fmt.Errorf("netns: hosts %s: %w", strings.Join(names, ", "), err)
	}
	if err != nil {
		l.remove(context.Background(), hs)
		return nil, err
	}
	out := make([]Host, len(hs))
	for i, h := range hs {
		l.hosts[h.Name] = h
		l.order = append(l.order, h.Name)
		out[i] = *h
		l.lg.Debug("network host added", "host", h.Name, "ns", h.NS, "ip", h.IP)
	}
	l.next = next
	return out, nil
}

// hostName is what a host's name may be: it ends the names of its
// namespace and its veth.
var hostName = regexp.MustCompile(`^[a-z0-9]+$`)

// batch runs lines through one `ip -batch -`, inside the namespace ns
// (`ip -n ns`) unless ns is "".
func batch(ctx context.Context, ns string, lines []string) error {
	argv := []string{"ip"}
	if ns != "" {
		argv = append(argv, "-n", ns)
	}
	argv = append(argv, "-batch", "-")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// remove kills the processes in hosts' namespaces and deletes the
// namespaces, with their veths, in one `ip -batch`; a veth still there
// after it (normally none: it goes with its peer's namespace) is deleted
// on its own. It returns what failed.
func (l *Network) remove(ctx context.Context, hs []*Host) error {
	if len(hs) == 0 {
		return nil
	}
	nss := make([]string, len(hs))
	for i, h := range hs {
		nss[i] = h.NS
	}
	killNamespaces(nss)
	var lines []string
	for _, h := range hs {
		if _, err := os.Stat(netnsDir + "/" + h.NS); err == nil {
			lines = append(lines, "netns del "+h.NS)
		}
	}
	var errs []error
	if len(lines) > 0 {
		if err := batch(ctx, "", lines); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range hs {
		if _, err := os.Stat("/sys/class/net/" + h.Veth); err == nil {
			if err := run(ctx, "ip", "link", "del", h.Veth); err != nil && linkExists(ctx, h.Veth) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Host returns the host called name.
func (l *Network) Host(name string) (Host, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.hosts[name]
	if !ok {
		return Host{}, false
	}
	return *h, true
}

// Hosts returns the hosts in the order they were added.
func (l *Network) Hosts() []Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Host, 0, len(l.order))
	for _, n := range l.order {
		out = append(out, *l.hosts[n])
	}
	return out
}

// Cut drops every packet between each host of a and each host of b, in
// both directions, until Heal. Hosts in neither set are not affected.
func (l *Network) Cut(ctx context.Context, a, b []string) error {
	return l.Partition(ctx, [][]string{a, b})
}

// CutOneWay drops every packet from each host of from to each host of
// to, until Heal; packets the other way pass. The rules are
// clusters/netrules' plan, each host's in one iptables-restore.
func (l *Network) CutOneWay(ctx context.Context, from, to []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	plan, err := netrules.OneWay(l.places(), from, to)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return l.applyRules(ctx, plan)
}

// Partition cuts every pair of hosts that are in different groups. Hosts in
// no group are not affected. The rules are clusters/netrules' plan; each
// host gets its rules in one iptables-restore, all or none, so a partition
// goes in at once.
func (l *Network) Partition(ctx context.Context, groups [][]string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	plan, err := netrules.Partition(l.places(), groups)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return l.applyRules(ctx, plan)
}

// Loss drops the fraction p (0 < p ≤ 1) of the packets arriving at each of
// hosts from the lab's network, until Heal.
func (l *Network) Loss(ctx context.Context, hosts []string, p float64) error {
	if !(p > 0 && p <= 1) {
		return fmt.Errorf("netns: loss probability %v not in (0, 1]", p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	plan, err := netrules.Loss(l.places(), hosts, p, netrules.LossShape{Iface: "eth0"})
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return l.applyRules(ctx, plan)
}

// places returns the lab's hosts as the planner takes them: each host is
// a place of its own, its namespace. l.mu must be held.
func (l *Network) places() []netrules.Host {
	out := make([]netrules.Host, 0, len(l.order))
	for _, n := range l.order {
		out = append(out, netrules.Host{Name: n, Addr: l.hosts[n].IP, On: n})
	}
	return out
}

// Heal removes every fault rule of every host, a host in one
// iptables-restore.
func (l *Network) Heal(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := map[*Host][]string{}
	for _, name := range l.order {
		if l.faulty[name] {
			lines[l.hosts[name]] = netrules.Flush()
		}
	}
	errs := restoreAll(ctx, lines)
	for h := range lines {
		if errs[h] == nil {
			delete(l.faulty, h.Name) // else the next heal tries again
		}
	}
	return errors.Join(slices.Collect(maps.Values(errs))...)
}

// restoreAll runs the iptables-restore of each host of lines, all at
// once (each host has a namespace of its own), and returns their errors.
func restoreAll(ctx context.Context, lines map[*Host][]string) map[*Host]error {
	var mu sync.Mutex
	errs := map[*Host]error{}
	var wg sync.WaitGroup
	for h, ls := range lines {
		wg.Go(func() {
			err := restore(ctx, h, ls)
			mu.Lock()
			errs[h] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// applyRules appends each host's planned rules to its chains, in one
// iptables-restore per host, all hosts at once. Each host is marked faulty
// first, so that Heal clears what a failure left behind. l.mu must be
// held.
func (l *Network) applyRules(ctx context.Context, plan netrules.Plan) error {
	lines := map[*Host][]string{}
	for _, r := range plan {
		l.faulty[r.On] = true
		lines[l.hosts[r.On]] = netrules.Append(r.Rules)
	}
	errs := restoreAll(ctx, lines)
	for _, name := range l.order { // the first error in the lab's order
		if err := errs[l.hosts[name]]; err != nil {
			return err
		}
	}
	return nil
}

// restore applies lines to the filter table of h's namespace in one
// iptables-restore that keeps what is there: all or none.
func restore(ctx context.Context, h *Host, lines []string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.NS, "iptables-restore", "-w", "--noflush")
	cmd.Stdin = strings.NewReader(netrules.Restore(lines))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("netns: host %s: iptables-restore: %v: %s", h.Name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Rules returns the fault rules now in place in host's chains, as
// `iptables -S` prints them; for tests and the driver's log.
func (l *Network) Rules(ctx context.Context, host string) ([]string, error) {
	h, ok := l.Host(host)
	if !ok {
		return nil, fmt.Errorf("netns: no host %s", host)
	}
	var out []string
	for _, c := range []string{netrules.ChainIn, netrules.ChainOut} {
		b, err := output(ctx, "ip", "netns", "exec", h.NS, "iptables", "-w", "-S", c)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(line, "-A ") {
				out = append(out, line)
			}
		}
	}
	return out, nil
}

// Close kills what still runs in the lab's namespaces, deletes them (with
// their veths and rules), the bridge and the FORWARD rule. It is idempotent.
func (l *Network) Close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	var errs []error
	hs := make([]*Host, 0, len(l.order))
	for _, name := range l.order {
		hs = append(hs, l.hosts[name])
	}
	if err := l.remove(ctx, hs); err != nil {
		errs = append(errs, err)
	}
	l.hosts, l.order = map[string]*Host{}, nil
	if l.fwd != nil {
		if err := run(ctx, append([]string{"iptables", "-w", "-D", "FORWARD"}, l.fwd...)...); err != nil && !strings.Contains(err.Error(), "does a matching rule exist") && !strings.Contains(err.Error(), "Bad rule") {
			errs = append(errs, err)
		}
		l.fwd = nil
	}
	if linkExists(ctx, l.bridge) {
		if err := run(ctx, "ip", "link", "del", l.bridge); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(ownerDir + "/" + l.id)
	}
	l.lg.Info("network lab removed", "lab", l.id)
	return errors.Join(errs...)
}

func (l *Network) lookup(names []string) ([]*Host, error) {
	out := make([]*Host, 0, len(names))
	for _, n := range names {
		h, ok := l.hosts[n]
		if !ok {
			return nil, fmt.Errorf("netns: no host %s", n)
		}
		out = append(out, h)
	}
	return out, nil
}

// Leftovers lists objects named by labs: namespaces, links and FORWARD
// rules.
type Leftovers struct {
	Namespaces []string
	Links      []string
	Rules      []string // FORWARD rules, as `iptables -S` prints them
}

// Empty reports whether nothing was found.
func (f Leftovers) Empty() bool {
	return len(f.Namespaces) == 0 && len(f.Links) == 0 && len(f.Rules) == 0
}

// Of returns the objects of the lab with the given id.
func (f Leftovers) Of(id string) Leftovers {
	var o Leftovers
	for _, n := range f.Namespaces {
		if labID(nsPattern, n) == id {
			o.Namespaces = append(o.Namespaces, n)
		}
	}
	for _, n := range f.Links {
		if labID(linkPattern, n) == id {
			o.Links = append(o.Links, n)
		}
	}
	for _, r := range f.Rules {
		if strings.Contains(r, commentPrefix+id) {
			o.Rules = append(o.Rules, r)
		}
	}
	return o
}

// Orphans keeps the objects of labs whose owner process is gone (or
// unknown): what crashed runs left.
func (f Leftovers) Orphans() Leftovers {
	var o Leftovers
	for _, id := range f.IDs() {
		if !ownerAlive(id) {
			x := f.Of(id)
			o.Namespaces = append(o.Namespaces, x.Namespaces...)
			o.Links = append(o.Links, x.Links...)
			o.Rules = append(o.Rules, x.Rules...)
		}
	}
	return o
}

// IDs returns the lab ids the objects belong to, sorted.
func (f Leftovers) IDs() []string {
	seen := map[string]bool{}
	for _, n := range f.Namespaces {
		seen[labID(nsPattern, n)] = true
	}
	for _, n := range f.Links {
		seen[labID(linkPattern, n)] = true
	}
	for _, r := range f.Rules {
		if m := rulePattern.FindStringSubmatch(r); m != nil {
			seen[m[1]] = true
		}
	}
	var ids []string
	for id := range seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

var rulePattern = regexp.MustCompile(`--comment "?locktest-([0-9a-f]{4})`)

func labID(p *regexp.Regexp, name string) string {
	if m := p.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

// freeID picks a lab id that no owner file, link or namespace uses, and
// claims it with an owner file naming this process. The id is short
// (interface names have 15 characters). The caller holds lockFile.
func freeID(ctx context.Context) (string, error) {
	for try := 0; try < 20; try++ {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id := hex.EncodeToString(b[:])
		if _, err := os.Stat(ownerDir + "/" + id); !os.IsNotExist(err) || linkExists(ctx, "lt"+id) {
			continue
		}
		if f, err := Find(ctx); err == nil && !f.Of(id).Empty() {
			continue
		}
		return id, writeOwner(id, os.Getpid())
	}
	return "", errors.New("netns: no free lab id (run `locktest cleanup`)")
}

// writeOwner records that pid owns lab id.
func writeOwner(id string, pid int) error {
	if err := os.MkdirAll(ownerDir, 0o755); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return os.WriteFile(ownerDir+"/"+id, []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// ownerAlive reports whether the process recorded as lab id's owner still
// runs. A lab without an owner file is an orphan.
func ownerAlive(id string) bool {
	b, err := os.ReadFile(ownerDir + "/" + id)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// Find lists every object named by a lab on this host, live labs' too,
// without changing anything; see Orphans.
func Find(ctx context.Context) (Leftovers, error) {
	var f Leftovers
	b, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return f, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if name := strings.Fields(line + " x")[0]; nsPattern.MatchString(name) {
			f.Namespaces = append(f.Namespaces, name)
		}
	}
	b, err = output(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return f, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(fs[1], ":"), "@")
		if linkPattern.MatchString(name) {
			f.Links = append(f.Links, name)
		}
	}
	if _, err := exec.LookPath("iptables"); err == nil {
		b, err = output(ctx, "iptables", "-w", "-S", "FORWARD")
		if err != nil {
			return f, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "-A FORWARD") && strings.Contains(line, "--comment "+commentPrefix) {
				f.Rules = append(f.Rules, line)
			}
		}
	}
	return f, nil
}

// Cleanup removes what crashed runs' labs left on this host — namespaces
// (after killing the processes still in them), links and FORWARD rules
// named by a lab whose owner process is gone — and returns what it removed.
// It touches nothing a lab did not name, and no lab of a live run.
func Cleanup(ctx context.Context) (Leftovers, error) {
	// Under the labs' lock: no lab is being made or probed meanwhile, and
	// two cleanups do not race for the same objects.
	unlock, err := lockFile()
	if err != nil {
		return Leftovers{}, err
	}
	defer unlock()
	all, err := Find(ctx)
	if err != nil {
		return all, err
	}
	f := all.Orphans()
	var errs []error
	for _, ns := range f.Namespaces {
		killNamespaces([]string{ns})
		if err := run(ctx, "ip", "netns", "del", ns); err != nil && nsExists(ctx, ns) {
			errs = append(errs, err)
		}
	}
	for _, link := range f.Links {
		// A veth goes with its peer's namespace, which the kernel tears
		// down after `ip netns del` returns: a link may vanish between
		// any check and the del. Only one that is still there failed.
		if err := run(ctx, "ip", "link", "del", link); err != nil && linkExists(ctx, link) {
			errs = append(errs, err)
		}
	}
	for _, r := range f.Rules {
		spec := strings.Fields(strings.TrimPrefix(r, "-A FORWARD "))
		for i := range spec {
			spec[i] = strings.Trim(spec[i], `"`)
		}
		if err := run(ctx, append([]string{"iptables", "-w", "-D", "FORWARD"}, spec...)...); err != nil &&
			run(ctx, append([]string{"iptables", "-w", "-C", "FORWARD"}, spec...)...) == nil {
			errs = append(errs, err) // still there
		}
	}
	if len(errs) == 0 {
		for _, id := range f.IDs() {
			_ = os.Remove(ownerDir + "/" + id)
		}
	}
	// Owner files of dead drivers whose labs have no object left (a
	// cleanup that failed half-way) go too.
	if entries, err := os.ReadDir(ownerDir); err == nil {
		if now, err := Find(ctx); err == nil {
			for _, e := range entries {
				if id := e.Name(); !ownerAlive(id) && now.Of(id).Empty() {
					_ = os.Remove(ownerDir + "/" + id)
				}
			}
		}
	}
	return f, errors.Join(errs...)
}

// netnsDir is where `ip netns add` mounts the namespaces it names.
const netnsDir = "/run/netns"

// killNamespaces SIGKILLs every process in the namespaces nss, found as
// `ip netns pids` finds them (a process's /proc/PID/ns/net is the same
// file as the namespace's in netnsDir), in one walk of /proc. They are the
// run's own: only the run starts processes in its namespaces.
func killNamespaces(nss []string) {
	type id struct{ dev, ino uint64 }
	want := map[id]bool{}
	for _, ns := range nss {
		var st syscall.Stat_t
		if syscall.Stat(netnsDir+"/"+ns, &st) == nil {
			want[id{st.Dev, st.Ino}] = true
		}
	}
	if len(want) == 0 {
		return
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name()+"/ns/net", &st) == nil && want[id{st.Dev, st.Ino}] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func nsExists(ctx context.Context, name string) bool {
	b, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return true // unknown: report the delete's error
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

func linkExists(ctx context.Context, name string) bool {
	return run(ctx, "ip", "link", "show", name) == nil
}

// freeSubnet returns the first 10.77.N.0/24 no interface uses.
func freeSubnet(ctx context.Context) (netip.Prefix, error) {
	used, err := subnetsInUse(ctx)
	if err != nil {
		return netip.Prefix{}, err
	}
	for n := 0; n < 256; n++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, byte(n), 0}), 24)
		if !used[p] {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("netns: every 10.77.N.0/24 is in use; give a subnet")
}

// subnetsInUse returns the /24s of this host's IPv4 addresses.
func subnetsInUse(ctx context.Context) (map[netip.Prefix]bool, error) {
	b, err := output(ctx, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		return nil, err
	}
	used := map[netip.Prefix]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		i := slices.Index(fs, "inet")
		if i < 0 || i+1 >= len(fs) {
			continue
		}
		if p, err := netip.ParsePrefix(fs[i+1]); err == nil {
			used[netip.PrefixFrom(p.Addr(), 24).Masked()] = true
		}
	}
	return used, nil
}

// lockFile takes the host-wide lock that serialises subnet picking.
func lockFile() (func(), error) {
	_ = os.MkdirAll("/run/lock", 0o755)
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("netns: lock %s: %w", lockPath, err)
	}
	return func() { f.Close() }, nil
}

func run(ctx context.Context, argv ...string) error {
	_, err := output(ctx, argv...)
	return err
}

func output(ctx context.Context, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		msg = strings.ReplaceAll(msg, "# Warning: iptables-legacy tables present, use iptables-legacy to see them", "")
		return out, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(msg))
	}
	return out, nil
}
