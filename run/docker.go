package run

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/clockshim"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/images"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
)

// ProviderDocker runs nodes as containers (clusters/docker).
const ProviderDocker = "docker"

// dockerDef is the docker provider: its nodes are containers on a
// network of the run's; --image is its own.
var dockerDef = providerDef{
	name: ProviderDocker,
	doc:  "containers",
	foreign: func(c *Config) error {
		if len(c.Images) > 0 {
			return setupErr("--image needs --provider docker")
		}
		return nil
	},
	validate: (*Config).validateDocker,
	setup: func(ctx context.Context, cfg Config, impl impls.Impl, _ *platform, lg *slog.Logger) (provider, error) {
		return setupDocker(ctx, cfg, impl, lg)
	},
}

// validateDocker checks Config.Images, and that the docker provider runs
// impl's backend.
func (c *Config) validateDocker(impl impls.Impl) error {
	known := docker.Backends()
	keys := make([]string, 0, len(c.Images))
	for k := range c.Images {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return setupErr("--image %s=%s: the docker provider has no backend %q (it runs %s)", k, c.Images[k], k, strings.Join(known, ", "))
		}
		if strings.TrimSpace(c.Images[k]) == "" {
			return setupErr("--image %s= names no image", k)
		}
	}
	if !slices.Contains(known, impl.Backend) {
		return setupErr("--provider docker: %s needs backend %s, which the docker provider does not run (it runs %s; use --provider local)",
			c.Impl, impl.Backend, strings.Join(known, ", "))
	}
	return nil
}

// dockerPlatform is what a docker run set up: the engine connection, the
// run's network and the image its nodes run.
type dockerPlatform struct {
	onThisMachine
	engine *engine.Engine
	lab    *docker.Network
	image  images.Image
	// netWhy is why network faults are unavailable, or "".
	netWhy string
	// clients gives each client host an address of its own on the run's
	// network, when the run has network faults; clientWhy says why not.
	clients   *clientaddr.Set
	clientWhy string
}

// setupDocker connects to the Docker engine, resolves the backend's image
// and creates the run's network. A daemon that does not answer or a bad
// image is a setup error; what was made before it is returned, to close.
func setupDocker(ctx context.Context, cfg Config, impl impls.Impl, lg *slog.Logger) (provider, error) {
	e, err := engine.Open(ctx, lg)
	if err != nil {
		return nil, setupErr("--provider docker: %v", err)
	}
	d := &dockerPlatform{engine: e}
	img, err := images.Resolve(ctx, e, impl.Backend, cfg.Images[impl.Backend])
	if err != nil {
		return d, setupErr("--provider docker: %v", err)
	}
	d.image = img
	lab, err := docker.NewLab(ctx, e)
	if err != nil {
		return d, setupErr("--provider docker: %v", err)
	}
	d.lab = lab
	lg.Info("docker provider", "engine", e.Host(), "image", img.Ref, "built_by_locktest", img.Built, "network", lab.Name(), "subnet", lab.Subnet())
	switch {
	case cfg.Net == NetLoopback:
		d.netWhy = "the run was asked to use no network faults (--net loopback)"
	default:
		d.netWhy = docker.NetworkFaultsReason(e)
	}
	if d.netWhy == "" && nemesis.Needs(cfg.faultParts(), nemesis.NeedNetwork) {
		d.setupClients(ctx, cfg, lg)
	}
	return d, nil
}

func (d *dockerPlatform) name() string { return ProviderDocker }

func (d *dockerPlatform) abilities() map[string]string {
	return map[string]string{AbilityNetwork: d.netWhy,
		AbilityNetem:       "the docker provider does not use tc netem",
		AbilitySyncRecords: ""}
}

// netNS returns nil: a worker runs on this host, in its namespace.
func (d *dockerPlatform) netNS() func(int) string { return nil }

// netem returns nil: the docker provider does not use tc netem.
func (d *dockerPlatform) netem(nemesis.Network) nemesis.Delayer { return nil }

// proxyIP is loopback: the workers run on this host.
func (d *dockerPlatform) proxyIP() string { return "127.0.0.1" }

// setupClients gives each client host an address of its own from the
// run's network's client block, so that a cut can single out one client;
// where it cannot, the clients share the host's address and the faults
// that need to tell them apart are unavailable, with clientWhy.
func (d *dockerPlatform) setupClients(ctx context.Context, cfg Config, lg *slog.Logger) {
	block := d.lab.ClientBlock()
	if cfg.Clients > len(block) {
		d.clientWhy = fmt.Sprintf("the run has %d clients and the network %d addresses for them", cfg.Clients, len(block))
		return
	}
	// Any address of the network leads to its bridge.
	toward := netip.MustParsePrefix(d.lab.Subnet()).Addr().Next().Next()
	set, err := clientaddr.New(ctx, clientaddr.Options{RunID: "docker-" + d.lab.ID(), Addresses: block[:cfg.Clients], Toward: toward})
	if err != nil {
		d.clientWhy = err.Error()
		lg.Warn("docker: clients share the host's address", "reason", err)
		return
	}
	d.clients = set
	addrs := make([]netip.Addr, set.Len())
	for i := range addrs {
		addrs[i] = set.Address(i)
	}
	d.lab.SetClients(addrs)
	lg.Info("docker: client addresses", "device", set.Device(), "first", addrs[0], "clients", len(addrs))
}

// cgroup returns the cgroup each worker process starts in, so that its
// connections leave from its client host's address, or nil.
func (d *dockerPlatform) cgroup() func(int) string {
	return d.clients.Cgroups()
}

// cluster returns the run's cluster of containers.
func (d *dockerPlatform) cluster(cfg Config, impl impls.Impl, dir string, p *platform, lg *slog.Logger) (clusters.Cluster, error) {
	opts := docker.Options{Backend: impl.Backend, Nodes: impl.Nodes, Dir: dir, Lab: d.lab, Image: d.image,
		Persistence: cfg.Persistence, Params: cfg.ClusterParams, SyncRecords: p.syncs, Logger: lg}
	if p.clocks != nil {
		opts.Shim = func(node string) (string, string, error) { return shimPaths(p.clocks, node) }
	}
	return docker.New(opts)
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

// network returns the lab as the nemesis's network, or nil when network
// faults are unavailable.
func (d *dockerPlatform) network(clusters.Cluster) nemesis.Network {
	if d.netWhy != "" || d.lab == nil {
		return nil
	}
	return d.lab
}

// describe says, for results.json, where the nodes run, and their image.
func (d *dockerPlatform) describe() (network, lab, image string) {
	if d.lab == nil {
		return "docker", "", d.image.Ref
	}
	network = fmt.Sprintf("docker network %s %s, image %s", d.lab.Name(), d.lab.Subnet(), d.image.Ref)
	if d.clients != nil {
		network += fmt.Sprintf("; clients from %v to %v", d.clients.Address(0), d.clients.Address(d.clients.Len()-1))
	}
	return network, d.lab.ID(), d.image.Ref
}

// close removes the run's containers and network, with a fresh context if
// ctx has ended (an interrupted run still cleans up).
func (d *dockerPlatform) close(ctx context.Context, lg *slog.Logger) {
	if err := d.clients.Close(ctx); err != nil {
		lg.Error("docker: remove client addresses", "err", err)
	}
	if d.lab != nil {
		if err := d.lab.Close(ctx); err != nil {
			lg.Error("docker network", "err", err)
		}
	}
	d.engine.Close()
}
