package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/scenarios"
)

func newDebateCmd() *cobra.Command {
	var files, only []string
	var seeds int
	var seedBase int64
	var until, list, q bool
	var store, out, junit, findings, provider, inventory string
	c := &cobra.Command{
		Use:   "debate",
		Short: "Run the scenario catalogue (the Redlock debate's claims) over several seeds and write a scoreboard",
		Long: `debate runs every scenario of the catalogue — each claim of the Kleppmann /
antirez debate and of the lock-selection articles, with what each side
predicts — over several seeds, and writes scoreboard.html and scoreboard.md:
per claim the violation rate with its 95% Wilson interval, the time to the
first violation, and a verdict (reproduced, not reproduced, inconclusive).

Exit codes: 0 every scenario reproduced, 1 some did not or were
inconclusive, 2 bad usage or a broken scenario file.`,
		Example: `  locktest debate                          # the whole catalogue, 3 seeds each
  locktest debate --only 2,redlock-control --seeds 10
  locktest debate --only redlock-clock-jump --seeds 10 --until-reproduced
  locktest debate --scenarios my.yaml --junit debate.xml
  locktest debate --only etcd-pause --provider ssh --inventory lab/lab.yaml`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			all := scenarios.Builtin()
			if len(files) > 0 {
				all = nil
				for _, f := range files {
					s, err := scenarios.Load(f)
					if err != nil {
						return usageError{fmt.Errorf("--scenarios: %v", err)}
					}
					all = append(all, s...)
				}
			}
			picked, err := scenarios.Select(all, only)
			if err != nil {
				return usageError{fmt.Errorf("--only: %v", err)}
			}
			if list {
				printCatalogue(cmd.OutOrStdout(), picked)
				return nil
			}
			if seeds < 1 {
				return usageError{fmt.Errorf("--seeds must be at least 1, got %d", seeds)}
			}
			switch {
			case !slices.Contains(run.Providers, provider):
				return usageError{fmt.Errorf("--provider must be %s, got %q", strings.Join(run.Providers, " or "), provider)}
			case provider == run.ProviderSSH && inventory == "":
				return usageError{errors.New("--provider ssh needs --inventory FILE")}
			case provider != run.ProviderSSH && inventory != "":
				return usageError{errors.New("--inventory needs --provider ssh")}
			case inventory != "":
				// A bad inventory would make every scenario inconclusive.
				if _, err := sshp.LoadInventory(inventory); err != nil {
					return usageError{fmt.Errorf("--inventory: %v", err)}
				}
			}
			silent := quiet(cmd.Flags(), q)
			started := time.Now()
			// Every output must be writable before the first run: a
			// debate takes minutes, and its results must not be lost at
			// the end.
			for _, o := range []struct{ flag, path string }{{"--junit", junit}, {"--findings", findings}} {
				if o.path == "" {
					continue
				}
				if err := writableFile(o.path); err != nil {
					return usageError{fmt.Errorf("%s: %v", o.flag, err)}
				}
			}
			outFlag := "--out"
			if out == "" {
				out, outFlag = filepath.Join(store, "debate", started.Format("20060102T150405")), "--store"
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return usageError{fmt.Errorf("%s: %v", outFlag, err)}
			}
			if err := writableDir(out); err != nil {
				return usageError{fmt.Errorf("%s: %v", outFlag, err)}
			}
			base := run.DefaultConfig()
			base.StoreDir = store
			base.Provider, base.SSH.Inventory = provider, inventory
			opt := scenarios.Options{Base: base, UntilReproduced: until}
			for i := 0; i < seeds; i++ {
				opt.Seeds = append(opt.Seeds, seedBase+int64(i))
			}
			total, done := len(picked)*seeds, 0
			errw := cmd.ErrOrStderr()
			opt.Progress = func(s scenarios.Scenario, r scenarios.RunResult) {
				done++
				if silent {
					return
				}
				what := r.Outcome
				if what == "" {
					what = "inconclusive: " + r.Reason
				}
				if len(r.Kinds) > 0 {
					what += " (" + reports.KindsText(r.Kinds) + ")"
				}
				fmt.Fprintf(errw, "[%*d/%d] %s seed %d: %s, %.0fs\n", len(fmt.Sprint(total)), done, total, s.Name, r.Seed, what, r.Seconds)
			}
			board := reports.Scoreboard{
				Date: started.UTC().Format("2006-01-02 15:04 UTC"), Commit: runstore.Commit(cmd.Context()), Machine: runstore.Machine(),
				Seeds: seeds, Command: "locktest " + strings.Join(os.Args[1:], " "),
			}
			var runErr error
			for _, s := range picked {
				res, err := scenarios.Run(cmd.Context(), s, opt)
				if len(res) > 0 {
					board.Rows = append(board.Rows, scenarios.Score(s, res, out))
				}
				if err != nil {
					runErr = err
					break
				}
			}
			board.Elapsed = time.Since(started).Round(time.Second).String()
			if err := writeBoard(out, junit, findings, board); err != nil {
				return err
			}
			printBoard(cmd.OutOrStdout(), out, board)
			if runErr != nil {
				if errors.Is(runErr, cmd.Context().Err()) && cmd.Context().Err() != nil {
					return verdictError{fmt.Errorf("interrupted; the scoreboard holds the runs made so far")}
				}
				return runErr
			}
			t := board.Tally()
			if t[reports.Reproduced] != len(board.Rows) {
				return verdictError{fmt.Errorf("%d of %d scenarios not reproduced, %d inconclusive",
					t[reports.NotReproduced], len(board.Rows), t[reports.Inconclusive])}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringSliceVar(&files, "scenarios", nil, "scenario files (YAML) to run instead of the built-in catalogue")
	f.StringSliceVar(&only, "only", nil, "scenarios to run, by name (a trailing * matches a prefix) or claim number")
	f.IntVar(&seeds, "seeds", 3, "seeds per scenario")
	f.Int64Var(&seedBase, "seed", 1, "first seed; scenario runs use seed, seed+1, ...")
	f.BoolVar(&until, "until-reproduced", false, "stop a violation scenario's seeds at its first violation")
	f.BoolVar(&list, "list", false, "list the scenarios and exit")
	f.StringVar(&store, "store", "store", "folder of stored runs")
	f.StringVar(&out, "out", "", "folder of scoreboard.html and scoreboard.md (default <store>/debate/<time>)")
	f.StringVar(&junit, "junit", "", "also write JUnit XML here, one test case per scenario")
	f.StringVar(&provider, "provider", run.ProviderLocal, "where the nodes of every run run: "+strings.Join(run.Providers, " or ")+" (see docs/providers.md)")
	f.StringVar(&inventory, "inventory", "", "the ssh provider's inventory file (locktest lab up writes one), with --provider ssh")
	f.StringVar(&findings, "findings", "", "also write the scoreboard as Markdown without run links here (docs/findings.md)")
	quietFlag(c, &q, "no progress on stderr")
	return c
}

func writeBoard(out, junit, findings string, board reports.Scoreboard) error {
	if err := reports.WriteScoreboard(out, board); err != nil {
		return fmt.Errorf("scoreboard: %v", err)
	}
	if junit != "" {
		x, err := reports.RenderJUnit(board)
		if err == nil {
			err = os.WriteFile(junit, x, 0o644)
		}
		if err != nil {
			return fmt.Errorf("--junit: %v", err)
		}
	}
	if findings != "" {
		md := append([]byte("<!-- Generated by `locktest debate --findings`; do not edit by hand. -->\n"), reports.RenderScoreboardMarkdown(board, false)...)
		if err := os.WriteFile(findings, md, 0o644); err != nil {
			return fmt.Errorf("--findings: %v", err)
		}
	}
	return nil
}

func printBoard(w io.Writer, out string, b reports.Scoreboard) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "claim\tscenario\ttests for\tviolations\tverdict")
	for _, r := range b.Rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Claim, r.Name, r.Expect, r.RateText(), r.Verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "scoreboard: %s\n", filepath.Join(out, "scoreboard.html"))
}

func printCatalogue(w io.Writer, scs []scenarios.Scenario) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "claim\tscenario\timpl\tfaults\tresource\ttests for")
	for _, s := range scs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.Claim, s.Name, s.Impl(), strings.Join(s.Faults(), ","), orNone(nonEmpty(s.Settings["resource"])), s.Expect)
	}
	tw.Flush()
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
