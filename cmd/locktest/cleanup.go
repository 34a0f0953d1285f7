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
	flags, values := provider.CleanupFlags()
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
			if err := provider.Clear(ctx, w, name, values, cmd.Flags().Changed, dry); err != nil {
				var se *provider.SettingError
				if errors.As(err, &se) {
					return usageError{se.Err}
				}
				return err
			}
			return cleanupClientAddrs(ctx, w, dry)
		},
	}
	with, _ := provider.ClearedAlone()
	c.Flags().BoolVarP(&dry, "dry-run", "n", false, "only list what would be removed")
	c.Flags().StringVar(&name, "provider", "", provider.OrList(with)+": clear the hosts of --inventory instead (run directories, servers and iptables rules of runs whose driver is gone)")
	for _, f := range flags { // each provider's own flags of cleanup (the ssh provider's inventory)
		if fl := c.Flags().VarPF(f, f.Name, "", f.Doc); f.IsBoolFlag() {
			fl.NoOptDefVal = "true"
		}
	}
	return c
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
		fmt.Fprintf(w, "%s %s\n", verb, l)
	}
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}
