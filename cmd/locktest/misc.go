package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/workloads"
)

func newListCmd() *cobra.Command {
	var seeded bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the lock implementations, faults and resource modes",
		Long: `list prints the lock implementations, faults and resource modes.

--seeded prints instead the zoo: correct recipes with one bug planted each,
which measure how well the harness finds bugs (docs/seeded-bugs.md). They
run only when named (locktest run --impl, locktest matrix --impls), never in
a default set.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			if seeded {
				fmt.Fprintln(w, "seeded impls (one bug each, run only when named):")
				for _, n := range impls.SeededNames() {
					i, _ := impls.Lookup(n)
					fmt.Fprintf(w, "  %-28s %d×%s, a variant of %s. Bug: %s.\n", n, i.Nodes, i.Backend, i.SeededFrom, i.Seeded)
					if len(i.Points) > 0 {
						fmt.Fprintf(w, "  %-28s pause points: %s\n", "", strings.Join(i.Points, ", "))
					}
				}
				return nil
			}
			fmt.Fprintln(w, "impls:")
			for _, n := range impls.Names() {
				i, _ := impls.Lookup(n)
				fenced := "no fencing token"
				if i.Fenced {
					fenced = "fencing token"
				}
				fmt.Fprintf(w, "  %-20s %d×%s, %s. %s\n", n, i.Nodes, i.Backend, fenced, i.Doc)
				if len(i.Points) > 0 {
					fmt.Fprintf(w, "  %-20s pause points: %s\n", "", strings.Join(i.Points, ", "))
				}
				if i.Notices != "" {
					fmt.Fprintf(w, "  %-20s lost notices: when %s\n", "", i.Notices)
				}
			}
			fmt.Fprintln(w, "faults:")
			for _, s := range nemesis.Specs() {
				fmt.Fprintf(w, "  %-20s [%s] %s (heal: %s).\n", s.Name, s.Family, s.Doc, s.Heal)
			}
			fmt.Fprintln(w, "resource modes:")
			for _, m := range []workloads.Mode{workloads.ModeNone, workloads.ModeFenced, workloads.ModeCheckAndSet, workloads.ModeEtcdGuarded} {
				fmt.Fprintf(w, "  %s\n", m)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&seeded, "seeded", false, "list the seeded impls (the zoo of planted bugs) instead")
	return c
}

func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "worker",
		Short:  "Run one lock client, driven over stdin/stdout by `locktest run` (internal)",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workloads.RunWorker(cmd.Context(), os.Stdin, os.Stdout); err != nil {
				return fmt.Errorf("worker: %w", err)
			}
			return nil
		},
	}
}
