package docker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/images"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/nemesis"
)

// Name is the docker provider's name as --provider takes it: nodes run as
// containers on a network of the run's.
const Name = "docker"

// ImageSetting is --image: the image of a backend, backend=ref.
var ImageSetting = provider.Setting{Name: "image", Kind: provider.Pairs,
	Doc: "docker provider: the image of a backend, backend=ref, repeatable (e.g. redis=redis:7.2); default: locktest's own (locktest images build), else the official one"}

func init() {
	provider.Register(provider.Def{
		Name:     Name,
		Rank:     1,
		Doc:      "containers",
		Settings: []provider.Setting{ImageSetting},
		Check:    checkImages,
		Validate: validate,
		Setup: func(ctx context.Context, r provider.Run, lg *slog.Logger) (provider.Provider, error) {
			return setup(ctx, r, lg)
		},
		Cleanup: &provider.Cleanup{Clear: clearLeft},
	})
}

// checkImages checks --image: each names a backend the docker provider
// runs, and an image.
func checkImages(v provider.Values) error {
	images := v.Pairs(ImageSetting.Name)
	known := backend.All()
	keys := make([]string, 0, len(images))
	for k := range images {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return fmt.Errorf("--image %s=%s: the docker provider has no backend %q (it runs %s)", k, images[k], k, strings.Join(known, ", "))
		}
		if strings.TrimSpace(images[k]) == "" {
			return fmt.Errorf("--image %s= names no image", k)
		}
	}
	return nil
}

// validate checks --image. The docker provider runs every backend.
func validate(r provider.Run) error {
	if err := checkImages(r.Settings); err != nil {
		return err
	}
	return nil
}

// run is what a docker run set up: the engine connection, the run's
// network and the image its nodes run.
type run struct {
	provider.OnThisMachine
	engine *engine.Engine
	lab    *Network
	image  images.Image
	// netWhy is why network faults are unavailable, or "".
	netWhy string
	// clients gives each client host an address of its own on the run's
	// network, when the run has network faults; clientWhy says why not.
	clients   *clientaddr.Set
	clientWhy string
}

// setup connects to the Docker engine, resolves the backend's image and
// creates the run's network. A daemon that does not answer or a bad image
// is an error; what was made before it is returned, to close.
func setup(ctx context.Context, r provider.Run, lg *slog.Logger) (provider.Provider, error) {
	e, err := engine.Open(ctx, lg)
	if err != nil {
		return nil, fmt.Errorf("--provider docker: %v", err)
	}
	d := &run{engine: e}
	img, err := images.Resolve(ctx, e, r.Backend, r.Settings.Pairs(ImageSetting.Name)[r.Backend])
	if err != nil {
		return d, fmt.Errorf("--provider docker: %v", err)
	}
	d.image = img
	lab, err := NewLab(ctx, e)
	if err != nil {
		return d, fmt.Errorf("--provider docker: %v", err)
	}
	d.lab = lab
	lg.Info("docker provider", "engine", e.Host(), "image", img.Ref, "built_by_locktest", img.Built, "network", lab.Name(), "subnet", lab.Subnet())
	switch {
	case r.Net == provider.NetLoopback:
		d.netWhy = "the run was asked to use no network faults (--net loopback)"
	default:
		d.netWhy = NetworkFaultsReason(e)
	}
	if d.netWhy == "" && r.NeedsNetwork {
		d.setupClients(ctx, r, lg)
	}
	return d, nil
}

func (d *run) Abilities() map[string]string {
	return map[string]string{provider.Network: d.netWhy,
		provider.Netem:       "the docker provider does not use tc netem",
		provider.SyncRecords: ""}
}

// NetNS returns nil: a worker runs on this host, in its namespace.
func (d *run) NetNS() func(int) string { return nil }

// Netem returns nil: the docker provider does not use tc netem.
func (d *run) Netem(nemesis.Network) nemesis.Delayer { return nil }

// ProxyIP is loopback: the workers run on this host.
func (d *run) ProxyIP() string { return "127.0.0.1" }

// setupClients gives each client host an address of its own from the
// run's network's client block, so that a cut can single out one client;
// where it cannot, the clients share the host's address and the faults
// that need to tell them apart are unavailable, with clientWhy.
func (d *run) setupClients(ctx context.Context, r provider.Run, lg *slog.Logger) {
	block := d.lab.ClientBlock()
	if r.Clients > len(block) {
		d.clientWhy = fmt.Sprintf("the run has %d clients and the network %d addresses for them", r.Clients, len(block))
		return
	}
	// Any address of the network leads to its bridge.
	toward := netip.MustParsePrefix(d.lab.Subnet()).Addr().Next().Next()
	set, err := clientaddr.New(ctx, clientaddr.Options{RunID: "docker-" + d.lab.ID(), Addresses: block[:r.Clients], Toward: toward})
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

// Cgroup returns the cgroup each worker process starts in, so that its
// connections leave from its client host's address, or nil.
func (d *run) Cgroup() func(int) string {
	return d.clients.Cgroups()
}

// Cluster returns the run's cluster of containers.
func (d *run) Cluster(r provider.Run, n provider.Nodes) (clusters.Cluster, error) {
	return New(Options{Backend: r.Backend, Nodes: r.Nodes, Dir: n.Dir, Lab: d.lab, Image: d.image,
		Persistence: r.Persistence, Params: r.Params, SyncRecords: n.SyncRecords, Shim: n.Shim, Logger: n.Logger})
}

// Network returns the lab as the nemesis's network, or nil when network
// faults are unavailable.
func (d *run) Network(clusters.Cluster) nemesis.Network {
	if d.netWhy != "" || d.lab == nil {
		return nil
	}
	return d.lab
}

// Describe says, for results.json, where the nodes run, and their image.
func (d *run) Describe() (network, lab, image string) {
	if d.lab == nil {
		return "docker", "", d.image.Ref
	}
	network = fmt.Sprintf("docker network %s %s, image %s", d.lab.Name(), d.lab.Subnet(), d.image.Ref)
	if d.clients != nil {
		network += fmt.Sprintf("; clients from %v to %v", d.clients.Address(0), d.clients.Address(d.clients.Len()-1))
	}
	return network, d.lab.ID(), d.image.Ref
}

// Close removes the run's containers and network, with a fresh context if
// ctx has ended (an interrupted run still cleans up).
func (d *run) Close(ctx context.Context, lg *slog.Logger) {
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

// clearLeft removes the containers and networks of docker runs whose driver
// is gone. Without a reachable Docker engine there is nothing to do.
func clearLeft(ctx context.Context, w io.Writer, _ provider.Values, dry bool) error {
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e, err := engine.Open(octx, nil)
	if err != nil {
		fmt.Fprintf(w, "docker: nothing to do: %v\n", err)
		return nil
	}
	defer e.Close()
	all, err := e.Find(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if dry {
		printLeft(w, "would remove", engine.Orphans(all))
		return nil
	}
	removed, err := e.Cleanup(ctx)
	printLeft(w, "removed", removed)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

func printLeft(w io.Writer, verb string, ls []engine.Leftover) {
	if len(ls) == 0 {
		fmt.Fprintln(w, "docker: nothing left behind by earlier runs")
		return
	}
	for _, kind := range []string{"container", "network"} {
		var names []string
		for _, l := range ls {
			if l.Kind == kind {
				names = append(names, l.Name)
			}
		}
		if len(names) > 0 {
			fmt.Fprintf(w, "docker: %s %d %ss: %s\n", verb, len(names), kind, strings.Join(names, ", "))
		}
	}
}
