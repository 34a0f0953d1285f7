package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/moby/client"

	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/netrules"
)

// subnetBase is the first two octets of the /24s a lab picks from; the
// local provider's namespaces use 10.77.
var subnetBase = [2]byte{10, 78}

// Network is one run's Docker network and the node containers on it, with the
// run's labels. Its network faults are iptables rules inside each node
// container's network namespace, entered by the container's host pid
// (nsenter): they need root and the Docker daemon on this host. Its methods
// are safe for concurrent use.
type Network struct {
	e      *engine.Engine
	id     string
	labels map[string]string
	netID  string
	name   string
	subnet netip.Prefix
	gw     netip.Addr
	lg     *slog.Logger

	mu     sync.Mutex
	next   netip.Addr
	nodes  map[string]*node // by node name, registered by clusters
	faulty map[string]bool
	chains map[string]int // node → the pid whose namespace has the lab's chains
	// clients are the client hosts' own addresses on this host, c0's
	// first (SetClients); empty while every client is the gateway.
	clients []netip.Addr
	closed  bool
}

// NewLab creates a run's network, locktest-<id>, on a free /24 of
// 10.78.0.0/16, labelled with the run's id and this process as its owner.
// Close removes it with every container that carries the run's label.
func NewLab(ctx context.Context, e *engine.Engine) (*Network, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(b)
	l := &Network{e: e, id: id, labels: engine.OwnerLabels(id), name: "locktest-" + id, lg: e.Logger(),
		nodes: map[string]*node{}, faulty: map[string]bool{}, chains: map[string]int{}}
	netID, p, err := e.CreateNetwork(ctx, l.name, subnetBase, l.labels)
	if err != nil {
		return nil, err
	}
	gw := p.Addr().Next()
	l.netID, l.subnet, l.gw, l.next = netID, p, gw, gw.Next()
	l.lg.Info("docker network created", "lab", id, "network", l.name, "subnet", p)
	return l, nil
}

// ID returns the run's id, the value of its engine.LabelRun label.
func (l *Network) ID() string { return l.id }

// Name returns the Docker network's name.
func (l *Network) Name() string { return l.name }

// Subnet returns the network's /24.
func (l *Network) Subnet() string { return l.subnet.String() }

// Gateway returns the host's address on the network: the address the
// containers see the clients (which run on the host) come from.
func (l *Network) Gateway() string { return l.gw.String() }

// Labels returns a copy of the run's labels.
func (l *Network) Labels() map[string]string {
	out := make(map[string]string, len(l.labels))
	for k, v := range l.labels {
		out[k] = v
	}
	return out
}

// allocIP returns the next free address of the network.
func (l *Network) allocIP() (netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.subnet.Contains(l.next) || l.next.As4()[3] >= clientBlockStart {
		return netip.Addr{}, errors.New("docker: the run's network has no address left")
	}
	a := l.next
	l.next = l.next.Next()
	return a, nil
}

// clientBlockStart is the last octet where the network's block for the
// clients' own addresses (ClientBlock) begins; nodes get addresses below
// it.
const clientBlockStart = 192

// ClientBlock returns the addresses of the network that the clients may
// have for their own (clusters/clientaddr): its .192/27, which no node
// container is given.
func (l *Network) ClientBlock() []netip.Addr {
	a := l.subnet.Addr().As4()
	a[3] = clientBlockStart
	var out []netip.Addr
	for p, x := netip.PrefixFrom(netip.AddrFrom4(a), 27), netip.AddrFrom4(a); p.Contains(x); x = x.Next() {
		out = append(out, x)
	}
	return out
}

// SetClients gives the client hosts their own addresses, c0's first:
// from then on a cut of client host cK drops cK's address, not the
// gateway's, and the clients can be told apart.
func (l *Network) SetClients(addrs []netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clients = slices.Clone(addrs)
}

// clientIP returns the address client host name has on the network: its
// own when SetClients gave it one, else the gateway's. l.mu must be held.
func (l *Network) clientIP(name string) string {
	if k, err := strconv.Atoi(strings.TrimPrefix(name, "c")); err == nil && strings.HasPrefix(name, "c") && k >= 0 && k < len(l.clients) {
		return l.clients[k].String()
	}
	return l.gw.String()
}

// register makes n a host of the lab's network faults.
func (l *Network) register(n *node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes[n.name] = n
}

// SharedClientAddress says why no cut can tell clients apart here, or ""
// when the clients have addresses of their own (SetClients): every
// client of a docker run runs on the host, behind its one address on the
// run's network unless given its own. It makes the lab a
// clusters.SharedClientAddress.
func (l *Network) SharedClientAddress() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.clients) > 0 {
		return ""
	}
	return "under the docker provider every client runs on the host, behind one address, so a cut cannot single out one client or put clients on different sides"
}

// NetworkFaultsReason says why network faults cannot be applied here, or
// "" if they can: they enter the containers' network namespaces by host
// pid, which needs root, nsenter, iptables and iptables-restore, and a
// daemon on this host.
func NetworkFaultsReason(e *engine.Engine) string {
	if os.Geteuid() != 0 {
		return "network faults under docker need root (nsenter into the containers' network namespaces)"
	}
	for _, bin := range []string{"nsenter", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "network faults under docker need " + bin + ": run `make setup`"
		}
	}
	if h := e.Host(); !strings.HasPrefix(h, "unix://") {
		return "network faults under docker need the daemon on this host (it is at " + h + "): they enter containers by their host pid"
	}
	return ""
}

// Cut drops every packet between each host of a and each host of b, in
// both directions, until Heal. Hosts are node names and client hosts; every
// client runs on the host, so a client host stands for its own address
// (SetClients) or, without one, for the host (the network's gateway
// address). Rules go into the node containers only: a
// pair of a node and the host is cut inside the node, a pair of two nodes
// inside both. The rules are clusters/netrules' plan; each node's go in
// at once, each rule once, in one iptables-restore inside its network
// namespace.
func (l *Network) Cut(ctx context.Context, a, b []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	plan, err := netrules.Partition(l.withClients(a, b), [][]string{a, b})
	return l.applyPlan(ctx, plan, err)
}

// CutOneWay drops every packet from each host of from to each host of
// to, until Heal; packets the other way pass. Hosts and rules are as in
// Cut: a node's rules go into its container, a client host stands for
// its own address or the gateway's.
func (l *Network) CutOneWay(ctx context.Context, from, to []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	plan, err := netrules.OneWay(l.withClients(from, to), from, to)
	return l.applyPlan(ctx, plan, err)
}

// withClients returns the nodes as the planner takes them (places), and
// each client host named in sides, without a place, at the address its
// connections leave from. l.mu must be held.
func (l *Network) withClients(sides ...[]string) []netrules.Host {
	hosts := l.places()
	for _, side := range sides {
		for _, name := range side {
			if _, ok := l.nodes[name]; !ok && !slices.ContainsFunc(hosts, func(h netrules.Host) bool { return h.Name == name }) {
				hosts = append(hosts, netrules.Host{Name: name, Addr: l.clientIP(name)}) // on the host: no place
			}
		}
	}
	return hosts
}

// applyPlan appends each node's planned rules to its chains (apply), a
// node after another, each marked faulty first, so that Heal clears what
// a failure left behind; or returns the planner's err. l.mu must be held.
func (l *Network) applyPlan(ctx context.Context, plan netrules.Plan, err error) error {
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	for _, r := range plan {
		l.faulty[r.On] = true
		if err := l.apply(ctx, l.nodes[r.On], netrules.Append(r.Rules)); err != nil {
			return err
		}
	}
	return nil
}

// places returns the nodes as the planner takes them, by name: each node
// is a place of its own, its container's network namespace. l.mu must be
// held.
func (l *Network) places() []netrules.Host {
	out := make([]netrules.Host, 0, len(l.nodes))
	for _, name := range slices.Sorted(maps.Keys(l.nodes)) {
		out = append(out, netrules.Host{Name: name, Addr: l.nodes[name].ip.String(), On: name})
	}
	return out
}

// Loss drops the fraction p (0 < p ≤ 1) of the packets arriving at each of
// the named nodes, until Heal.
func (l *Network) Loss(ctx context.Context, hosts []string, p float64) error {
	if !(p > 0 && p <= 1) {
		return fmt.Errorf("docker: loss probability %v not in (0, 1]", p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range hosts {
		if _, ok := l.nodes[h]; !ok {
			return fmt.Errorf("docker: loss: no node %s", h)
		}
	}
	plan, err := netrules.Loss(l.places(), hosts, p, netrules.LossShape{Iface: "eth0"})
	return l.applyPlan(ctx, plan, err)
}

// Heal removes every fault rule of every node. A node whose container is
// not running has no rules left: its network namespace went with its
// process.
func (l *Network) Heal(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for name := range l.faulty {
		n := l.nodes[name]
		pid, err := n.localPid(ctx)
		if err != nil {
			delete(l.faulty, name)
			continue
		}
		// Both chains in one restore; where one is missing (a restarted
		// container), each that is there on its own.
		ok := true
		if err := restore(ctx, pid, netrules.Flush()); err != nil {
			for _, c := range []string{netrules.ChainIn, netrules.ChainOut} {
				if err := nsIptables(ctx, pid, "-F", c); err != nil && !strings.Contains(err.Error(), "No chain") {
					errs = append(errs, err)
					ok = false
				}
			}
		}
		if ok {
			delete(l.faulty, name)
		}
	}
	return errors.Join(errs...)
}

// Rules returns the fault rules now in place in a node's chains, as
// `iptables -S` prints them; for tests and the driver's log.
func (l *Network) Rules(ctx context.Context, node string) ([]string, error) {
	l.mu.Lock()
	n, ok := l.nodes[node]
	l.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("docker: no node %s", node)
	}
	pid, err := n.localPid(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range []string{netrules.ChainIn, netrules.ChainOut} {
		b, err := nsOutput(ctx, pid, "iptables", "-w", "-S", c)
		if err != nil {
			if strings.Contains(err.Error(), "No chain") {
				continue
			}
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

// apply appends rules, iptables-restore lines "-A <chain> <spec>", to n's
// chains inside its network namespace, in one iptables-restore that adds
// all or none. The first time it meets a container process (a restarted
// container has a fresh namespace) the same restore creates the lab's
// chains and their jumps; where that fails — the chains were there
// already, and the restore changed nothing — it makes sure of them one by
// one and adds the rules then. l.mu must be held.
func (l *Network) apply(ctx context.Context, n *node, rules []string) error {
	pid, err := n.localPid(ctx)
	if err != nil {
		return fmt.Errorf("docker: node %s: %w", n.name, err)
	}
	if l.chains[n.name] != pid {
		if restore(ctx, pid, append(netrules.Setup(), rules...)) == nil {
			l.chains[n.name] = pid
			return nil
		}
		if err := ensureChains(ctx, pid); err != nil {
			return fmt.Errorf("docker: node %s: %w", n.name, err)
		}
		l.chains[n.name] = pid
	}
	if err := restore(ctx, pid, rules); err != nil {
		delete(l.chains, n.name) // make sure of the chains on the next try
		return fmt.Errorf("docker: node %s: %w", n.name, err)
	}
	return nil
}

// restore applies lines to the filter table inside the network namespace
// of pid in one iptables-restore that keeps what is there: all or none.
func restore(ctx context.Context, pid int, lines []string) error {
	_, err := nsRun(ctx, pid, strings.NewReader(netrules.Restore(lines)), "iptables-restore", "-w", "--noflush")
	return err
}

// ensureChains creates the fault chains and their jumps in the network
// namespace of pid, where missing.
func ensureChains(ctx context.Context, pid int) error {
	for _, c := range []struct{ chain, from string }{{netrules.ChainIn, "INPUT"}, {netrules.ChainOut, "OUTPUT"}} {
		if err := nsIptables(ctx, pid, "-N", c.chain); err != nil && !strings.Contains(err.Error(), "exists") {
			return err
		}
		if nsIptables(ctx, pid, "-C", c.from, "-j", c.chain) != nil {
			if err := nsIptables(ctx, pid, "-A", c.from, "-j", c.chain); err != nil {
				return err
			}
		}
	}
	return nil
}

func nsIptables(ctx context.Context, pid int, args ...string) error {
	_, err := nsOutput(ctx, pid, append([]string{"iptables", "-w"}, args...)...)
	return err
}

// nsOutput runs argv inside the network namespace of pid.
func nsOutput(ctx context.Context, pid int, argv ...string) ([]byte, error) {
	return nsRun(ctx, pid, nil, argv...)
}

// nsRun runs argv inside the network namespace of pid with stdin (nil: no
// input) and returns its output.
func nsRun(ctx context.Context, pid int, stdin io.Reader, argv ...string) ([]byte, error) {
	full := append([]string{"-t", strconv.Itoa(pid), "-n", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(strings.ReplaceAll(stderr.String(), "# Warning: iptables-legacy tables present, use iptables-legacy to see them", ""))
		return out, fmt.Errorf("nsenter %s: %v: %s", strings.Join(full, " "), err, msg)
	}
	return out, nil
}

// Close removes every container that carries the run's label (the nodes,
// killed or not) and the run's network. It uses its own context when ctx
// has ended, so a cancelled run still cleans up; it is idempotent.
func (l *Network) Close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if ctx.Err() != nil {
		ctx = context.Background()
	}
	var errs []error
	if err := removeRun(ctx, l.e, l.id); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err == nil {
		l.closed = true
	}
	l.lg.Info("docker network removed", "lab", l.id, "network", l.name)
	return errors.Join(errs...)
}

// removeRun removes the containers, then the networks, labelled with run.
func removeRun(ctx context.Context, e *engine.Engine, run string) error {
	cli := e.Client()
	f := client.Filters{}.Add("label", engine.LabelRun+"="+run)
	var errs []error
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return fmt.Errorf("docker: list containers of run %s: %s", run, engine.FirstLine(err))
	}
	for _, c := range cs.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !engine.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("docker: remove container %s: %s", engine.ShortID(c.ID), engine.FirstLine(err)))
		}
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("docker: list networks of run %s: %s", run, engine.FirstLine(err)))...)
	}
	for _, n := range ns.Items {
		if err := e.RemoveNetwork(ctx, n.ID); err != nil {
			errs = append(errs, fmt.Errorf("docker: remove network %s: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}
