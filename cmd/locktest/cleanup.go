package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/provider"
)

func newCleanupCmd() *cobra.Command {
	var dry bool
	var name string
	// flagValues are the values of each provider's cleanup flags, by
	// provider.
	flagValues := map[string]provider.Values{}
	c := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what crashed runs left: network namespaces (and the processes in them), links, iptables rules, containers and Docker networks",
		Long: `cleanup removes the network namespaces, veths, bridges and FORWARD rules
that runs made and could not remove because their driver was killed. It
finds them by the names locktest gives them (namespaces locktest-<lab>-*,
links lt<lab>*, rules commented locktest-<lab>) and spares the labs of runs
that are still going. Node and worker processes die with their driver (they
have a parent-death signal); any still inside a namespace is killed with it.

Under the docker provider, containers do not die with their driver: cleanup
removes the containers and Docker networks labelled locktest.run whose
driver (label locktest.owner-pid) is gone, and nothing else — not the
images locktest built, which later runs reuse.

A MariaDB node whose run folder is too deep for a socket address has its
socket in the temporary folder (locktest-mariadb-*.sock); cleanup removes
those that no server answers on.

With --provider ssh --inventory FILE, cleanup clears the inventory's hosts
instead: the run directories (<workdir>/locktest-<run>) whose owner file
names this control host and a driver that is gone, the redis-server each
started (by the pid in its pid file), and the iptables rules commented
locktest:<run>.

Either way it removes, on this host, the client addresses of ssh and docker
runs whose driver is gone: the addresses they added, their cgroups (and any
client process left in them) and their nat rules commented
locktest-clients:<run>.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, ctx := cmd.OutOrStdout(), cmd.Context()
			if name == "" {
				// Every provider whose leftovers need no settings to find.
				for _, d := range provider.All() {
					if d.Cleanup == nil {
						continue
					}
					if err := cleanupFlagsNeed(cmd, d); err != nil {
						return err
					}
				}
				for _, d := range provider.All() {
					if d.Cleanup != nil && len(d.Cleanup.Flags) == 0 {
						if err := d.Cleanup.Clear(ctx, w, flagValues[d.Name], dry); err != nil {
							return err
						}
					}
				}
				return cleanupClientAddrs(ctx, w, dry)
			}
			d, ok := provider.Lookup(name)
			if !ok || d.Cleanup == nil || len(d.Cleanup.Flags) == 0 {
				var with, without []string
				for _, d := range provider.All() {
					if d.Cleanup != nil && len(d.Cleanup.Flags) > 0 {
						with = append(with, d.Name)
					} else {
						without = append(without, d.Name)
					}
				}
				return usageError{fmt.Errorf("cleanup --provider %q: want %s (without it, cleanup clears what %s runs left)", name, provider.OrList(with), provider.AndList(without))}
			}
			if err := d.Cleanup.Clear(ctx, w, flagValues[d.Name], dry); err != nil {
				var se *provider.SettingError
				if errors.As(err, &se) {
					return usageError{se.Err}
				}
				return err
			}
			return cleanupClientAddrs(ctx, w, dry)
		},
	}
	c.Flags().BoolVarP(&dry, "dry-run", "n", false, "only list what would be removed")
	c.Flags().StringVar(&name, "provider", "", providersWithCleanupFlags()+": clear the hosts of --inventory instead (run directories, servers and iptables rules of runs whose driver is gone)")
	// Each provider's own flags of cleanup (the ssh provider's inventory).
	for _, d := range provider.All() {
		if d.Cleanup == nil {
			continue
		}
		vs := provider.Values{} // shared by the provider's flags
		for _, s := range d.Cleanup.Flags {
			c.Flags().Var(&cleanupFlag{s, &vs}, s.Name, s.Doc)
			if s.Kind == provider.Switch {
				c.Flags().Lookup(s.Name).NoOptDefVal = "true"
			}
		}
		flagValues[d.Name] = vs
	}
	return c
}

// cleanupFlag is a provider's flag of cleanup, whose value goes into its
// provider's values.
type cleanupFlag struct {
	s  provider.Setting
	vs *provider.Values
}

func (f *cleanupFlag) String() string {
	if f.vs == nil {
		return ""
	}
	return f.vs.String(f.s)
}
func (f *cleanupFlag) Set(text string) error { return f.vs.Set(f.s, text) }
func (f *cleanupFlag) Type() string          { return string(f.s.Kind) }

// cleanupFlagsNeed refuses the cleanup flags of d given without
// --provider d.
func cleanupFlagsNeed(cmd *cobra.Command, d provider.Def) error {
	var names []string
	set := false
	for _, s := range d.Cleanup.Flags {
		names = append(names, "--"+s.Name)
		set = set || cmd.Flags().Changed(s.Name)
	}
	if !set {
		return nil
	}
	return usageError{fmt.Errorf("%s need --provider %s", provider.AndList(names), d.Name)}
}

// providersWithCleanupFlags names the providers cleanup clears only when
// --provider names them, as the help lists them.
func providersWithCleanupFlags() string {
	var with []string
	for _, d := range provider.All() {
		if d.Cleanup != nil && len(d.Cleanup.Flags) > 0 {
			with = append(with, d.Name)
		}
	}
	return provider.OrList(with)
}

// cleanupClientAddrs removes the client addresses, cgroups and nat rules
// of ssh and docker runs whose driver is gone, on this host.
func cleanupClientAddrs(ctx context.Context, w io.Writer, dry bool) error {
	left, err := clientaddr.Cleanup(ctx, dry)
	verb := "removed"
	if dry {
		verb = "would remove"
	}
	for _, l := range left {
		fmt.Fprintf(w, "%s the client addresses of run %s (added %s; owner %s)\n", verb, l.RunID, orNone(l.Added), orNone(nonEmpty(l.Owner)))
	}
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}
