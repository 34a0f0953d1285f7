package main

import (
	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/etcdnode"
)

// newNodeCmd is the hidden `locktest node` command: the server programs that
// locktest runs itself, as child processes of a cluster provider.
func newNodeCmd() *cobra.Command {
	node := &cobra.Command{
		Use:    "node",
		Short:  "Run a server node that locktest embeds (internal)",
		Hidden: true,
	}
	node.AddCommand(&cobra.Command{
		Use:                "etcd [flags]",
		Short:              "Run one embedded etcd member, started by the local provider (internal)",
		Hidden:             true,
		DisableFlagParsing: true, // etcdnode.Main parses its own flags
		RunE: func(cmd *cobra.Command, args []string) error {
			return etcdnode.Main(cmd.Context(), args)
		},
	})
	node.AddCommand(newNodeDurableCmd())
	return node
}
