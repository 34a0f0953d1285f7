package run

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/clientaddr"
	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
)

// ProviderSSH runs nodes on hosts reached over SSH (clusters/ssh).
const ProviderSSH = "ssh"

// SSHConfig is how a run of the ssh provider reaches its hosts: an
// inventory file, or the short form of --hosts.
type SSHConfig struct {
	// Inventory is the path of the inventory file (YAML).
	Inventory string
	// Hosts is the short form "a,b,c": hosts with one user and key.
	Hosts string
	// User and Key are the user and private key of Hosts (default root,
	// and the ssh-agent).
	User string
	Key  string
	// KnownHosts is the known_hosts file of Hosts; default
	// ~/.ssh/known_hosts.
	KnownHosts string
	// InsecureIgnoreHostKey skips the host key check; results.json says so.
	InsecureIgnoreHostKey bool
	// ClientAddresses are the clients' own addresses of Hosts, the
	// inventory's client_addresses comma-separated.
	ClientAddresses string
}

// used reports whether any ssh setting is set.
func (s SSHConfig) used() bool {
	return s.Inventory != "" || s.Hosts != "" || s.User != "" || s.Key != "" || s.KnownHosts != "" || s.InsecureIgnoreHostKey || s.ClientAddresses != ""
}

// sshDef is the ssh provider: its nodes run on an inventory's hosts; the
// inventory and the settings of --hosts are its own.
var sshDef = providerDef{
	name: ProviderSSH,
	doc:  "hosts over SSH",
	foreign: func(c *Config) error {
		if c.SSH.used() {
			return setupErr("--inventory, --hosts, --ssh-user, --ssh-key, --known-hosts, --client-addresses and --insecure-ignore-host-key need --provider ssh")
		}
		return nil
	},
	validate: (*Config).validateSSH,
	setup: func(ctx context.Context, cfg Config, _ impls.Impl, _ *platform, lg *slog.Logger) (provider, error) {
		return setupSSH(ctx, cfg, lg)
	},
}

// validateSSH checks the ssh settings of c for impl; it does not read the
// inventory file (setup does, and its errors are setup errors too).
func (c *Config) validateSSH(impl impls.Impl) error {
	switch {
	case c.SSH.Inventory == "" && c.SSH.Hosts == "":
		return setupErr("--provider ssh needs --inventory FILE or --hosts a,b,c")
	case c.SSH.Inventory != "" && c.SSH.Hosts != "":
		return setupErr("--inventory and --hosts both name the hosts: give one")
	case c.SSH.Inventory != "" && (c.SSH.User != "" || c.SSH.Key != "" || c.SSH.KnownHosts != "" || c.SSH.ClientAddresses != ""):
		return setupErr("--ssh-user, --ssh-key, --known-hosts and --client-addresses go with --hosts; the inventory names its own")
	}
	if !slices.Contains(sshp.Backends(), impl.Backend) {
		return setupErr("--provider ssh: %s needs backend %s, which the ssh provider does not run yet (it runs %s; use --provider local)",
			c.Impl, impl.Backend, strings.Join(sshp.Backends(), ", "))
	}
	if err := sshp.CheckParams(impl.Backend, c.ClusterParams); err != nil {
		return setupErr("%v", err)
	}
	return nil
}

// sshPlatform is what an ssh run set up: the inventory, one connection per
// host, and the run's id on the hosts.
type sshPlatform struct {
	inv    *sshp.Inventory
	conns  []*sshp.Conn
	runID  string
	cl     *sshp.Hosts
	netWhy string
	// shimLib is the clock shim library on this host, when the run's
	// clock or power faults need it and the backend's nodes can take it.
	shimLib string
	// ruled is set once the run's network faults were handed out: only
	// then are there rules to remove.
	ruled bool
	// clients gives each client host an address of its own on this host,
	// when the run has network faults and the inventory client_addresses;
	// otherwise clientWhy says why the clients share one.
	clients   *clientaddr.Set
	clientWhy string
}

// setupSSH reads the inventory, connects to every host (checking host
// keys unless told not to) and measures each round trip. A bad inventory
// or a host it cannot reach is a setup error.
func setupSSH(ctx context.Context, cfg Config, lg *slog.Logger) (provider, error) {
	var inv *sshp.Inventory
	var err error
	if cfg.SSH.Inventory != "" {
		inv, err = sshp.LoadInventory(cfg.SSH.Inventory)
	} else {
		inv, err = sshp.HostsInventory(cfg.SSH.Hosts, cfg.SSH.User, cfg.SSH.Key, cfg.SSH.KnownHosts, cfg.SSH.ClientAddresses)
	}
	if err != nil {
		return nil, setupErr("%v", err)
	}
	inv.InsecureIgnoreHostKey = cfg.SSH.InsecureIgnoreHostKey
	conns, err := sshp.Dial(ctx, inv)
	if err != nil {
		return nil, setupErr("--provider ssh: %v", err)
	}
	s := &sshPlatform{inv: inv, conns: conns, runID: sshp.NewRunID()}
	switch {
	case cfg.Net == NetLoopback:
		s.netWhy = "the run was asked to use no network faults (--net loopback)"
	case nemesis.Needs(cfg.faultParts(), nemesis.NeedNetwork):
		s.netWhy = sshp.NetworkFaultsReason(ctx, conns)
	}
	for _, c := range conns {
		lg.Info("ssh host", "host", c.Host.Name, "addr", c.Host.Addr(), "rtt", c.RTT(), "control_ip", c.LocalIP())
	}
	if s.netWhy == "" && nemesis.Needs(cfg.faultParts(), nemesis.NeedNetwork) {
		s.setupClients(ctx, cfg, lg)
	}
	if inv.InsecureIgnoreHostKey {
		lg.Warn("ssh host keys are not checked (--insecure-ignore-host-key)")
	}
	return s, nil
}

func (s *sshPlatform) name() string { return ProviderSSH }

func (s *sshPlatform) abilities() map[string]string {
	return map[string]string{AbilityNetwork: s.netWhy,
		AbilityNetem:       "the ssh provider does not use tc netem yet (the proxy runs on the control host)",
		AbilitySyncRecords: ""}
}

// usesShim uploads lib to the hosts with the nodes and writes the offsets
// there: the ssh provider always takes the shim.
func (s *sshPlatform) usesShim(lib string) bool {
	s.shimLib = lib
	return true
}

func (s *sshPlatform) shim() bool { return s.shimLib != "" }

// netNS returns nil: the workers run on the control host.
func (s *sshPlatform) netNS() func(int) string { return nil }

// netem returns nil: the ssh provider does not use tc netem.
func (s *sshPlatform) netem(nemesis.Network) nemesis.Delayer { return nil }

// proxyIP is loopback: the workers run on the control host.
func (s *sshPlatform) proxyIP() string { return "127.0.0.1" }

// setupClients gives each client host an address of its own from the
// inventory's client_addresses, or says in s.clientWhy why it cannot.
// Without them the faults that cut one client off are unavailable, never
// faked.
func (s *sshPlatform) setupClients(ctx context.Context, cfg Config, lg *slog.Logger) {
	switch {
	case len(s.inv.Clients) == 0:
		s.clientWhy = "the inventory gives no client_addresses"
		return
	case len(s.inv.Clients) < cfg.Clients:
		s.clientWhy = fmt.Sprintf("the run has %d clients and the inventory only %d client_addresses", cfg.Clients, len(s.inv.Clients))
		return
	}
	toward, err := netip.ParseAddr(s.conns[0].RemoteIP())
	if err != nil {
		s.clientWhy = fmt.Sprintf("the address of host %s: %v", s.conns[0].Host.Name, err)
		return
	}
	set, err := clientaddr.New(ctx, clientaddr.Options{RunID: "ssh-" + s.runID, Addresses: s.inv.Clients[:cfg.Clients], Toward: toward})
	if err != nil {
		s.clientWhy = err.Error()
		lg.Warn("ssh: clients share the control host's address", "reason", err)
		return
	}
	s.clients = set
	var as []string
	for i := range set.Len() {
		as = append(as, fmt.Sprintf("c%d %v", i, set.Address(i)))
	}
	lg.Info("ssh: client addresses", "device", set.Device(), "clients", strings.Join(as, ", "))
}

// cgroup returns the cgroup each worker process starts in, so that its
// connections leave from its client host's address, or nil.
func (s *sshPlatform) cgroup() func(int) string {
	return s.clients.Cgroups()
}

// cluster returns the run's cluster on the hosts.
func (s *sshPlatform) cluster(cfg Config, impl impls.Impl, _ string, p *platform, lg *slog.Logger) (clusters.Cluster, error) {
	node := cfg.NodeCommand
	if len(node) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("--provider ssh: find this executable to upload as the etcd members: %w", err)
		}
		node = []string{self}
	}
	cl, err := sshp.New(sshp.Options{Backend: impl.Backend, Nodes: impl.Nodes, Conns: s.conns, Inventory: s.inv,
		RunID: s.runID, Persistence: cfg.Persistence, Params: cfg.ClusterParams, NodeCommand: node, NodeEnv: cfg.NodeEnv, ClockShim: s.shimLib, SyncRecords: p.syncs, Logger: lg})
	if err != nil {
		return nil, err
	}
	s.cl = cl
	return cl, nil
}

// clocks returns the nodes' clocks on the hosts, or nil when the run has
// no clock shim or a host could not preload it.
func (s *sshPlatform) clocks() nemesis.ClockControl {
	if s.cl == nil || s.shimLib == "" || s.cl.ClockReason() != "" {
		return nil
	}
	return s.cl
}

// clockReason says why the run's clock faults cannot move the nodes'
// clocks once the nodes started, or "".
func (s *sshPlatform) clockReason() string {
	if s.cl == nil || s.shimLib == "" {
		return ""
	}
	return s.cl.ClockReason()
}

// network returns the hosts' iptables faults, or nil when unavailable.
func (s *sshPlatform) network(clusters.Cluster) nemesis.Network {
	if s.netWhy != "" || s.cl == nil {
		return nil
	}
	s.ruled = true
	var addrs []netip.Addr
	if s.clients != nil {
		for i := range s.clients.Len() {
			addrs = append(addrs, s.clients.Address(i))
		}
	}
	return s.cl.Network(s.conns, addrs, s.clientWhy)
}

// lost says, in one line, which hosts lost their SSH connection during
// the run, or "": the nodes there ran on without the provider's control,
// so no fault could be applied or healed there, and what the history
// holds is not the run that was asked for.
func (s *sshPlatform) lost() string {
	var why []string
	for _, c := range s.conns {
		if err := c.Lost(); err != nil {
			why = append(why, err.Error())
		}
	}
	switch len(why) {
	case 0:
		return ""
	case 1:
		return why[0]
	}
	return fmt.Sprintf("%s; and %d more hosts lost theirs", why[0], len(why)-1)
}

// watch starts the measure of the hosts' keepalive round trips, as the
// workload begins.
func (s *sshPlatform) watch() {
	for _, c := range s.conns {
		c.MarkKeepalives()
	}
}

// hostStalls returns the slowest keepalive round trip of the hosts since
// watch, with its host and its time on the history's clock, whose
// reading is now.
func (s *sshPlatform) hostStalls(now time.Duration) *runstore.HostStalls {
	st := &runstore.HostStalls{Every: sshp.KeepaliveEvery.String(), Longest: "0s"}
	var most time.Duration
	for _, c := range s.conns {
		if d, at := c.SlowestKeepalive(); d > most {
			most = d
			st.Longest, st.Host, st.LongestAt = ms(d), c.Host.Name, ms(now-time.Since(at))
		}
	}
	return st
}

// describe says, for results.json, which hosts the nodes run on, the
// measured SSH round trip to each, and whether host keys were checked.
func (s *sshPlatform) describe() (network, lab, image string) {
	var hs []string
	for _, c := range s.conns {
		hs = append(hs, fmt.Sprintf("%s %s rtt %v", c.Host.Name, c.Host.Address, c.RTT().Round(time.Microsecond)))
	}
	network = "ssh hosts " + strings.Join(hs, ", ")
	if s.clients != nil {
		var cs []string
		for i := range s.clients.Len() {
			cs = append(cs, fmt.Sprintf("c%d %v", i, s.clients.Address(i)))
		}
		network += "; clients from " + strings.Join(cs, ", ")
	}
	if s.inv.InsecureIgnoreHostKey {
		network += "; host keys NOT checked (--insecure-ignore-host-key)"
	} else {
		network += "; host keys checked against known_hosts"
	}
	return network, s.runID, ""
}

// close removes the run's rules and directories from every host and closes
// the connections.
func (s *sshPlatform) close(ctx context.Context, lg *slog.Logger) {
	if why := s.lost(); why != "" {
		lg.Error("ssh: a host lost its connection during the run", "reason", why)
	}
	if s.ruled {
		if err := sshp.RemoveRules(ctx, s.conns, s.runID); err != nil {
			lg.Error("ssh: remove rules", "err", err)
		}
	}
	if err := s.clients.Close(ctx); err != nil {
		lg.Error("ssh: remove client addresses", "err", err)
	}
	if err := sshp.RemoveRunDirs(ctx, s.conns, s.runID); err != nil {
		lg.Error("ssh: remove run directories", "err", err)
	}
	sshp.CloseAll(s.conns)
}
