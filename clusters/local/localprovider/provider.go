// Package localprovider is the local provider: a run's nodes are
// processes on this host (clusters/local), in network namespaces of the
// run's (clusters/local/netns) when its faults need them. It registers
// itself; clusters/all imports it.
package localprovider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/nemesis"
)

// Name is the local provider's name as --provider takes it: nodes run as
// processes on this host (the default).
const Name = "local"

func init() {
	provider.Register(provider.Def{
		Name:       Name,
		Rank:       0,
		Doc:        "processes on this host",
		Namespaces: true,
		// A cluster on loopback is processes of this host with their
		// logs here, which outlive the run's provider.
		KeepsClusters: true,
		Setup: func(ctx context.Context, r provider.Run, lg *slog.Logger) (provider.Provider, error) {
			return setup(ctx, r, lg)
		},
		Cleanup: &provider.Cleanup{Clear: clearLeft},
	})
}

// run is what a local run set up: its nodes are processes on this
// machine, each in a network namespace of its own (a host of the run's
// Network) when the run has network faults, on loopback otherwise.
type run struct {
	provider.OnThisMachine
	lab       *netns.Network
	nodeHosts []local.Host
	clientNS  map[int]string
	// netWhy is why network faults are unavailable, or ""; netemWhy why
	// the delay fault cannot use tc netem, or "".
	netWhy, netemWhy string
}

// setup creates the network lab when the run needs one (--net netns, or
// a network fault under --net auto): a host per node and auxiliary
// process, and one per client; the workers then reach the store on the
// lab's bridge (StoreAddr). A machine that cannot make namespaces is a
// reason, not an error, unless --net netns asked for them.
func setup(ctx context.Context, r provider.Run, lg *slog.Logger) (*run, error) {
	l := &run{clientNS: map[int]string{}, netemWhy: "the run has no network namespaces"}
	useNet := r.Net == provider.NetNamespaces || (r.Net == provider.NetAuto && r.NeedsNetwork)
	switch {
	case r.Net == provider.NetLoopback:
		l.netWhy = "the run was asked to use loopback (--net loopback)"
		return l, nil
	case !useNet:
		l.netWhy = "the run has no network namespaces (no network fault was asked for)"
		return l, nil
	}
	if err := netns.Check(); err != nil {
		l.netWhy = err.Error()
		if r.Net == provider.NetNamespaces {
			return l, fmt.Errorf("--net netns: %v", err)
		}
		lg.Warn("network faults unavailable", "reason", err)
		return l, nil
	}
	lab, err := netns.New(ctx, netns.Options{Subnet: r.Subnet, Logger: lg})
	if err != nil {
		return l, fmt.Errorf("network: %v", err)
	}
	l.lab = lab
	// Nodes get hosts h1..hK in order; backends with more processes than
	// data nodes (sentinels, cluster replicas) use the extra.
	// Clients get c0..cN-1. All are made at once (netns.AddAll).
	nodes := hostsFor(r.Nodes)
	var names []string
	for i := range nodes {
		names = append(names, fmt.Sprintf("h%d", i+1))
	}
	for c := range r.Clients {
		names = append(names, fmt.Sprintf("c%d", c))
	}
	hs, err := lab.AddAll(ctx, names...)
	if err != nil {
		return l, fmt.Errorf("network: %v", err)
	}
	for i, h := range hs {
		if i < nodes {
			l.nodeHosts = append(l.nodeHosts, local.Host{IP: h.IP, NetNS: h.NS})
		} else {
			l.clientNS[i-nodes] = h.NS
		}
	}
	l.netemWhy = ""
	if r.NeedsDelay {
		if err := netns.NetemAvailable(ctx); err != nil {
			l.netemWhy = err.Error()
		}
	}
	return l, nil
}

// hostsFor is how many node hosts a run of nodes nodes needs: its nodes,
// and room for the auxiliary processes of the backends that have them.
func hostsFor(nodes int) int {
	return 2*max(nodes, 1) + 3
}

func (l *run) Abilities() map[string]string {
	return map[string]string{provider.Network: l.netWhy, provider.Netem: l.netemWhy, provider.SyncRecords: ""}
}

// Cluster returns the run's cluster of processes on this machine, in the
// lab's hosts when there is a lab.
func (l *run) Cluster(r provider.Run, n provider.Nodes) (clusters.Cluster, error) {
	return local.New(r.Backend, local.Options{Nodes: r.Nodes, Dir: n.Dir, Logger: n.Logger,
		Persistence: r.Persistence, Params: r.Params, Exe: r.NodeCommand, ExeEnv: r.NodeEnv,
		Hosts: l.nodeHosts, NodeEnv: n.ShimEnv, TrackSyncs: n.SyncRecords})
}

// NodeHosts are the network namespaces the run's nodes run in, in order,
// or nil without a lab.
func (l *run) NodeHosts() []local.Host { return l.nodeHosts }

// StoreAddr is the lab's gateway, which the client namespaces reach, or
// "" (the run's socket) without a lab.
func (l *run) StoreAddr() string {
	if l.lab == nil {
		return ""
	}
	return net.JoinHostPort(l.lab.Gateway(), "0")
}

// Cgroup returns nil: a local worker's client host is its namespace.
func (l *run) Cgroup() func(int) string { return nil }

// NetNS returns the namespace of the client host of process c, or nil
// without a lab.
func (l *run) NetNS() func(int) string {
	if l.lab == nil {
		return nil
	}
	return func(c int) string { return l.clientNS[c] }
}

// Network returns the nemesis's view of the lab, which names node hosts
// by node name: it maps each node to the lab host that holds its
// address; nil without a lab.
func (l *run) Network(cl clusters.Cluster) nemesis.Network {
	if l.lab == nil {
		return nil
	}
	byIP := map[string]string{}
	for _, h := range l.lab.Hosts() {
		byIP[h.IP] = h.Name
	}
	names := map[string]string{}
	for _, n := range cl.Nodes() {
		host, _, err := net.SplitHostPort(n.Addr)
		if err == nil && byIP[host] != "" {
			names[n.Name] = byIP[host]
		}
	}
	return &netView{lab: l.lab, names: names}
}

// Netem delays nodes with tc netem inside their namespaces.
func (l *run) Netem(network nemesis.Network) nemesis.Delayer {
	if v, ok := network.(*netView); ok {
		return &netemView{v}
	}
	return nil
}

// ProxyIP is the lab's gateway, which the client namespaces reach, or
// loopback.
func (l *run) ProxyIP() string {
	if l.lab != nil {
		return l.lab.Gateway()
	}
	return "127.0.0.1"
}

func (l *run) Describe() (network, lab, image string) {
	if l.lab != nil {
		return "netns " + l.lab.Subnet(), l.lab.ID(), ""
	}
	return "loopback", "", ""
}

// RecordLab records the run's lab as it is now, once made and before any
// fault, as the state LabAsMade proves it is back in (netns.Record). A
// series of runs that keeps the lab with its cluster (run.Clusters) calls
// it; a run without a lab has nothing to record, which is an error.
func (l *run) RecordLab(ctx context.Context) error {
	if l.lab == nil {
		return errors.New("the run has no network lab")
	}
	return l.lab.Record(ctx)
}

// LabAsMade proves, from what the kernel shows, that the run's lab is as
// RecordLab found it: the bridge, the FORWARD rule and every host's veth
// and address there, every namespace's iptables rules those it was made
// with (no rule a fault left), and no process in a client host's
// namespace (netns.AsMade).
func (l *run) LabAsMade(ctx context.Context) error {
	if l.lab == nil {
		return errors.New("the run has no network lab")
	}
	var clients []string
	for c := range l.clientNS {
		clients = append(clients, fmt.Sprintf("c%d", c))
	}
	return l.lab.AsMade(ctx, clients)
}

// CloseLab removes the run's lab, as Close does, and returns what it
// could not remove.
func (l *run) CloseLab(ctx context.Context) error {
	if l.lab == nil {
		return nil
	}
	return l.lab.Close(ctx)
}

func (l *run) Close(ctx context.Context, lg *slog.Logger) {
	if l.lab != nil {
		if err := l.lab.Close(ctx); err != nil {
			lg.Error("network lab", "err", err)
		}
	}
}

// netView translates node names into lab host names.
type netView struct {
	lab   *netns.Network
	names map[string]string
}

func (v *netView) tr(hosts []string) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		if n, ok := v.names[h]; ok {
			out[i] = n
		} else {
			out[i] = h
		}
	}
	return out
}

func (v *netView) Cut(ctx context.Context, a, b []string) error {
	return v.lab.Cut(ctx, v.tr(a), v.tr(b))
}

func (v *netView) CutOneWay(ctx context.Context, from, to []string) error {
	return v.lab.CutOneWay(ctx, v.tr(from), v.tr(to))
}

func (v *netView) Loss(ctx context.Context, hosts []string, p float64) error {
	return v.lab.Loss(ctx, v.tr(hosts), p)
}

func (v *netView) Heal(ctx context.Context) error { return v.lab.Heal(ctx) }

// netemView delays nodes with tc netem inside their namespaces.
type netemView struct{ v *netView }

func (n *netemView) Delay(ctx context.Context, nodes []string, d time.Duration) error {
	return n.v.lab.Delay(ctx, n.v.tr(nodes), d)
}

func (n *netemView) Mechanism() string { return "netem" }

// clearLeft removes what killed local runs left: the network labs of dead
// drivers, and the MariaDB sockets no server answers on.
func clearLeft(ctx context.Context, w io.Writer, _ provider.Values, dry bool) error {
	if err := clearLabs(ctx, w, dry); err != nil {
		return err
	}
	return clearSockets(w, os.TempDir(), dry)
}

// clearLabs removes the network labs of dead drivers.
func clearLabs(ctx context.Context, w io.Writer, dry bool) error {
	if err := netns.Check(); err != nil {
		fmt.Fprintf(w, "nothing to do: %v\n", err)
		return nil
	}
	all, err := netns.Find(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	left := all.Orphans()
	if dry {
		printLeft(w, "would remove", left)
		return nil
	}
	removed, err := netns.Cleanup(ctx)
	printLeft(w, "removed", removed)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

func printLeft(w io.Writer, verb string, l netns.Leftovers) {
	if l.Empty() {
		fmt.Fprintln(w, "nothing left behind by earlier runs")
		return
	}
	for _, x := range []struct {
		what  string
		names []string
	}{{"namespaces", l.Namespaces}, {"links", l.Links}, {"iptables rules", l.Rules}} {
		if len(x.names) > 0 {
			fmt.Fprintf(w, "%s %d %s: %s\n", verb, len(x.names), x.what, strings.Join(x.names, ", "))
		}
	}
}

// socketPattern names the Unix sockets of MariaDB nodes whose directory is
// too long for a socket address (they are put in the temporary folder).
const socketPattern = "locktest-mariadb-*.sock"

// clearSockets removes the sockets matching socketPattern in dir that no
// server answers on: those of nodes that a killed driver took down with it.
// A socket a live server listens on, in whatever network namespace, accepts
// the connection and is kept.
func clearSockets(w io.Writer, dir string, dry bool) error {
	paths, err := filepath.Glob(filepath.Join(dir, socketPattern))
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	var stale []string
	for _, p := range paths {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != os.ModeSocket {
			continue // not a socket: not ours
		}
		c, err := net.DialTimeout("unix", p, time.Second)
		if err == nil {
			c.Close()
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			continue // not ours to judge (a permission error, say)
		}
		if !dry {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cleanup: %w", err)
			}
		}
		stale = append(stale, p)
	}
	if len(stale) > 0 {
		verb := "removed"
		if dry {
			verb = "would remove"
		}
		fmt.Fprintf(w, "%s %d stale sockets: %s\n", verb, len(stale), strings.Join(stale, ", "))
	}
	return nil
}
