package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/clockshim"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/local/netlab"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/workloads"
)

// networkFaults names the faults that need the network lab, for errors.
func networkFaults() string {
	var out []string
	for _, s := range nemesis.Specs() {
		if slices.Contains(s.Needs, nemesis.NeedNetwork) {
			out = append(out, s.Name)
		}
	}
	return strings.Join(out, ", ")
}

// Network modes of Config.Net.
const (
	// NetAuto puts nodes and clients into network namespaces when a network
	// fault is asked for, and runs on loopback otherwise.
	NetAuto = "auto"
	// NetNamespaces always uses namespaces.
	NetNamespaces = "netns"
	// NetLoopback never does; network faults are then unavailable.
	NetLoopback = "loopback"
)

// platform is what a run set up for its faults beyond the cluster: the
// network lab, the clock shim, and the reasons for what it could not set up.
type platform struct {
	lab       *netlab.Lab
	nodeHosts []local.Host
	clientNS  map[int]string
	netReason string
	clocks    *clockshim.Clocks
	clockWhy  string
	// syncs is set when the nodes record what they sync (under the shim,
	// for power-loss); powerWhy says why not when the run asked for it.
	syncs      bool
	powerWhy   string
	proxy      *netlab.Proxy
	netem      bool
	delayWhy   string
	delayHow   string // how the delay fault is made, and why, for results.json
	storeAddr  string
	clientHost func(p int) string
	// dock is set when the nodes run under the docker provider.
	dock *dockerPlatform
	// ssh is set when the nodes run under the ssh provider.
	ssh *sshPlatform
}

// setupPlatform creates the network namespaces and the clock shim the run's
// faults need. What cannot be had here (not root, no compiler, a Go node)
// is not an error: the reason is kept, and the faults that need it are
// reported unavailable.
func setupPlatform(ctx context.Context, cfg Config, impl impls.Impl, dir string, lg *slog.Logger) (*platform, error) {
	// Workers that share the driver's network namespace reach the store
	// through a Unix socket in the run's folder, cheaper per request than
	// loopback TCP (and reachable only by who may enter the folder); in
	// client namespaces they reach it on the bridge (below).
	p := &platform{storeAddr: workloads.StoreAddrIn(dir), clientNS: map[int]string{}}
	useNet := cfg.Net == NetNamespaces || (cfg.Net == NetAuto && nemesis.Needs(cfg.faultParts(), nemesis.NeedNetwork))
	if cfg.Net == NetLoopback {
		p.netReason = "the run was asked to use loopback (--net loopback)"
	}
	if cfg.Provider == ProviderDocker {
		// The nodes get the run's Docker network instead of namespaces;
		// the clients stay on the host.
		if err := setupDocker(ctx, cfg, impl, p, lg); err != nil {
			return p, err
		}
		p.netReason = p.dock.netWhy
	} else if cfg.Provider == ProviderSSH {
		// The nodes run on the inventory's hosts, the clients here.
		if err := setupSSH(ctx, cfg, p, lg); err != nil {
			return p, err
		}
		p.netReason = p.ssh.netWhy
	} else if useNet {
		if err := netlab.Check(); err != nil {
			p.netReason = err.Error()
			if cfg.Net == NetNamespaces {
				return p, setupErr("--net netns: %v", err)
			}
			lg.Warn("network faults unavailable", "reason", err)
		} else {
			lab, err := netlab.New(ctx, netlab.Options{Subnet: cfg.Subnet, Logger: lg})
			if err != nil {
				return p, setupErr("network: %v", err)
			}
			p.lab = lab
			// Nodes get hosts h1..hK in order; backends with more processes
			// than data nodes (sentinels, cluster replicas) use the extra.
			for i := 0; i < hostsFor(impl); i++ {
				h, err := lab.Add(ctx, fmt.Sprintf("h%d", i+1))
				if err != nil {
					return p, setupErr("network: %v", err)
				}
				p.nodeHosts = append(p.nodeHosts, local.Host{IP: h.IP, NetNS: h.NS})
			}
			for c := 0; c < cfg.Clients; c++ {
				h, err := lab.Add(ctx, fmt.Sprintf("c%d", c))
				if err != nil {
					return p, setupErr("network: %v", err)
				}
				p.clientNS[c] = h.NS
			}
			p.storeAddr = net.JoinHostPort(lab.Gateway(), "0")
		}
	} else if p.netReason == "" {
		p.netReason = "the run has no network namespaces (no network fault was asked for)"
	}
	// The shim moves node clocks and records what nodes sync. The local
	// and ssh providers' nodes record their syncs; on docker, and on
	// backends the shim cannot reach, the cluster says why power-loss is
	// unavailable (nemesis.NeedPowerCut).
	clocks := nemesis.Needs(cfg.faultParts(), nemesis.NeedClocks)
	power := nemesis.Needs(cfg.faultParts(), nemesis.NeedPowerCut) && p.dock == nil
	if clocks || power {
		switch {
		case local.ClockShimReason(impl.Backend) != "":
			if clocks {
				p.clockWhy = local.ClockShimReason(impl.Backend)
			}
		default:
			lib, err := clockshim.Build(ctx, "")
			if err != nil {
				if clocks {
					p.clockWhy = err.Error()
				}
				if power {
					p.powerWhy = "the nodes cannot record what they sync: " + err.Error()
				}
				break
			}
			if p.ssh != nil {
				// The ssh cluster uploads the library to its hosts and
				// writes the offsets there; whether every host can
				// preload it is known once the nodes started.
				p.ssh.shim, p.ssh.syncs = lib, power
				break
			}
			c, err := clockshim.New(lib, filepath.Join(dir, "clocks"))
			if err != nil {
				return p, setupErr("clock shim: %v", err)
			}
			p.clocks, p.syncs = c, power
		}
	}
	if nemesis.Needs(cfg.faultParts(), nemesis.NeedDelay) {
		// tc netem delays every packet a node sends; without it (or without
		// namespaces) a delaying proxy sits between the clients and nodes.
		p.delayHow = "delay by a TCP proxy: the run has no network namespaces"
		if p.dock != nil {
			p.delayHow = "delay by a TCP proxy: the docker provider does not use tc netem"
		}
		if p.ssh != nil {
			p.delayHow = "delay by a TCP proxy on the control host: the ssh provider does not use tc netem yet"
		}
		if p.lab != nil {
			if err := netlab.NetemAvailable(ctx); err == nil {
				p.netem, p.delayHow = true, "delay by tc netem"
			} else {
				p.delayHow = "delay by a TCP proxy: " + err.Error()
			}
		}
		lg.Info(p.delayHow)
		if !p.netem {
			p.proxy = netlab.NewProxy()
		}
	}
	return p, nil
}

// hostsFor is how many node hosts a run of impl needs: its nodes, and room
// for the auxiliary processes of the backends that have them.
func hostsFor(impl impls.Impl) int {
	return 2*max(impl.Nodes, 1) + 3
}

// nodeEnv returns the extra environment of a node process: the clock shim's.
func (p *platform) nodeEnv(node string) []string {
	if p.clocks == nil {
		return nil
	}
	env, err := p.clocks.Env(node)
	if err != nil {
		return nil
	}
	return env
}

// cgroup returns the cgroup the worker of process c starts in (its client
// host's own address on this host), or nil.
func (p *platform) cgroup() func(int) string {
	switch {
	case p.ssh != nil:
		return p.ssh.cgroup()
	case p.dock != nil:
		return p.dock.cgroup()
	}
	return nil
}

// netNS returns the namespace of the client host of process c.
func (p *platform) netNS() func(int) string {
	if p.lab == nil {
		return nil
	}
	return func(c int) string { return p.clientNS[c] }
}

// clientHosts names the client hosts as the nemesis sees them.
func (p *platform) clientHosts(n int) []string {
	if p.lab == nil && (p.dock == nil || p.dock.network() == nil) && (p.ssh == nil || p.ssh.netWhy != "") {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

// network returns the nemesis's view of the lab, which names node hosts by
// node name: it maps each node to the lab host that holds its address.
func (p *platform) network(cl clusters.Cluster) nemesis.Network {
	if p.dock != nil {
		return p.dock.network()
	}
	if p.ssh != nil {
		return p.ssh.network()
	}
	if p.lab == nil {
		return nil
	}
	byIP := map[string]string{}
	for _, h := range p.lab.Hosts() {
		byIP[h.IP] = h.Name
	}
	names := map[string]string{}
	for _, n := range cl.Nodes() {
		host, _, err := net.SplitHostPort(n.Addr)
		if err == nil && byIP[host] != "" {
			names[n.Name] = byIP[host]
		}
	}
	return &netView{lab: p.lab, names: names}
}

// describe says, for results.json, where the run's nodes and clients run
// (and how it delays packets), the network lab's id, and whether the nodes
// run under the shim (and record their syncs) or why not.
func (p *platform) describe() (network, lab, clock string) {
	network = "loopback"
	if p.lab != nil {
		network, lab = "netns "+p.lab.Subnet(), p.lab.ID()
	}
	if p.dock != nil {
		network, lab = p.dock.describe()
	}
	if p.ssh != nil {
		network, lab = p.ssh.describe()
	}
	if p.delayHow != "" {
		network += "; " + p.delayHow
	}
	switch {
	case p.clocks != nil && p.syncs:
		clock = "clock shim, which records what each node syncs (power-loss)"
	case p.clocks != nil:
		clock = "clock shim"
	case p.ssh != nil && p.ssh.shim != "":
		// Described before the nodes start: a host that then cannot
		// preload the shim makes the clock faults unavailable, with
		// its reason among the run's problems.
		clock = "clock shim, uploaded to each node's host and preloaded into the node"
		if p.ssh.syncs {
			clock += ", which records what each node syncs (power-loss)"
		}
	case p.clockWhy != "":
		clock = "no clock shim: " + p.clockWhy
	case p.powerWhy != "":
		clock = "no clock shim: " + p.powerWhy
	}
	return network, lab, clock
}

// delayer returns how the delay fault is made, or nil; network is the
// platform's network (see network).
func (p *platform) delayer(network nemesis.Network) nemesis.Delayer {
	switch {
	case p.netem:
		return &netemView{network.(*netView)}
	case p.proxy != nil:
		return p.proxy
	}
	return nil
}

// proxied returns the nodes as workers should dial them: through the
// delaying proxy when the run has one.
func (p *platform) proxied(nodes []clusters.Node) ([]clusters.Node, error) {
	if p.proxy == nil {
		return nodes, nil
	}
	ip := "127.0.0.1"
	if p.lab != nil {
		ip = p.lab.Gateway()
	}
	out := slices.Clone(nodes)
	for i, n := range out {
		a, err := p.proxy.Add(n.Name, ip, n.Addr)
		if err != nil {
			return nil, err
		}
		out[i].Addr = a
	}
	return out, nil
}

// close heals and removes everything the platform set up.
func (p *platform) close(ctx context.Context, lg *slog.Logger) {
	if p == nil {
		return
	}
	if p.proxy != nil {
		p.proxy.Close()
	}
	if p.clocks != nil {
		if err := p.clocks.Close(); err != nil {
			lg.Warn("clock shim", "err", err)
		}
	}
	if p.lab != nil {
		if err := p.lab.Close(ctx); err != nil {
			lg.Error("network lab", "err", err)
		}
	}
	if p.dock != nil {
		p.dock.close(ctx, lg)
	}
	if p.ssh != nil {
		p.ssh.close(ctx, lg)
	}
}

// netView translates node names into lab host names.
type netView struct {
	lab   *netlab.Lab
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

func (v *netView) Loss(ctx context.Context, hosts []string, p float64) error {
	return v.lab.Loss(ctx, v.tr(hosts), p)
}

func (v *netView) Heal(ctx context.Context) error { return v.lab.Heal(ctx) }

// buildFaults builds the run's faults. A fault the platform cannot apply is
// left out and its reason returned, so the rest of the run goes on; any
// other error (a bad setting) is a setup error. A run of a schedule file
// gets its planned faults (steps) instead, every one of them: a replay
// without one of its faults would not be a replay.
func buildFaults(p *platform, cfg Config, env nemesis.Env) ([]nemesis.Fault, *nemesis.PlanSteps, []string, error) {
	if cfg.Plan != nil {
		steps, err := nemesis.BuildPlan(*cfg.Plan, env)
		if err != nil {
			return nil, nil, nil, setupErr("--schedule %s: %v", orDash(cfg.Schedule), err)
		}
		return nil, steps, nil, nil
	}
	var out []nemesis.Fault
	var unavailable []string
	for _, name := range cfg.Faults {
		fs, err := nemesis.Build([]string{name}, env)
		if errors.Is(err, nemesis.ErrUnavailable) {
			unavailable = append(unavailable, err.Error())
			continue
		}
		if err != nil {
			return nil, nil, nil, setupErr("--faults: %v", err)
		}
		out = append(out, fs...)
	}
	return out, nil, unavailable, nil
}

// netemView delays nodes with tc netem inside their namespaces.
type netemView struct{ v *netView }

func (n *netemView) Delay(ctx context.Context, nodes []string, d time.Duration) error {
	return n.v.lab.Delay(ctx, n.v.tr(nodes), d)
}

func (n *netemView) Mechanism() string { return "netem" }

// clockControl returns the platform's clocks as the nemesis sees them, or
// nil (a nil *Clocks in the interface would look usable).
func clockControl(p *platform) nemesis.ClockControl {
	if p.ssh != nil {
		if c := p.ssh.clocks(); c != nil {
			return c
		}
	}
	if p.clocks == nil {
		return nil
	}
	return p.clocks
}
