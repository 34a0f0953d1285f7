package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/scenarios"
)

func newDebateCmd() *cobra.Command {
	var files, only, implNames []string
	var seeds, parallel, maxSeeds int
	var seedBase int64
	var until, list, q bool
	var store, out, junit, findings, trackRecord, over, provider, inventory, jsonOut, shard, maxRateText, ciWidthText string
	c := &cobra.Command{
		Use:   "debate",
		Short: "Run the scenario catalogue (the Redlock debate's claims) over several seeds and write a scoreboard",
		Long: `debate runs every scenario of the catalogue — each claim of the Kleppmann /
antirez debate and of the lock-selection articles, with what each side
predicts — over several seeds, and writes scoreboard.html and scoreboard.md:
per claim the violation rate with its 95% Wilson interval, the time to the
first violation, and a verdict:
  reproduced      a violation scenario showed its violation in a run
  not reproduced  it showed none
  held            a safe scenario showed no violation, in enough runs that
                  the one-sided 95% upper bound of its rate is below
                  --max-rate (16 runs for the default 15%)
  not refuted     it showed none, in too few runs to say that
  refuted         a safe scenario showed a violation
  inconclusive    its runs could not test the claim (the reason is given)
scoreboard.json holds every seed of every scenario; --shard splits the runs
over machines and ` + "`locktest merge`" + ` joins their scoreboards.

Exit codes: 0 every scenario reproduced or held, 1 one was not reproduced or
refuted, 3 none of those but one was not refuted or inconclusive (or the
debate was interrupted), 2 bad usage or a broken scenario file.`,
		Example: `  locktest debate                          # the whole catalogue, 16 seeds each (enough to decide at 15%)
  locktest debate --seeds 20 --parallel 2 --json debate.json
  locktest debate --only 2,redlock-control --seeds 10
  locktest debate --scenarios scenarios/kubernetes.yaml --impl k8s-lease-cas
  locktest debate --only redlock-control --until-ci-width 20% --max-seeds 60
  locktest debate --seeds 20 --shard 2/4 --out shard2   # then: locktest merge shard1 shard2 shard3 shard4
  locktest debate --only redlock-clock-jump --seeds 10 --until-reproduced
  locktest debate --scenarios my.yaml --junit debate.xml
  locktest debate --only etcd-pause --provider ssh --inventory lab/lab.yaml
  locktest debate --scenarios scenarios/bugs.yaml --only redsync-149 --seeds 10 \
      --over docs/track-record.json --track-record docs/track-record.md`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cat := scenarios.BuiltinCatalogue()
			if len(files) > 0 {
				var err error
				if cat, err = scenarios.LoadFiles(files); err != nil {
					return usageError{fmt.Errorf("--scenarios: %v", err)}
				}
			}
			picked, err := scenarios.Select(cat.Scenarios, only)
			if err != nil {
				return usageError{fmt.Errorf("--only: %v", err)}
			}
			if picked, err = scenarios.ByImpl(picked, implNames); err != nil {
				return usageError{fmt.Errorf("--impl: %v", err)}
			}
			if list {
				scenarios.WriteCatalogue(cmd.OutOrStdout(), picked)
				return nil
			}
			if cmd.Flags().Changed("seeds") && seeds < 1 {
				return usageError{fmt.Errorf("--seeds must be at least 1, got %d", seeds)}
			}
			if parallel < 1 {
				return usageError{fmt.Errorf("--parallel must be at least 1, got %d", parallel)}
			}
			maxRate, err := parseMaxRate(maxRateText)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("seeds") {
				// Enough to decide: a safe scenario with no violation in
				// this many runs is held at --max-rate.
				seeds = stats.SeedsToHold(maxRate)
			}
			var ciWidth float64
			if ciWidthText != "" {
				if ciWidth, err = parseRate(ciWidthText); err != nil || ciWidth <= 0 || ciWidth > 1 {
					return usageError{fmt.Errorf("--until-ci-width must be a width between 0 and 100%%, such as 20%% or 0.2, got %q", ciWidthText)}
				}
				if cmd.Flags().Changed("seeds") {
					return usageError{errors.New("--until-ci-width takes its seeds up to --max-seeds; leave out --seeds")}
				}
				seeds = maxSeeds
			} else if cmd.Flags().Changed("max-seeds") {
				return usageError{errors.New("--max-seeds caps --until-ci-width; without it, give --seeds")}
			}
			shardI, shardN, err := parseShard(shard)
			if err != nil {
				return usageError{fmt.Errorf("--shard: %v", err)}
			}
			if shardN > 0 && (until || ciWidth > 0) {
				return usageError{errors.New("--shard needs a fixed set of runs: leave out --until-reproduced and --until-ci-width")}
			}
			base := run.DefaultConfig()
			base.StoreDir = store
			if err := base.UseProvider(provider, inventory); err != nil {
				return usageError{err}
			}
			if parallel, err = run.Parallel(provider, parallel, cmd.Flags().Changed("parallel")); err != nil {
				return usageError{err}
			}
			// A bad inventory would make every scenario inconclusive.
			if err := base.CheckProvider(); err != nil {
				return usageError{err}
			}
			started := time.Now()
			// Every output must be writable before the first run: a
			// debate takes minutes, and its results must not be lost at
			// the end.
			outFlag := "--out"
			if out == "" {
				out, outFlag = filepath.Join(store, "debate", started.Format("20060102T150405")), "--store"
			}
			var under *reports.Scoreboard
			if over != "" {
				if trackRecord == "" {
					return usageError{errors.New("--over goes with --track-record: it names the board the new rows of the track record go over")}
				}
				b, err := scenarios.ReadUnder(over, cat, picked)
				if err != nil {
					return usageError{fmt.Errorf("--over: %v", err)}
				}
				under = &b
			}
			if err := run.CheckOutputs(run.Output{Flag: "--junit", Path: junit}, run.Output{Flag: "--findings", Path: findings},
				run.Output{Flag: "--json", Path: jsonOut}, run.Output{Flag: "--track-record", Path: trackRecord}, run.Output{Flag: outFlag, Path: out, Dir: true}); err != nil {
				return usageError{err}
			}
			opt := scenarios.Options{Base: base, UntilReproduced: until, CIWidth: ciWidth, Parallel: parallel, Shard: shardI, Shards: shardN}
			for i := 0; i < seeds; i++ {
				opt.Seeds = append(opt.Seeds, seedBase+int64(i))
			}
			if !q {
				fmt.Fprintf(cmd.ErrOrStderr(), "debate: %d scenarios, up to %d seeds each, %d at once%s, store %s\n",
					len(picked), seeds, parallel, map[bool]string{true: ", shard " + shard}[shardN > 0], store)
				opt.Progress = scenarios.Progress(cmd.ErrOrStderr(), started)
			}
			board := scenarios.NewBoard(cmd.Context(), started, opt, seeds, maxRate, commandLine(), shard, cat.Sources)
			board.Bugs = cat.Pick(picked)
			if trackRecord != "" && len(board.Bugs) == 0 {
				return usageError{errors.New("--track-record: the scenarios picked reproduce no public bug (scenarios/bugs.yaml has them)")}
			}
			board, runErr := scenarios.Debate(cmd.Context(), picked, opt, board, out)
			board.Elapsed = time.Since(started).Round(time.Second).String()
			if err := scenarios.WriteBoard(out, junit, findings, jsonOut, board); err != nil {
				return err
			}
			if trackRecord != "" {
				if err := scenarios.WriteTrackRecordOver(trackRecord, under, board, cat); err != nil {
					return err
				}
			}
			scenarios.WriteBoardText(cmd.OutOrStdout(), out, board)
			interrupted := cmd.Context().Err() != nil
			if runErr != nil && !(interrupted && errors.Is(runErr, cmd.Context().Err())) {
				return runErr
			}
			return boardOutcome(board, len(picked), interrupted)
		},
	}
	f := c.Flags()
	f.StringSliceVar(&files, "scenarios", nil, "scenario files (YAML) to run instead of the built-in catalogue")
	f.StringSliceVar(&only, "only", nil, "scenarios to run, by name (a trailing * matches a prefix) or claim number")
	f.StringSliceVar(&implNames, "impl", nil, "run only the scenarios of these impls (or external clients), comma-separated or repeated")
	f.IntVar(&seeds, "seeds", 0, "seeds per scenario (default: the fewest that decide, those after which a safe scenario with no violation is held at --max-rate: 16 at 15%)")
	f.IntVar(&parallel, "parallel", 4, "runs at once; each has its own ports, network lab, subnet and store folder (4 made the catalogue 3.6 times as fast as 1 on 2 cores, with the same verdicts: docs/findings.md)")
	f.StringVar(&shard, "shard", "", "make only shard I of N of the runs (I/N, e.g. 2/4); locktest merge joins the shards' scoreboards")
	f.StringVar(&maxRateText, "max-rate", "15%", "a safe scenario is held when the one-sided 95% upper bound of its violation rate is below this")
	f.StringVar(&ciWidthText, "until-ci-width", "", "stop adding seeds to a scenario once its 95% interval is narrower than this (e.g. 20%), up to --max-seeds")
	f.IntVar(&maxSeeds, "max-seeds", 50, "the most seeds per scenario with --until-ci-width")
	f.StringVar(&jsonOut, "json", "", "also write the scoreboard as JSON here (it is always in the output folder as scoreboard.json)")
	f.Int64Var(&seedBase, "seed", 1, "first seed; scenario runs use seed, seed+1, ...")
	f.BoolVar(&until, "until-reproduced", false, "stop a violation scenario's seeds at its first violation")
	f.BoolVar(&list, "list", false, "list the scenarios and exit")
	f.StringVar(&store, "store", "store", "folder of stored runs")
	f.StringVar(&out, "out", "", "folder of scoreboard.html and scoreboard.md (default <store>/debate/<time>)")
	f.StringVar(&junit, "junit", "", "also write JUnit XML here, one test case per scenario")
	f.StringVar(&provider, "provider", run.Providers[0], "where the nodes of every run run: "+strings.Join(run.Providers, " or ")+" (see docs/providers.md)")
	f.StringVar(&inventory, "inventory", "", "the ssh provider's inventory file (locktest lab up writes one), with --provider ssh")
	f.StringVar(&trackRecord, "track-record", "", "also write the track record of the public bugs the scenarios reproduce as Markdown here (docs/track-record.md, from scenarios/bugs.yaml)")
	f.StringVar(&over, "over", "", "with --track-record: the board of an earlier track record (docs/track-record.json), whose rows of the scenarios not run the page keeps")
	f.StringVar(&findings, "findings", "", "also write the scoreboard as Markdown without run links here (docs/findings.md)")
	c.Flags().BoolVarP(&q, "quiet", "q", false, "no progress on stderr (by default one line per finished run)")
	return c
}

// boardOutcome is the error a finished debate of want scenarios exits
// with: a verdictError when a scenario was not reproduced or was refuted,
// else an inconclusiveError when one was not refuted or inconclusive, or
// the debate was interrupted before every scenario had a row.
func boardOutcome(board reports.Scoreboard, want int, interrupted bool) error {
	t := board.Tally()
	if n := t[reports.NotReproduced] + t[reports.Refuted]; n > 0 {
		return verdictError{fmt.Errorf("%d of %d scenarios not as expected: %s", n, len(board.Rows), board.TallyText())}
	}
	if interrupted {
		return inconclusiveError{fmt.Errorf("interrupted; the scoreboard holds the %d scenarios run so far: %s", len(board.Rows), board.TallyText())}
	}
	if n := t[reports.NotRefuted] + t[reports.Inconclusive]; n > 0 || len(board.Rows) < want {
		return inconclusiveError{fmt.Errorf("%d of %d scenarios without a conclusion: %s", n+want-len(board.Rows), want, board.TallyText())}
	}
	return nil
}

// parseMaxRate reads --max-rate, a rate strictly between 0 and 1.
func parseMaxRate(s string) (float64, error) {
	x, err := parseRate(s)
	if err != nil || x <= 0 || x >= 1 {
		return 0, usageError{fmt.Errorf("--max-rate must be a rate between 0 and 100%%, such as 15%% or 0.15, got %q", s)}
	}
	return x, nil
}

// parseRate reads a rate given as a percentage ("15%") or a fraction
// ("0.15").
func parseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	x, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err != nil {
		return 0, err
	}
	if pct {
		x /= 100
	}
	return x, nil
}

// parseShard reads --shard I/N; "" is no sharding (0, 0).
func parseShard(s string) (i, n int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("want I/N with 1 ≤ I ≤ N, such as 2/4, got %q", s)
	}
	return i, n, nil
}
