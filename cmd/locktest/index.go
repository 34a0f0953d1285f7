package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/reports"
)

func newIndexCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "index [STORE]",
		Short: "Rewrite STORE/index.html, the page that links every debate, matrix, margin search, shrink and run of the store (default store: store)",
		Long: `index scans STORE (default "store", the default of run --store) and rewrites
STORE/index.html, one page over the store, each part newest first:
  - the debates (folders with scoreboard.json, STORE/debate/<time>/ by
    default), with the tally of their verdicts;
  - the matrices (folders with matrix.json), with their cells by status;
  - the margin searches (STORE/<name>.margin/<time>/), with the boundary
    found and the stated bound;
  - the shrinks (STORE/<name>.shrink/<time>/), with the sizes before and
    after and how often the smallest schedule failed again;
  - every other run (folders with results.json), with its verdicts, whether
    they were the ones expected, and a link to its report.
The runs a margin search or a shrink made (its trials, candidates and
confirmations, which run with --expect invalid) are listed under their
search and not counted: one that held is the search's answer, not an alarm.
A file that cannot be read is listed with its error.

index also rewrites each shrink's page, shrink.html beside its shrink.json.
A run rewrites the index of its store when it ends, and a shrink its page
and the index; index is for a store whose runs were checked again, copied
in or deleted.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			root := "store"
			if len(a) == 1 {
				root = a[0]
			}
			pages, perr := reports.WriteShrinkPages(root)
			if err := reports.WriteIndex(root); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "index: %s\n", filepath.Join(root, reports.IndexFile))
			for _, p := range pages {
				fmt.Fprintf(cmd.OutOrStdout(), "shrink: %s\n", p)
			}
			if perr != nil {
				// The index lists such a shrink with its error.
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", perr)
			}
			return nil
		},
	}
}

// writeShrinkPage writes shrink.html into the shrink's folder dir of the
// store, and the store's index, when a shrink ends, however it ends: it
// says on out where the page is, or why it or the index could not be
// written (neither changes the shrink's exit code). A search that ended
// before its log was written gets no page, and no word of it.
func writeShrinkPage(out io.Writer, dir, store string) {
	switch err := reports.WriteShrinkHTML(dir, store); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		fmt.Fprintf(out, "warning: %s: %v\n", reports.ShrinkHTMLFile, err)
	default:
		fmt.Fprintf(out, "page: %s\n", filepath.Join(dir, reports.ShrinkHTMLFile))
	}
	if err := reports.WriteIndex(store); err != nil {
		fmt.Fprintf(out, "warning: %s: %v\n", reports.IndexFile, err)
	}
}
