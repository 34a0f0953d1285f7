package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/scenarios"
)

func newMergeCmd() *cobra.Command {
	var out, junit, findings, trackRecord, jsonOut, maxRateText string
	var matrixMD, baseline, compare, bugsFile string
	c := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Join the scoreboards (or matrix stores) of sharded runs into one",
		Long: `merge joins what the shards of one debate or matrix made — each run with
--shard I/N, on one machine or many — into one scoreboard or matrix, as one
unsharded run of the same seeds would have made it.

Debates of different scenarios join too (the debates of a bug catalogue's
bugs, one --only ID each, say): their rows and their bugs are put together.

For a debate, each DIR is a debate's output folder (it holds scoreboard.json)
or a scoreboard.json itself; the rows are matched by scenario and rescored
over every shard's seeds. A seed found in two shards is an error: the shards
overlap. For a matrix, each DIR is the store of a sharded matrix (it holds
matrix.json); the stored runs of all of them are aggregated into one
matrix.

Exit codes are the debate's and the matrix's: 0 as expected, 1 an unexpected
verdict (or, with --baseline, a cell worse than the baseline), 3 inconclusive,
2 bad usage or an unreadable input.`,
		Example: `  locktest merge --out board shard1 shard2 shard3 shard4
  locktest merge --out matrix --md docs/matrix.md mstore1 mstore2`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			maxRate, err := parseMaxRate(maxRateText)
			if err != nil {
				return err
			}
			kinds := map[string][]string{}
			for _, d := range dirs {
				k, err := reports.HeldIn(d)
				if err != nil {
					return usageError{fmt.Errorf("merge: %v", err)}
				}
				kinds[k] = append(kinds[k], d)
			}
			if len(kinds) > 1 {
				return usageError{fmt.Errorf("merge: %s are scoreboards and %s are matrix stores; merge one kind at a time",
					strings.Join(kinds[reports.HoldsScoreboard], ", "), strings.Join(kinds[reports.HoldsMatrixStore], ", "))}
			}
			isMatrix := len(kinds[reports.HoldsMatrixStore]) > 0
			switch {
			case isMatrix && findings != "":
				return usageError{errors.New("--findings is for scoreboards; a matrix takes --md")}
			case !isMatrix && matrixMD != "":
				return usageError{errors.New("--md is for matrix stores; a scoreboard takes --findings")}
			case !isMatrix && baseline != "":
				return usageError{errors.New("--baseline is for matrix stores; a scoreboard has none")}
			case isMatrix && trackRecord != "":
				return usageError{errors.New("--track-record is for scoreboards of public bugs; a matrix takes --md")}
			case isMatrix && bugsFile != "":
				return usageError{errors.New("--bugs is for scoreboards; a matrix has no bugs")}
			case isMatrix && compare != "":
				return usageError{errors.New("--compare is for scoreboards; a matrix takes --baseline")}
			}
			var other *reports.Scoreboard
			if compare != "" {
				b, err := scenarios.ReadBoard(compare)
				if err != nil {
					return usageError{fmt.Errorf("--compare: %v", err)}
				}
				other = &b
			}
			// Every output must be writable before anything is read or
			// written.
			if out == "" {
				out = "merged"
			}
			if err := run.CreatableDir(out); err != nil {
				return usageError{fmt.Errorf("--out: %v", err)}
			}
			if err := run.CheckOutputs(run.Output{Flag: "--junit", Path: junit}, run.Output{Flag: "--findings", Path: findings},
				run.Output{Flag: "--json", Path: jsonOut}, run.Output{Flag: "--md", Path: matrixMD}, run.Output{Flag: "--track-record", Path: trackRecord}); err != nil {
				return usageError{err}
			}
			var cat scenarios.Catalogue
			if bugsFile != "" {
				if cat, err = scenarios.LoadFiles([]string{bugsFile}); err != nil {
					return usageError{fmt.Errorf("--bugs: %v", err)}
				}
			}
			if isMatrix {
				return mergeMatrix(cmd, dirs, out, matrixMD, jsonOut, baseline, junit)
			}
			board, err := scenarios.MergeBoards(dirs, out, maxRate, commandLine())
			if err != nil {
				return usageError{fmt.Errorf("merge: %v", err)}
			}
			if bugsFile != "" {
				board, err = scenarios.AttachBugs(board, cat)
				if err != nil {
					return usageError{fmt.Errorf("--bugs: %v", err)}
				}
				// The debates ran other files: the board is this merge's,
				// and each seed keeps the command that made it.
				board.Command = commandLine()
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return usageError{fmt.Errorf("--out: %v", err)}
			}
			if other != nil {
				c := reports.CompareScoreboards(board, *other)
				board.Compared = &c
			}
			if err := scenarios.WriteBoard(out, junit, findings, jsonOut, board); err != nil {
				return err
			}
			if trackRecord != "" {
				if err := scenarios.WriteTrackRecord(trackRecord, board); err != nil {
					return usageError{err}
				}
			}
			scenarios.WriteBoardText(cmd.OutOrStdout(), out, board)
			if c := board.Compared; c != nil {
				scenarios.WriteComparisonText(cmd.OutOrStdout(), *c)
				if n := c.Disagreements(); n > 0 {
					return verdictError{fmt.Errorf("%d scenarios disagree with %s", n, compare)}
				}
			}
			return boardOutcome(board, len(board.Rows), false)
		},
	}
	f := c.Flags()
	f.StringVar(&out, "out", "", "folder of the merged scoreboard or matrix pages (default ./merged)")
	f.StringVar(&jsonOut, "json", "", "also write the merged scoreboard or matrix as JSON here")
	f.StringVar(&junit, "junit", "", "also write the merged scoreboard or matrix as JUnit XML here")
	f.StringVar(&findings, "findings", "", "also write the merged scoreboard as Markdown without run links here (docs/findings.md)")
	f.StringVar(&trackRecord, "track-record", "", "also write the track record of the public bugs the merged scoreboards reproduce as Markdown here (docs/track-record.md)")
	f.StringVar(&bugsFile, "bugs", "", "a scenario file with a bugs list (scenarios/bugs.yaml): the rows of its scenarios name their bugs, for debates made from another file of the same scenarios")
	f.StringVar(&maxRateText, "max-rate", "15%", "a safe scenario is held when the one-sided 95% upper bound of its violation rate is below this")
	f.StringVar(&matrixMD, "md", "", "also write the merged matrix's Markdown here (docs/matrix.md)")
	f.StringVar(&baseline, "baseline", "", "compare the merged matrix with this matrix.json and exit 1 when a cell got worse")
	f.StringVar(&compare, "compare", "", "set the scoreboard beside another of the same scenarios (its scoreboard.json or folder), e.g. one made with --parallel 1: exit 1 when they disagree")
	return c
}
