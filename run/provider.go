package run

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
)

// Abilities a provider has or lacks in a run (provider.abilities).
const (
	// AbilityNetwork is the network faults: cuts and loss between the
	// nodes and the client hosts.
	AbilityNetwork = "network"
	// AbilityNetem is delaying a node's packets with tc netem; without
	// it the delay fault uses a TCP proxy on this host.
	AbilityNetem = "netem"
	// AbilitySyncRecords is a node recording what it syncs (under the
	// clock shim), which power-loss needs.
	AbilitySyncRecords = "sync-records"
)

// provider is where a run's nodes run, as run sees it: on this machine
// (local), in containers (docker) or on an inventory's hosts (ssh). Run
// makes no other distinction between them: a provider makes the cluster,
// gives the nemesis its network, tells where each worker starts, says what
// it set up for results.json, and removes it all. Set-up that cannot be
// had (no root, no engine, a host without iptables) is not an error: the
// provider says why in abilities, and the faults that need it are
// unavailable with that reason.
type provider interface {
	// name is the provider's name as --provider takes it.
	name() string
	// abilities says, for each ability a run may want (the Ability
	// constants), why this provider lacks it in this run, or "" when it
	// has it. An ability the run did not ask for may be missing with the
	// reason that it was not asked for.
	abilities() map[string]string
	// cluster returns the run's cluster of impl's backend, not started.
	// p is the run's platform (the clock shim its nodes preload).
	cluster(cfg Config, impl impls.Impl, dir string, p *platform, lg *slog.Logger) (clusters.Cluster, error)
	// usesShim takes the clock shim library lib, built on this host, for
	// the run's nodes (which record their syncs under it when the
	// platform's syncs is set); it returns false when the provider does
	// not put it beside its nodes itself, and run gives the nodes its own
	// clocks (clockshim.New) instead. shim says whether it took it.
	usesShim(lib string) bool
	shim() (took bool)
	// clocks returns the nodes' clocks when the provider moves them
	// itself (usesShim), or nil; clockReason says, once the nodes
	// started, why they cannot move, or "".
	clocks() nemesis.ClockControl
	clockReason() string
	// cgroup returns the cgroup each worker starts in (its client host's
	// own address), or nil; netNS the network namespace, or nil.
	cgroup() func(int) string
	netNS() func(int) string
	// network returns the nemesis's network over the nodes of cl, or nil
	// when network faults are unavailable.
	network(cl clusters.Cluster) nemesis.Network
	// netem returns tc netem's delay over network, which the provider
	// has when abilities says so; proxyIP is the address a delaying TCP
	// proxy on this host listens on, as the workers reach it, when it
	// has not.
	netem(network nemesis.Network) nemesis.Delayer
	proxyIP() string
	// describe says, for results.json, where the nodes and clients run,
	// the id of what the run made there that a killed driver would leave
	// (a network lab, a run's id on the hosts), and the nodes' image.
	describe() (network, lab, image string)
	// watch begins the measure of the hosts' own stalls as the workload
	// begins, and hostStalls returns it, nil when the provider has no
	// hosts of its own to measure; now is the history clock's reading.
	watch()
	hostStalls(now time.Duration) *runstore.HostStalls
	// lost says why the run lost control of some node's host (its nodes
	// ran on without the faults meant for them), or "".
	lost() string
	// close removes everything the provider set up, with ctx's budget.
	close(ctx context.Context, lg *slog.Logger)
}

// onThisMachine is what the providers whose nodes' hosts are not remote
// (local, docker) share: the clock shim is run's own, and there are no
// hosts to watch or lose.
type onThisMachine struct{}

func (onThisMachine) usesShim(string) bool                          { return false }
func (onThisMachine) shim() bool                                    { return false }
func (onThisMachine) clocks() nemesis.ClockControl                  { return nil }
func (onThisMachine) clockReason() string                           { return "" }
func (onThisMachine) watch()                                        {}
func (onThisMachine) hostStalls(time.Duration) *runstore.HostStalls { return nil }
func (onThisMachine) lost() string                                  { return "" }

var (
	_ provider = (*localPlatform)(nil)
	_ provider = (*dockerPlatform)(nil)
	_ provider = (*sshPlatform)(nil)
)

// providerDef is how run knows one provider, written once: its name as
// --provider takes it, the settings of Config only it reads, their check,
// and its set-up. Run names no provider anywhere else: a new provider is
// one providerDef in providerDefs (and its platform type).
type providerDef struct {
	// name is --provider's value; doc says in a few words where its
	// nodes run, for the help.
	name, doc string
	// namespaces says whether the run puts its nodes and clients into
	// network namespaces of this host when its faults need them (or
	// --net netns asks for them): only where the nodes are processes
	// here.
	namespaces bool
	// foreign returns the error for c setting what only this provider
	// reads (its flags), or nil when c sets none of it; it is asked when
	// c names another provider.
	foreign func(c *Config) error
	// validate checks this provider's own settings for impl, when c
	// names it.
	validate func(c *Config, impl impls.Impl) error
	// setup makes the provider for a run of impl: what cannot be had is
	// a reason in its abilities, what is wrong a setup error; what was
	// made before an error is returned with it, to close.
	setup func(ctx context.Context, cfg Config, impl impls.Impl, p *platform, lg *slog.Logger) (provider, error)
}

// providerDefs are the providers, in the order the help and the docs list
// them; the first is the default.
var providerDefs = []providerDef{localDef, dockerDef, sshDef}

// Providers are the values of Config.Provider, in providerDefs' order.
var Providers = func() []string {
	names := make([]string, len(providerDefs))
	for i, d := range providerDefs {
		names[i] = d.name
	}
	return names
}()

// providersHelp is --provider's help: each provider and where its nodes
// run.
func providersHelp() string {
	docs := make([]string, len(providerDefs))
	for i, d := range providerDefs {
		docs[i] = d.name + ": " + d.doc
	}
	return "where the nodes run: " + strings.Join(Providers, " or ") + " (" + strings.Join(docs, "; ") + "; see docs/providers.md)"
}

// providerOf returns the definition of the provider c names ("" is the
// default, the first), or the setup error for a name no provider has.
func (c *Config) providerOf() (providerDef, error) {
	name := cmp.Or(c.Provider, providerDefs[0].name)
	for _, d := range providerDefs {
		if d.name == name {
			return d, nil
		}
	}
	return providerDef{}, setupErr("--provider must be %s, got %q", orList(Providers), c.Provider)
}

// validateProvider checks Config.Provider and the settings only some
// provider reads: those of another provider than c's are refused, and
// c's own provider checks its own for impl.
func (c *Config) validateProvider(impl impls.Impl) error {
	def, err := c.providerOf()
	for _, d := range providerDefs {
		if d.name == def.name || d.foreign == nil {
			continue
		}
		if err := d.foreign(c); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if def.validate == nil {
		return nil
	}
	return def.validate(c, impl)
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	s := names[0]
	for _, n := range names[1 : len(names)-1] {
		s += ", " + n
	}
	return s + " or " + names[len(names)-1]
}
