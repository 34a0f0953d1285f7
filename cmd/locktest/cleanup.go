package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/local/netlab"
)

func newCleanupCmd() *cobra.Command {
	var dry bool
	c := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what crashed runs left: network namespaces (and the processes in them), links, iptables rules",
		Long: `cleanup removes the network namespaces, veths, bridges and FORWARD rules
that runs made and could not remove because their driver was killed. It
finds them by the names locktest gives them (namespaces locktest-<lab>-*,
links lt<lab>*, rules commented locktest-<lab>) and spares the labs of runs
that are still going. Node and worker processes die with their driver (they
have a parent-death signal); any still inside a namespace is killed with it.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			if err := netlab.Check(); err != nil {
				fmt.Fprintf(w, "nothing to do: %v\n", err)
				return nil
			}
			all, err := netlab.Find(cmd.Context())
			if err != nil {
				return fmt.Errorf("cleanup: %w", err)
			}
			left := all.Orphans()
			if dry {
				printLeft(w, "would remove", left)
				return nil
			}
			removed, err := netlab.Cleanup(cmd.Context())
			printLeft(w, "removed", removed)
			if err != nil {
				return fmt.Errorf("cleanup: %w", err)
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&dry, "dry-run", "n", false, "only list what would be removed")
	return c
}

func printLeft(w interface{ Write([]byte) (int, error) }, verb string, l netlab.Leftovers) {
	if l.Empty() {
		fmt.Fprintln(w, "nothing left behind by earlier runs")
		return
	}
	for _, x := range []struct {
		what  string
		names []string
	}{{"namespaces", l.Namespaces}, {"links", l.Links}, {"iptables rules", l.Rules}} {
		if len(x.names) > 0 {
			fmt.Fprintf(w, "%s %d %s: %s\n", verb, len(x.names), x.what, strings.Join(x.names, ", "))
		}
	}
}
