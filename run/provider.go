package run

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	// The one place the providers are named: each registers itself.
	_ "github.com/locktest/locktest/clusters/all"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
)

// Run knows the providers only through their registry
// (clusters/provider): where a run's nodes run (processes on this host,
// containers, an inventory's hosts), their settings, their check and
// their set-up are each provider's own, in its folder under clusters.
// Run names no provider: a new provider is one folder and one import in
// clusters/all.

// Providers are the values of Config.Provider, in the order of the help;
// the first is the default.
var Providers = provider.Names()

// providersHelp is --provider's help: each provider and where its nodes
// run.
func providersHelp() string {
	var docs []string
	for _, d := range provider.All() {
		docs = append(docs, d.Name+": "+d.Doc)
	}
	return "where the nodes run: " + strings.Join(Providers, " or ") + " (" + strings.Join(docs, "; ") + "; see docs/providers.md)"
}

// ProviderNamed returns the provider called name ("" is the default), or
// the error for a name no provider has.
func ProviderNamed(name string) (provider.Def, error) {
	d, ok := provider.Lookup(name)
	if !ok {
		return provider.Def{}, setupErr("--provider must be %s, got %q", orList(Providers), name)
	}
	return d, nil
}

// providerOf returns the definition of the provider c names.
func (c *Config) providerOf() (provider.Def, error) { return ProviderNamed(c.Provider) }

// providerRun is what c's provider is told of a run of impl.
func (c *Config) providerRun(impl impls.Impl) provider.Run {
	return provider.Run{Impl: c.Impl, Backend: impl.Backend, Nodes: impl.Nodes, Clients: c.Clients,
		Net: c.Net, Subnet: c.Subnet,
		NeedsNetwork: nemesis.Needs(c.faultParts(), nemesis.NeedNetwork),
		NeedsDelay:   nemesis.Needs(c.faultParts(), nemesis.NeedDelay),
		Persistence:  c.Persistence, Params: c.ClusterParams,
		NodeCommand: c.NodeCommand, NodeEnv: c.NodeEnv, Settings: c.ProviderSettings}
}

// checkForeign refuses the settings of another provider than c's: those
// only some provider reads.
func (c *Config) checkForeign(def provider.Def) error {
	for _, d := range provider.All() {
		if d.Name == def.Name {
			continue
		}
		if err := d.Foreign(c.ProviderSettings); err != nil {
			return &SetupError{err}
		}
	}
	return nil
}

// validateProvider checks Config.Provider and the settings only some
// provider reads: those of another provider than c's are refused, and
// c's own provider checks its own for impl.
func (c *Config) validateProvider(impl impls.Impl) error {
	def, err := c.providerOf()
	if ferr := c.checkForeign(def); ferr != nil {
		return ferr
	}
	if err != nil {
		return err
	}
	if def.Validate != nil {
		if err := def.Validate(c.providerRun(impl)); err != nil {
			return &SetupError{err}
		}
	}
	return nil
}

// UseProvider sets c's provider, and its inventory when one is given, for
// a series of runs (a debate) that reaches a provider's hosts only through
// --inventory. An unknown provider, a provider that needs an inventory
// without one, and an inventory given to a provider that has none are
// errors that name the flag; CheckProvider then reads the inventory.
func (c *Config) UseProvider(name, inventory string) error {
	c.Provider = name
	def, err := ProviderNamed(name)
	switch {
	case !slices.Contains(Providers, name):
		return fmt.Errorf("--provider must be %s, got %q", strings.Join(Providers, " or "), name)
	case inventory == "" && def.Declares("inventory"):
		return fmt.Errorf("--provider %s needs --inventory FILE", def.Name)
	case inventory != "" && !def.Declares("inventory"):
		owner, _ := ProviderOf("inventory")
		return fmt.Errorf("--inventory needs --provider %s", owner)
	case err != nil:
		return err
	}
	if inventory != "" {
		if err := c.Set("inventory", inventory); err != nil {
			return err
		}
	}
	return nil
}

// CheckProvider checks c's provider and its settings before a series of
// runs (a debate): the settings of another provider are refused, c's
// provider checks its own without an impl, and reads what every run would
// read (the ssh provider's inventory).
func (c *Config) CheckProvider() error {
	def, err := c.providerOf()
	if err != nil {
		return err
	}
	if err := c.checkForeign(def); err != nil {
		return err
	}
	for _, check := range []func(provider.Values) error{def.Check, def.Preflight} {
		if check != nil {
			if err := check(c.ProviderSettings); err != nil {
				return &SetupError{err}
			}
		}
	}
	return nil
}

// ProviderArgs are the flags of `locktest run` that put a run where c's
// nodes run: --provider, unless it is the default, and the provider's
// settings c gives. A command that reproduces one of c's runs adds them.
func (c *Config) ProviderArgs() []string {
	def, err := c.providerOf()
	if err != nil {
		return nil
	}
	var a []string
	if def.Name != Providers[0] {
		a = append(a, "--provider", def.Name)
	}
	for _, s := range def.Settings {
		if !c.ProviderSettings.IsSet(s) {
			continue
		}
		if s.Kind == provider.Switch {
			a = append(a, "--"+s.Name)
		} else {
			a = append(a, "--"+s.Name, c.ProviderSettings.String(s))
		}
	}
	return a
}

// providerRows are an entry for each provider's own settings
// (provider.Def.Settings), in the platform group, in the providers'
// order: its flag and results key are its name, its help its Doc, its
// value Config.ProviderSettings'.
func providerRows() []Setting {
	var rows []Setting
	for _, d := range provider.All() {
		for _, ps := range d.Settings {
			rows = append(rows, Setting{Name: ps.Name, Group: GroupPlatform, Doc: ps.Doc,
				Field: func(c *Config) Value { return c.ProviderSettings.Flag(ps) }})
		}
	}
	return rows
}

// makeProvider makes the run's provider; its errors are setup errors.
func makeProvider(ctx context.Context, cfg Config, impl impls.Impl, lg *slog.Logger) (provider.Provider, error) {
	def, err := cfg.providerOf()
	if err != nil {
		return nil, err
	}
	p, err := def.Setup(ctx, cfg.providerRun(impl), lg)
	if err != nil {
		return p, &SetupError{err}
	}
	return p, nil
}

// Parallel returns how many runs of a series (a debate, a matrix) go at
// once on the provider called name: n, or 1 where its hosts take one run
// at a time (provider.Def.OneRunAtATime), which refuses an n above 1 that
// was given (--parallel). A name no provider has is Config.Validate's to
// refuse.
func Parallel(name string, n int, given bool) (int, error) {
	def, err := ProviderNamed(name)
	switch {
	case err != nil || !def.OneRunAtATime:
		return n, nil
	case given && n > 1:
		return 1, setupErr("--parallel %d: the %s provider's hosts take one run at a time", n, def.Name)
	}
	return 1, nil
}

// orList joins names as "a, b or c".
func orList(names []string) string { return provider.OrList(names) }

// ProviderOf returns the name of the provider that declares the setting
// called name, for errors that say which provider a flag needs.
func ProviderOf(name string) (string, bool) {
	d, ok := provider.Owner(name)
	return d.Name, ok
}
