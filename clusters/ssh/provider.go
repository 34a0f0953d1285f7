package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
)

// Name is the ssh provider's name as --provider takes it: nodes run on
// hosts reached over SSH.
const Name = "ssh"

// The ssh provider's settings: how a run reaches its hosts, an inventory
// file or the short form of --hosts.
var (
	InventorySetting = provider.Setting{Name: "inventory", Kind: provider.Text, Machine: true,
		Doc: "ssh provider: the inventory file (YAML) of the hosts, see docs/providers.md (locktest lab up writes one)"}
	hostsSetting = provider.Setting{Name: "hosts", Kind: provider.Text, Machine: true,
		Doc: "ssh provider: the hosts as a,b,c (host or host:port), with one --ssh-user and --ssh-key, instead of --inventory"}
	userSetting = provider.Setting{Name: "ssh-user", Kind: provider.Text, Machine: true,
		Doc: "ssh provider: the login user of --hosts (default root)"}
	keySetting = provider.Setting{Name: "ssh-key", Kind: provider.Text, Machine: true,
		Doc: "ssh provider: the private key of --hosts (default: the ssh-agent)"}
	knownHostsSetting = provider.Setting{Name: "known-hosts", Kind: provider.Text, Machine: true,
		Doc: "ssh provider: the known_hosts file of --hosts (default ~/.ssh/known_hosts)"}
	clientAddrsSetting = provider.Setting{Name: "client-addresses", Kind: provider.Text, Machine: true,
		Doc: "ssh provider: the clients' own addresses on this host for --hosts (the inventory's client_addresses otherwise), IPv4 addresses or CIDR blocks, comma-separated: with them a cut can single out one client (see docs/providers.md)"}
	insecureSetting = provider.Setting{Name: "insecure-ignore-host-key", Kind: provider.Switch, Machine: true,
		Doc: "ssh provider: do not check the hosts' keys (results.json records it)"}
)

func init() {
	provider.Register(provider.Def{
		Name: Name,
		Rank: 2,
		Doc:  "hosts over SSH",
		// The hosts of one inventory serve one run at a time: their
		// servers listen on the ports the inventory gives.
		OneRunAtATime: true,
		Settings: []provider.Setting{InventorySetting, hostsSetting, userSetting, keySetting,
			knownHostsSetting, clientAddrsSetting, insecureSetting},
		Check:     check,
		Validate:  validate,
		Preflight: preflight,
		Setup: func(ctx context.Context, r provider.Run, lg *slog.Logger) (provider.Provider, error) {
			return setup(ctx, r, lg)
		},
		Cleanup: &provider.Cleanup{
			Flags: []provider.Setting{
				{Name: InventorySetting.Name, Kind: provider.Text, Doc: "the ssh provider's inventory file, with --provider ssh"},
				{Name: insecureSetting.Name, Kind: provider.Switch, Doc: "with --provider ssh: do not check the hosts' keys"},
			},
			Clear: clearLeft,
		},
	})
}

// check checks the ssh settings of v; it does not read the inventory file
// (setup does, and its errors are setup errors too).
func check(v provider.Values) error {
	inv, hosts := v.Text(InventorySetting.Name), v.Text(hostsSetting.Name)
	switch {
	case inv == "" && hosts == "":
		return errors.New("--provider ssh needs --inventory FILE or --hosts a,b,c")
	case inv != "" && hosts != "":
		return errors.New("--inventory and --hosts both name the hosts: give one")
	case inv != "" && (v.IsSet(userSetting) || v.IsSet(keySetting) || v.IsSet(knownHostsSetting) || v.IsSet(clientAddrsSetting)):
		return errors.New("--ssh-user, --ssh-key, --known-hosts and --client-addresses go with --hosts; the inventory names its own")
	}
	return nil
}

// validate checks the ssh settings of r, and r's backend's parameters.
// The ssh provider runs every backend.
func validate(r provider.Run) error {
	if err := check(r.Settings); err != nil {
		return err
	}
	return CheckParams(r.Backend, r.Params)
}

// preflight reads the inventory, when v names one: a bad one would make
// every run of a series fail.
func preflight(v provider.Values) error {
	if inv := v.Text(InventorySetting.Name); inv != "" {
		if _, err := LoadInventory(inv); err != nil {
			return fmt.Errorf("--inventory: %v", err)
		}
	}
	return nil
}

// run is what an ssh run set up: the inventory, one connection per host,
// and the run's id on the hosts.
type run struct {
	inv    *Inventory
	conns  []*Conn
	runID  string
	cl     *Hosts
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

// setup reads the inventory, connects to every host (checking host keys
// unless told not to) and measures each round trip. A bad inventory or a
// host it cannot reach is an error.
func setup(ctx context.Context, r provider.Run, lg *slog.Logger) (provider.Provider, error) {
	var inv *Inventory
	var err error
	v := r.Settings
	if path := v.Text(InventorySetting.Name); path != "" {
		inv, err = LoadInventory(path)
	} else {
		inv, err = HostsInventory(v.Text(hostsSetting.Name), v.Text(userSetting.Name), v.Text(keySetting.Name), v.Text(knownHostsSetting.Name), v.Text(clientAddrsSetting.Name))
	}
	if err != nil {
		return nil, err
	}
	inv.InsecureIgnoreHostKey = v.Switch(insecureSetting.Name)
	conns, err := Dial(ctx, inv)
	if err != nil {
		return nil, fmt.Errorf("--provider ssh: %v", err)
	}
	s := &run{inv: inv, conns: conns, runID: NewRunID()}
	switch {
	case r.Net == provider.NetLoopback:
		s.netWhy = "the run was asked to use no network faults (--net loopback)"
	case r.NeedsNetwork:
		s.netWhy = NetworkFaultsReason(ctx, conns)
	}
	for _, c := range conns {
		lg.Info("ssh host", "host", c.Host.Name, "addr", c.Host.Addr(), "rtt", c.RTT(), "control_ip", c.LocalIP())
	}
	if s.netWhy == "" && r.NeedsNetwork {
		s.setupClients(ctx, r, lg)
	}
	if inv.InsecureIgnoreHostKey {
		lg.Warn("ssh host keys are not checked (--insecure-ignore-host-key)")
	}
	return s, nil
}

func (s *run) Abilities() map[string]string {
	return map[string]string{provider.Network: s.netWhy,
		provider.Netem:       "the ssh provider does not use tc netem yet (the proxy runs on the control host)",
		provider.SyncRecords: ""}
}

// UsesShim uploads lib to the hosts with the nodes and writes the offsets
// there: the ssh provider always takes the shim.
func (s *run) UsesShim(lib string) bool {
	s.shimLib = lib
	return true
}

func (s *run) Shim() bool { return s.shimLib != "" }

// NetNS returns nil: the workers run on the control host.
func (s *run) NetNS() func(int) string { return nil }

// StoreAddr is "": the workers run on the control host, beside the run's
// socket.
func (s *run) StoreAddr() string { return "" }

// Netem returns nil: the ssh provider does not use tc netem.
func (s *run) Netem(nemesis.Network) nemesis.Delayer { return nil }

// ProxyIP is loopback: the workers run on the control host.
func (s *run) ProxyIP() string { return "127.0.0.1" }

// setupClients gives each client host an address of its own from the
// inventory's client_addresses, or says in s.clientWhy why it cannot.
// Without them the faults that cut one client off are unavailable, never
// faked.
func (s *run) setupClients(ctx context.Context, r provider.Run, lg *slog.Logger) {
	switch {
	case len(s.inv.Clients) == 0:
		s.clientWhy = "the inventory gives no client_addresses"
		return
	case len(s.inv.Clients) < r.Clients:
		s.clientWhy = fmt.Sprintf("the run has %d clients and the inventory only %d client_addresses", r.Clients, len(s.inv.Clients))
		return
	}
	toward, err := netip.ParseAddr(s.conns[0].RemoteIP())
	if err != nil {
		s.clientWhy = fmt.Sprintf("the address of host %s: %v", s.conns[0].Host.Name, err)
		return
	}
	set, err := clientaddr.New(ctx, clientaddr.Options{RunID: "ssh-" + s.runID, Addresses: s.inv.Clients[:r.Clients], Toward: toward})
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

// Cgroup returns the cgroup each worker process starts in, so that its
// connections leave from its client host's address, or nil.
func (s *run) Cgroup() func(int) string {
	return s.clients.Cgroups()
}

// Cluster returns the run's cluster on the hosts.
func (s *run) Cluster(r provider.Run, n provider.Nodes) (clusters.Cluster, error) {
	node := r.NodeCommand
	if len(node) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("--provider ssh: find this executable to upload as the etcd members: %w", err)
		}
		node = []string{self}
	}
	cl, err := New(Options{Backend: r.Backend, Nodes: r.Nodes, Conns: s.conns, Inventory: s.inv,
		RunID: s.runID, Persistence: r.Persistence, Params: r.Params, NodeCommand: node, NodeEnv: r.NodeEnv, ClockShim: s.shimLib, SyncRecords: n.SyncRecords, Logger: n.Logger})
	if err != nil {
		return nil, err
	}
	s.cl = cl
	return cl, nil
}

// Clocks returns the nodes' clocks on the hosts, or nil when the run has
// no clock shim or a host could not preload it.
func (s *run) Clocks() nemesis.ClockControl {
	if s.cl == nil || s.shimLib == "" || s.cl.ClockReason() != "" {
		return nil
	}
	return s.cl
}

// ClockReason says why the run's clock faults cannot move the nodes'
// clocks once the nodes started, or "".
func (s *run) ClockReason() string {
	if s.cl == nil || s.shimLib == "" {
		return ""
	}
	return s.cl.ClockReason()
}

// Network returns the hosts' iptables faults, or nil when unavailable.
func (s *run) Network(clusters.Cluster) nemesis.Network {
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

// Lost says, in one line, which hosts lost their SSH connection during
// the run, or "": the nodes there ran on without the provider's control,
// so no fault could be applied or healed there, and what the history
// holds is not the run that was asked for.
func (s *run) Lost() string {
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

// Watch starts the measure of the hosts' keepalive round trips, as the
// workload begins.
func (s *run) Watch() {
	for _, c := range s.conns {
		c.MarkKeepalives()
	}
}

// HostStalls returns the slowest keepalive round trip of the hosts since
// Watch, with its host and its time on the history's clock, whose reading
// is now.
func (s *run) HostStalls(now time.Duration) *runstore.HostStalls {
	st := &runstore.HostStalls{Every: KeepaliveEvery.String(), Longest: "0s"}
	var most time.Duration
	for _, c := range s.conns {
		if d, at := c.SlowestKeepalive(); d > most {
			most = d
			st.Longest, st.Host, st.LongestAt = ms(d), c.Host.Name, ms(now-time.Since(at))
		}
	}
	return st
}

// ms is d in whole milliseconds, as results.json writes durations.
func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// Describe says, for results.json, which hosts the nodes run on, the
// measured SSH round trip to each, and whether host keys were checked.
func (s *run) Describe() (network, lab, image string) {
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

// Close removes the run's rules and directories from every host and
// closes the connections.
func (s *run) Close(ctx context.Context, lg *slog.Logger) {
	if why := s.Lost(); why != "" {
		lg.Error("ssh: a host lost its connection during the run", "reason", why)
	}
	if s.ruled {
		if err := RemoveRules(ctx, s.conns, s.runID); err != nil {
			lg.Error("ssh: remove rules", "err", err)
		}
	}
	if err := s.clients.Close(ctx); err != nil {
		lg.Error("ssh: remove client addresses", "err", err)
	}
	if err := RemoveRunDirs(ctx, s.conns, s.runID); err != nil {
		lg.Error("ssh: remove run directories", "err", err)
	}
	CloseAll(s.conns)
}

// clearLeft clears what killed drivers left on the hosts of v's inventory.
func clearLeft(ctx context.Context, w io.Writer, v provider.Values, dry bool) error {
	path := v.Text(InventorySetting.Name)
	if path == "" {
		return &provider.SettingError{Err: errors.New("cleanup --provider ssh needs --inventory FILE")}
	}
	inv, err := LoadInventory(path)
	if err != nil {
		return &provider.SettingError{Err: err}
	}
	inv.InsecureIgnoreHostKey = v.Switch(insecureSetting.Name)
	conns, err := Dial(ctx, inv)
	if err != nil {
		return &provider.SettingError{Err: err}
	}
	defer CloseAll(conns)
	left, err := Cleanup(ctx, conns, dry)
	verb := "removed"
	if dry {
		verb = "would remove"
	}
	if len(left) == 0 && err == nil {
		fmt.Fprintln(w, "ssh: nothing left behind by earlier runs")
	}
	for _, l := range left {
		fmt.Fprintf(w, "ssh: %s run %s on %s (driver %s)\n", verb, l.RunID, l.Host, l.Owner)
	}
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}
