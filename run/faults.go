package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/clockshim"
	"github.com/locktest/locktest/clusters/delayproxy"
	"github.com/locktest/locktest/clusters/provider"
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

// Network modes of Config.Net (see provider.NetAuto).
const (
	NetAuto       = provider.NetAuto
	NetNamespaces = provider.NetNamespaces
	NetLoopback   = provider.NetLoopback
)

// providerSetup is what a run set up for its faults beyond the cluster:
// its provider (where the nodes run, and their network), the clock shim,
// the delaying proxy, and the reasons for what it could not set up.
type providerSetup struct {
	p         provider.Provider
	netReason string
	clocks    *clockshim.Clocks
	clockWhy  string
	// diskWhy says why the run's nodes' syncs cannot be slowed
	// (slow-disk), when the run asked for it.
	diskWhy string
	// syncs is set when the nodes record what they sync, for power-loss
	// (C servers under the clock shim, wherever the provider puts it, and
	// the node program's servers under its sync tracer); powerWhy says
	// why not when the run asked for it.
	syncs     bool
	powerWhy  string
	proxy     *delayproxy.Proxy
	netem     bool
	delayHow  string // how the delay fault is made, and why, for results.json
	storeAddr string
	// lab is the keeper's hold of the run's network lab, when a series
	// of runs may keep it with its cluster (Clusters.provider), or nil.
	lab *labHold
}

// setupProvider sets up the run's provider (a network lab for a local
// run that needs one, the Docker engine's network, the SSH hosts) and the
// clock shim the run's faults need. What cannot be had here (not root, no
// compiler, a Go node) is not an error: the reason is kept, and the faults
// that need it are reported unavailable. A run of a series that keeps its
// clusters (Config.Clusters) may take a kept network lab, with the
// cluster in it, instead of making one (Clusters.provider).
func setupProvider(ctx context.Context, cfg Config, impl impls.Impl, dir string, lg *slog.Logger) (*providerSetup, error) {
	p := &providerSetup{}
	// The nodes run where the provider puts them (this host's processes,
	// the run's containers, the inventory's hosts); the clients run here.
	var err error
	p.p, err = cfg.Clusters.provider(ctx, cfg, impl, p, lg)
	if err != nil {
		return p, err
	}
	// Workers that share the driver's network namespace reach the store
	// through a Unix socket in the run's folder, cheaper per request than
	// loopback TCP (and reachable only by who may enter the folder); in
	// client namespaces they reach it where the provider says.
	p.storeAddr = cmp.Or(p.p.StoreAddr(), workloads.StoreAddrIn(dir))
	ab := p.p.Abilities()
	p.netReason = ab[provider.Network]
	// The shim moves node clocks and records what nodes sync. Where the
	// provider's nodes cannot record their syncs, or the shim cannot
	// reach the backend's nodes, the cluster says why power-loss is
	// unavailable (nemesis.NeedPowerCut).
	clocks := nemesis.Needs(cfg.faultParts(), nemesis.NeedClocks)
	power := nemesis.Needs(cfg.faultParts(), nemesis.NeedPowerCut) && ab[provider.SyncRecords] == ""
	disks := nemesis.Needs(cfg.faultParts(), nemesis.NeedSyncDelay)
	if clocks || power || disks {
		switch {
		case backend.ClockShimReason(impl.Backend) != "":
			if clocks {
				p.clockWhy = backend.ClockShimReason(impl.Backend)
			}
			if disks {
				p.diskWhy = "the LD_PRELOAD shim, which slows a node's fsync and fdatasync, cannot reach the nodes of " +
					impl.Backend + ": " + backend.ClockShimReason(impl.Backend)
			}
			// Locktest's node program records its own syncs, under its
			// sync tracer, where the provider names the record.
			p.syncs = power
		default:
			lib, err := clockshim.Build(ctx, "")
			if err != nil {
				if clocks {
					p.clockWhy = err.Error()
				}
				if power {
					p.powerWhy = "the nodes cannot record what they sync: " + err.Error()
				}
				if disks {
					p.diskWhy = "the nodes' syncs cannot be slowed: " + err.Error()
				}
				break
			}
			if p.p.UsesShim(lib) {
				// The provider puts the library beside its nodes and
				// moves their clocks itself; whether every node can
				// preload it is known once the nodes started.
				p.syncs = power
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
		// tc netem delays every packet a node sends; without it a
		// delaying proxy sits between the clients and nodes.
		if why := ab[provider.Netem]; why != "" {
			p.delayHow = "delay by a TCP proxy: " + why
			p.proxy = delayproxy.New()
		} else {
			p.netem, p.delayHow = true, "delay by tc netem"
		}
		lg.Info(p.delayHow)
	}
	return p, nil
}

// nodeEnv returns the extra environment of a node process: the clock shim's.
func (p *providerSetup) nodeEnv(node string) []string {
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
func (p *providerSetup) cgroup() func(int) string { return p.p.Cgroup() }

// netNS returns the namespace of the client host of process c, or nil.
func (p *providerSetup) netNS() func(int) string { return p.p.NetNS() }

// clientHosts names the client hosts as the nemesis sees them, nil when
// the run has no network faults.
func (p *providerSetup) clientHosts(n int) []string {
	if p.netReason != "" {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

// network returns the nemesis's network over the nodes of cl, or nil.
func (p *providerSetup) network(cl clusters.Cluster) nemesis.Network {
	if p.netReason != "" {
		return nil
	}
	return p.p.Network(cl)
}

// describe says, for results.json, where the run's nodes and clients run
// (and how it delays packets), the id of what a killed driver would leave
// behind, the nodes' image, and whether the nodes run under the shim (and
// record their syncs) or why not.
func (p *providerSetup) describe() (network, lab, image, clock string) {
	network, lab, image = p.p.Describe()
	if p.delayHow != "" {
		network += "; " + p.delayHow
	}
	remote := p.p.Shim()
	switch {
	case p.clocks != nil && p.syncs:
		clock = "clock shim, which records what each node syncs (power-loss)"
	case p.clocks != nil:
		clock = "clock shim"
	case remote:
		// Described before the nodes start: a host that then cannot
		// preload the shim makes the clock faults unavailable, with
		// its reason among the run's problems.
		clock = "clock shim, uploaded to each node's host and preloaded into the node"
		if p.syncs {
			clock += ", which records what each node syncs (power-loss)"
		}
	case p.syncs:
		// A Go node, which the shim cannot reach, records its syncs
		// under the node program's sync tracer.
		clock = "the node program's sync tracer, which records what each node syncs (power-loss)"
		if p.clockWhy != "" {
			clock += "; no clock shim: " + p.clockWhy
		}
	case p.clockWhy != "":
		clock = "no clock shim: " + p.clockWhy
	case p.powerWhy != "":
		clock = "no clock shim: " + p.powerWhy
	}
	return network, lab, image, clock
}

// delayer returns how the delay fault is made, or nil; network is the
// provider's network (see network).
func (p *providerSetup) delayer(network nemesis.Network) nemesis.Delayer {
	switch {
	case p.netem:
		return p.p.Netem(network)
	case p.proxy != nil:
		return p.proxy
	}
	return nil
}

// proxied returns the nodes as workers should dial them: through the
// delaying proxy when the run has one.
func (p *providerSetup) proxied(nodes []clusters.Node) ([]clusters.Node, error) {
	if p.proxy == nil {
		return nodes, nil
	}
	ip := p.p.ProxyIP()
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

// close heals and removes everything the provider and the run set up.
func (p *providerSetup) close(ctx context.Context, lg *slog.Logger) {
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
	if p.p != nil && !p.lab.handedBack(ctx, lg) {
		p.p.Close(ctx, lg)
	}
}

// buildFaults builds the run's faults. A fault the provider cannot apply is
// left out and its reason returned, so the rest of the run goes on; any
// other error (a bad setting) is a setup error. A run of a schedule file
// gets its planned faults (steps) instead, every one of them: a replay
// without one of its faults would not be a replay.
func buildFaults(p *providerSetup, cfg Config, env nemesis.Env) ([]nemesis.Fault, *nemesis.PlanSteps, []string, error) {
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

// clockControl returns the run's clocks as the nemesis sees them, or
// nil (a nil *Clocks in the interface would look usable).
func clockControl(p *providerSetup) nemesis.ClockControl {
	if c := p.p.Clocks(); c != nil {
		return c
	}
	if p.clocks == nil {
		return nil
	}
	return p.clocks
}

// diskControl returns what slows the run's nodes' syncs as the nemesis
// sees it, or nil and why not: the shim's mapping of each node, where the
// run gave the nodes its own shim, or the provider's clocks when they
// can slow syncs too.
func diskControl(p *providerSetup) (nemesis.SyncDelayer, string) {
	if c := p.p.Clocks(); c != nil {
		if d, ok := c.(nemesis.SyncDelayer); ok {
			return d, ""
		}
		return nil, "the provider runs the shim on its own hosts, where it cannot set a node's sync delay"
	}
	if p.clocks == nil {
		return nil, cmp.Or(p.diskWhy, p.p.ClockReason(), "the run has no shim to slow its nodes' syncs")
	}
	return p.clocks, ""
}

// nodes is what the run gives its provider's cluster: the run's folder,
// the clock shim (its environment for a node on this host, or the host
// paths of its library and a node's offset file) and whether the nodes
// record their syncs.
func (p *providerSetup) nodes(dir string, lg *slog.Logger) provider.Nodes {
	n := provider.Nodes{Dir: dir, ShimEnv: p.nodeEnv, SyncRecords: p.syncs, Logger: lg}
	if p.clocks != nil {
		n.Shim = func(node string) (string, string, error) { return shimPaths(p.clocks, node) }
	}
	return n
}

// shimPaths returns the host paths of the clock shim and of node's offset
// file (creating it), from the environment the shim gives a local node.
func shimPaths(c *clockshim.Clocks, node string) (lib, file string, err error) {
	env, err := c.Env(node)
	if err != nil {
		return "", "", err
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
			lib = v
		}
		if v, ok := strings.CutPrefix(kv, clockshim.EnvFile+"="); ok {
			file = v
		}
	}
	if lib == "" || file == "" {
		return "", "", fmt.Errorf("clock shim: no library or offset file in %q", env)
	}
	return lib, file, nil
}
