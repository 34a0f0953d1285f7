// Package provider is the registry of providers: where a run's nodes run
// (processes on this host, containers, hosts over SSH) and everything a
// run, a series of runs and `locktest cleanup` must know of each. A
// provider is one folder under clusters that registers its Def in an init
// function; clusters/all imports every provider, and nothing else names
// one.
package provider

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
)

// Abilities a provider has or lacks in a run (Provider.Abilities).
const (
	// Network is the network faults: cuts and loss between the nodes and
	// the client hosts.
	Network = "network"
	// Netem is delaying a node's packets with tc netem; without it the
	// delay fault uses a TCP proxy on this host.
	Netem = "netem"
	// SyncRecords is a node recording what it syncs (under the clock
	// shim), which power-loss needs.
	SyncRecords = "sync-records"
)

// Abilities are every ability a provider answers for, in order.
var Abilities = []string{Network, Netem, SyncRecords}

// Network modes of a run (its --net).
const (
	// NetAuto puts nodes and clients into network namespaces when a
	// network fault is asked for, and runs on loopback otherwise.
	NetAuto = "auto"
	// NetNamespaces always uses namespaces.
	NetNamespaces = "netns"
	// NetLoopback never does; network faults are then unavailable.
	NetLoopback = "loopback"
)

// Run is what a provider is told of the run it sets up, validates and
// makes the cluster of.
type Run struct {
	// Impl names the lock implementation, for errors; Backend is its
	// backend and Nodes its node count.
	Impl, Backend string
	Nodes         int
	// Clients is the number of client hosts (one per worker).
	Clients int
	// Net is the network mode (NetAuto, NetNamespaces, NetLoopback) and
	// Subnet the subnet of the run's network namespaces, or "".
	Net, Subnet string
	// NeedsNetwork and NeedsDelay say whether the run's faults need the
	// network (nemesis.NeedNetwork) or a delay (nemesis.NeedDelay).
	NeedsNetwork, NeedsDelay bool
	// Persistence and Params are the nodes' durability and the cluster's
	// settings (--persistence, --cluster-opt).
	Persistence string
	Params      map[string]string
	// NodeCommand and NodeEnv run locktest's own node programs; the
	// default NodeCommand is this executable.
	NodeCommand, NodeEnv []string
	// Settings are the values of the provider's own settings (Def.Settings).
	Settings Values
}

// Nodes is what the run gives a provider's cluster beyond Run: the
// folder of the nodes' files and the clock shim the run set up.
type Nodes struct {
	// Dir is the run's folder (the nodes' files and logs go under it).
	Dir string
	// ShimEnv returns the environment that preloads the run's clock shim
	// into a node process on this host, or nil.
	ShimEnv func(node string) []string
	// Shim returns the host paths of the clock shim library and of node's
	// offset file, when the run has the shim; nil otherwise.
	Shim func(node string) (lib, file string, err error)
	// SyncRecords says whether the nodes record what they sync.
	SyncRecords bool
	Logger      *slog.Logger
}

// Provider is what a provider set up for one run, as run sees it. Set-up
// that cannot be had (no root, no engine, a host without iptables) is not
// an error: the provider says why in Abilities, and the faults that need
// it are unavailable with that reason.
type Provider interface {
	// Abilities says, for each ability a run may want (Abilities), why
	// this provider lacks it in this run, or "" when it has it. An
	// ability the run did not ask for may be missing with the reason
	// that it was not asked for.
	Abilities() map[string]string
	// Cluster returns the run's cluster of r's backend, not started.
	Cluster(r Run, n Nodes) (clusters.Cluster, error)
	// UsesShim takes the clock shim library lib, built on this host, for
	// the run's nodes; it returns false when the provider does not put it
	// beside its nodes itself, and run gives the nodes its own clocks
	// instead. Shim says whether it took it.
	UsesShim(lib string) bool
	Shim() (took bool)
	// Clocks returns the nodes' clocks when the provider moves them
	// itself (UsesShim), or nil; ClockReason says, once the nodes
	// started, why they cannot move, or "".
	Clocks() nemesis.ClockControl
	ClockReason() string
	// Cgroup returns the cgroup each worker starts in (its client host's
	// own address), or nil; NetNS the network namespace, or nil.
	Cgroup() func(int) string
	NetNS() func(int) string
	// StoreAddr is the address the resource store listens on for the
	// workers, or "" for the run's Unix socket.
	StoreAddr() string
	// Network returns the nemesis's network over the nodes of cl, or nil
	// when network faults are unavailable.
	Network(cl clusters.Cluster) nemesis.Network
	// Netem returns tc netem's delay over network, which the provider
	// has when Abilities says so; ProxyIP is the address a delaying TCP
	// proxy on this host listens on, as the workers reach it, when it has
	// not.
	Netem(network nemesis.Network) nemesis.Delayer
	ProxyIP() string
	// Describe says, for results.json, where the nodes and clients run,
	// the id of what the run made there that a killed driver would leave
	// (a network lab, a run's id on the hosts), and the nodes' image.
	Describe() (network, lab, image string)
	// Watch begins the measure of the hosts' own stalls as the workload
	// begins, and HostStalls returns it, nil when the provider has no
	// hosts of its own to measure; now is the history clock's reading.
	Watch()
	HostStalls(now time.Duration) *runstore.HostStalls
	// Lost says why the run lost control of some node's host (its nodes
	// ran on without the faults meant for them), or "".
	Lost() string
	// Close removes everything the provider set up, with ctx's budget.
	Close(ctx context.Context, lg *slog.Logger)
}

// OnThisMachine is what the providers whose nodes' hosts are not remote
// (local, docker) share: the clock shim is run's own, the store is on the
// run's socket, and there are no hosts to watch or lose.
type OnThisMachine struct{}

func (OnThisMachine) UsesShim(string) bool                          { return false }
func (OnThisMachine) Shim() bool                                    { return false }
func (OnThisMachine) Clocks() nemesis.ClockControl                  { return nil }
func (OnThisMachine) ClockReason() string                           { return "" }
func (OnThisMachine) StoreAddr() string                             { return "" }
func (OnThisMachine) Watch()                                        {}
func (OnThisMachine) HostStalls(time.Duration) *runstore.HostStalls { return nil }
func (OnThisMachine) Lost() string                                  { return "" }

// Def is one provider, written once in its folder: its name as --provider
// takes it, its settings and their check, whether its hosts take one run
// at a time, its set-up and its cleanup.
type Def struct {
	// Name is --provider's value; Doc says in a few words where its
	// nodes run, for the help.
	Name, Doc string
	// Rank places the provider in the help, the docs and the errors that
	// list the providers (packages initialize in the order of their
	// paths, not of their imports): the lowest is the default.
	Rank int
	// Namespaces says whether the run puts its nodes and clients into
	// network namespaces of this host when its faults need them (or --net
	// netns asks for them): only where the nodes are processes here.
	Namespaces bool
	// OneRunAtATime says that the provider's hosts serve one run at a
	// time (their servers listen on the ports the hosts are given): a
	// series of runs (debate, matrix) runs them one after another.
	OneRunAtATime bool
	// KeepsClusters says that a cluster the provider made for a run
	// whose set-up made nothing else (no network lab, no clock shim, no
	// sync records, no delaying proxy) needs nothing of that run's
	// Provider once started: a series of runs may keep it past the run's
	// Close and hand it to a later run (run.Clusters). Only a provider
	// whose nodes' logs are files of this host (clusters.Node.LogPath)
	// says so.
	KeepsClusters bool
	// Settings are the settings only this provider reads: flags of
	// `locktest run`, keys of results.json, in the help's platform group.
	// Set while another provider is chosen, they are refused.
	Settings []Setting
	// Check checks the provider's own settings, without the run's impl;
	// Validate checks them for the run r (its backend and parameters) when
	// r names this provider. Either may be nil.
	Check    func(v Values) error
	Validate func(r Run) error
	// Preflight reads what every run of a series would read (the ssh
	// provider's inventory), so that a series fails before its first run
	// rather than in each; nil when there is nothing to read.
	Preflight func(v Values) error
	// Setup makes the provider for run r: what cannot be had is a reason
	// in its Abilities, what is wrong an error; what was made before an
	// error is returned with it, to close.
	Setup func(ctx context.Context, r Run, lg *slog.Logger) (Provider, error)
	// Cleanup is what `locktest cleanup` does for the provider, or nil.
	Cleanup *Cleanup
}

// Cleanup clears what runs whose driver was killed left behind.
type Cleanup struct {
	// Flags are the settings cleanup takes for this provider, as flags of
	// `locktest cleanup` with --provider NAME. A provider without them is
	// cleared by every `locktest cleanup` without --provider.
	Flags []Setting
	// Clear removes what runs whose driver is gone left, and writes to w
	// what it removed (with dry, what it would remove, removing nothing).
	// An error in v (a missing or bad inventory, a host it cannot reach)
	// is a *SettingError.
	Clear func(ctx context.Context, w io.Writer, v Values, dry bool) error
}

// SettingError is an error in the settings a provider was given, not in
// what it did with them: the CLI exits 2 on it.
type SettingError struct{ Err error }

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// defs are the registered providers, by Rank: the first is the default.
var defs []Def

// Register adds a provider. It panics on a name or a rank registered
// twice, a provider without a name, a doc or a set-up, or a setting
// another provider declares: those are programming errors.
func Register(d Def) {
	if d.Name == "" || d.Doc == "" || d.Setup == nil {
		panic(fmt.Sprintf("provider %q: a name, a doc and a setup are required", d.Name))
	}
	for _, o := range defs {
		if o.Name == d.Name || o.Rank == d.Rank {
			panic(fmt.Sprintf("provider %s: name or rank %d registered twice", d.Name, d.Rank))
		}
		for _, s := range d.Settings {
			if o.Declares(s.Name) {
				panic(fmt.Sprintf("provider %s: setting %s is provider %s's", d.Name, s.Name, o.Name))
			}
		}
	}
	defs = append(defs, d)
	slices.SortFunc(defs, func(a, b Def) int { return cmp.Compare(a.Rank, b.Rank) })
}

// All returns the providers by Rank; the first is the default.
func All() []Def { return slices.Clone(defs) }

// Names returns the providers' names, by Rank.
func Names() []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

// Lookup returns the provider called name; "" is the default (the
// first).
func Lookup(name string) (Def, bool) {
	if len(defs) == 0 {
		return Def{}, false
	}
	name = cmp.Or(name, defs[0].Name)
	for _, d := range defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// Declares reports whether d declares the setting called name.
func (d Def) Declares(name string) bool {
	return slices.ContainsFunc(d.Settings, func(s Setting) bool { return s.Name == name })
}

// Foreign returns the error for v setting what only d reads, or nil when
// it sets none of d's settings; it is asked of every provider but the
// run's.
func (d Def) Foreign(v Values) error {
	var names []string
	set := false
	for _, s := range d.Settings {
		names = append(names, "--"+s.Name)
		set = set || v.IsSet(s)
	}
	if !set {
		return nil
	}
	verb := "need"
	if len(names) == 1 {
		verb = "needs"
	}
	return fmt.Errorf("%s %s --provider %s", AndList(names), verb, d.Name)
}

// Owner returns the provider that declares the setting called name.
func Owner(name string) (Def, bool) {
	for _, d := range defs {
		if d.Declares(name) {
			return d, true
		}
	}
	return Def{}, false
}

// AndList joins names as "a, b and c".
func AndList(names []string) string { return joinLast(names, " and ") }

// OrList joins names as "a, b or c".
func OrList(names []string) string { return joinLast(names, " or ") }

func joinLast(names []string, last string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	s := names[0]
	for _, n := range names[1 : len(names)-1] {
		s += ", " + n
	}
	return s + last + names[len(names)-1]
}

// Unanswered returns what is wrong with p's Abilities, one line each: an
// ability it does not answer for, one it lacks without a reason, one it
// says it lacks that is not in lack. The nemesis reports a fault that
// needs an ability unavailable with the provider's reason, never with an
// empty one; each provider's tests ask this of its own values.
func Unanswered(p Provider, lack ...string) []string {
	var out []string
	ab := p.Abilities()
	for _, a := range Abilities {
		why, ok := ab[a]
		switch {
		case !ok:
			out = append(out, "does not say whether it has "+a)
		case slices.Contains(lack, a) && why == "":
			out = append(out, "lacks "+a+" without a reason")
		case !slices.Contains(lack, a) && why != "":
			out = append(out, fmt.Sprintf("says it lacks %s (%q)", a, why))
		}
	}
	if len(ab) != len(Abilities) {
		out = append(out, fmt.Sprintf("answers for %d abilities, want %d: %v", len(ab), len(Abilities), ab))
	}
	return out
}
