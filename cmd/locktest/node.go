package main

import (
	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/nodeprog"
)

// newNodeCmd is the hidden `locktest node` command: the server programs that
// locktest runs itself, as child processes of a cluster provider.
func newNodeCmd() *cobra.Command {
	node := &cobra.Command{
		Use:    "node",
		Short:  "Run a server node that locktest embeds (internal)",
		Hidden: true,
	}
	for _, name := range nodeprog.Names() {
		srv, _ := nodeprog.Of(name)
		node.AddCommand(&cobra.Command{
			Use:                name + " [flags]",
			Short:              srv.Short,
			Hidden:             true,
			DisableFlagParsing: true, // the server parses its own flags
			RunE: func(cmd *cobra.Command, args []string) error {
				return nodeprog.Run(cmd.Context(), name, args)
			},
		})
	}
	node.AddCommand(newNodeDurableCmd())
	return node
}
