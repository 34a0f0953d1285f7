package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/reports"
)

func newIndexCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "index [STORE]",
		Short: "Rewrite STORE/index.html, the list of every stored run with its verdicts (default store: store)",
		Long: `index scans STORE (default "store", the default of run --store) for stored runs
(folders with a results.json), and rewrites STORE/index.html: every run, newest
first, with its verdicts and a link to its report. A run rewrites the index of
its store when it ends; index is for a store whose runs were checked again,
copied in or deleted.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			root := "store"
			if len(a) == 1 {
				root = a[0]
			}
			if err := reports.WriteIndex(root); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "index: %s\n", filepath.Join(root, reports.IndexFile))
			return nil
		},
	}
}
