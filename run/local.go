package run

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
)

// localPlatform is what a local run set up: its nodes are processes on
// this machine, each in a network namespace of its own (a host of the
// network lab) when the run has network faults, on loopback otherwise.
type localPlatform struct {
	onThisMachine
	lab       *netns.Network
	nodeHosts []local.Host
	clientNS  map[int]string
	// netWhy is why network faults are unavailable, or ""; netemWhy why
	// the delay fault cannot use tc netem, or "".
	netWhy, netemWhy string
}

// ProviderLocal runs nodes as processes on this host (the default).
const ProviderLocal = "local"

// localDef is the local provider, the default: its nodes are processes
// on this host, in network namespaces of the run's when its faults need
// them.
var localDef = providerDef{
	name:       ProviderLocal,
	doc:        "processes on this host",
	namespaces: true,
	setup: func(ctx context.Context, cfg Config, impl impls.Impl, p *platform, lg *slog.Logger) (provider, error) {
		return setupLocal(ctx, cfg, impl, p, lg)
	},
}

// setupLocal creates the network lab when the run needs one (--net netns,
// or a network fault under --net auto): a host per node and auxiliary
// process, and one per client; the workers then reach the store on the
// lab's bridge (p.storeAddr). A machine that cannot make namespaces is a
// reason, not an error, unless --net netns asked for them.
func setupLocal(ctx context.Context, cfg Config, impl impls.Impl, p *platform, lg *slog.Logger) (*localPlatform, error) {
	l := &localPlatform{clientNS: map[int]string{}, netemWhy: "the run has no network namespaces"}
	useNet := cfg.Net == NetNamespaces || (cfg.Net == NetAuto && nemesis.Needs(cfg.faultParts(), nemesis.NeedNetwork))
	switch {
	case cfg.Net == NetLoopback:
		l.netWhy = "the run was asked to use loopback (--net loopback)"
		return l, nil
	case !useNet:
		l.netWhy = "the run has no network namespaces (no network fault was asked for)"
		return l, nil
	}
	if err := netns.Check(); err != nil {
		l.netWhy = err.Error()
		if cfg.Net == NetNamespaces {
			return l, setupErr("--net netns: %v", err)
		}
		lg.Warn("network faults unavailable", "reason", err)
		return l, nil
	}
	lab, err := netns.New(ctx, netns.Options{Subnet: cfg.Subnet, Logger: lg})
	if err != nil {
		return l, setupErr("network: %v", err)
	}
	l.lab = lab
	// Nodes get hosts h1..hK in order; backends with more processes than
	// data nodes (sentinels, cluster replicas) use the extra.
	for i := 0; i < hostsFor(impl); i++ {
		h, err := lab.Add(ctx, fmt.Sprintf("h%d", i+1))
		if err != nil {
			return l, setupErr("network: %v", err)
		}
		l.nodeHosts = append(l.nodeHosts, local.Host{IP: h.IP, NetNS: h.NS})
	}
	for c := 0; c < cfg.Clients; c++ {
		h, err := lab.Add(ctx, fmt.Sprintf("c%d", c))
		if err != nil {
			return l, setupErr("network: %v", err)
		}
		l.clientNS[c] = h.NS
	}
	p.storeAddr = net.JoinHostPort(lab.Gateway(), "0")
	l.netemWhy = ""
	if nemesis.Needs(cfg.faultParts(), nemesis.NeedDelay) {
		if err := netns.NetemAvailable(ctx); err != nil {
			l.netemWhy = err.Error()
		}
	}
	return l, nil
}

// hostsFor is how many node hosts a run of impl needs: its nodes, and room
// for the auxiliary processes of the backends that have them.
func hostsFor(impl impls.Impl) int {
	return 2*max(impl.Nodes, 1) + 3
}

func (l *localPlatform) name() string { return ProviderLocal }

func (l *localPlatform) abilities() map[string]string {
	return map[string]string{AbilityNetwork: l.netWhy, AbilityNetem: l.netemWhy, AbilitySyncRecords: ""}
}

// cluster returns the run's cluster of processes on this machine, in the
// lab's hosts when there is a lab.
func (l *localPlatform) cluster(cfg Config, impl impls.Impl, dir string, p *platform, lg *slog.Logger) (clusters.Cluster, error) {
	return local.New(impl.Backend, local.Options{Nodes: impl.Nodes, Dir: dir, Logger: lg,
		Persistence: cfg.Persistence, Params: cfg.ClusterParams, Exe: cfg.NodeCommand, ExeEnv: cfg.NodeEnv,
		Hosts: l.nodeHosts, NodeEnv: p.nodeEnv, TrackSyncs: p.syncs})
}

// cgroup returns nil: a local worker's client host is its namespace.
func (l *localPlatform) cgroup() func(int) string { return nil }

// netNS returns the namespace of the client host of process c, or nil
// without a lab.
func (l *localPlatform) netNS() func(int) string {
	if l.lab == nil {
		return nil
	}
	return func(c int) string { return l.clientNS[c] }
}

// network returns the nemesis's view of the lab, which names node hosts
// by node name: it maps each node to the lab host that holds its
// address; nil without a lab.
func (l *localPlatform) network(cl clusters.Cluster) nemesis.Network {
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

// netem delays nodes with tc netem inside their namespaces.
func (l *localPlatform) netem(network nemesis.Network) nemesis.Delayer {
	if v, ok := network.(*netView); ok {
		return &netemView{v}
	}
	return nil
}

// proxyIP is the lab's gateway, which the client namespaces reach, or
// loopback.
func (l *localPlatform) proxyIP() string {
	if l.lab != nil {
		return l.lab.Gateway()
	}
	return "127.0.0.1"
}

func (l *localPlatform) describe() (network, lab, image string) {
	if l.lab != nil {
		return "netns " + l.lab.Subnet(), l.lab.ID(), ""
	}
	return "loopback", "", ""
}

func (l *localPlatform) close(ctx context.Context, lg *slog.Logger) {
	if l.lab != nil {
		if err := l.lab.Close(ctx); err != nil {
			lg.Error("network lab", "err", err)
		}
	}
}
