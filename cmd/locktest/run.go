package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// runFlags are the settings `locktest run` reads from its flags: a
// run.Config and the flags that are parsed into it.
type runFlags struct {
	cfg      run.Config
	logLevel string
	quiet    bool
	plan     string // --plan
}

func newRunCmd() *cobra.Command {
	rf := &runFlags{cfg: run.DefaultConfig()}
	var jsonOut string
	c := &cobra.Command{
		Use:   "run",
		Short: "Run one test against a real lock service and store its history, verdicts and report",
		Example: `  locktest run --impl redis-set-nx-px --faults pause-client --resource fenced --time 10s
  locktest run --impl redis-naive-del --faults pause-client --ttl 300ms --expect invalid
  locktest run --impl redlock --provider docker --image redis=redis:7.2 --faults clock-bump`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyPlan(cmd.Flags(), rf.plan, "run"); err != nil {
				return usageError{err}
			}
			cfg, err := rf.config(cmd.Flags())
			if err != nil {
				return err
			}
			if err := run.CheckOutputs(run.Output{Flag: "--json", Path: jsonOut}); err != nil {
				return usageError{err}
			}
			out, err := run.Run(cmd.Context(), cfg)
			if out == nil {
				return err // a set-up failure: exit 2
			}
			reports.WriteRunText(cmd.OutOrStdout(), out.Dir, out.Results, err == nil)
			if err := writeResultsJSON(jsonOut, out.Results); err != nil {
				return err
			}
			if oerr := outcomeError(out.Results); oerr != nil {
				return oerr
			}
			return err // nil, or the results could not be stored: exit 2
		},
	}
	rf.define(c)
	jsonFlag(c, &jsonOut, "results.json", "the run's folder")
	return c
}

// jsonFlag declares --json, which every command that produces a result
// has: a file to write that result to as well, in the form of file (whose
// schema is in docs/schemas), which is always written where.
func jsonFlag(c *cobra.Command, p *string, file, where string) {
	c.Flags().StringVar(p, "json", "", "also write "+file+" here (it is always in "+where+")")
	_ = c.Flags().SetAnnotation("json", groupAnnotation, []string{run.GroupOutput})
}

// writeResultsJSON writes res to path as results.json, unless path is
// empty; the error names --json.
func writeResultsJSON(path string, res runstore.Results) error {
	if path == "" {
		return nil
	}
	if err := runstore.WriteJSON(path, res); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// define declares the flags of `locktest run`: one per entry of the
// settings table (run.Settings), grouped in the help as the table groups
// them, and the output flags of the command itself.
func (rf *runFlags) define(c *cobra.Command) {
	f := c.Flags()
	for _, s := range run.Settings {
		v := s.Field(&rf.cfg)
		fl := f.VarPF(v, s.Name, "", s.Help())
		if b, ok := v.(run.BoolValue); ok && b.IsBoolFlag() {
			fl.NoOptDefVal = "true"
		}
		if zero(v) {
			fl.DefValue = "" // the help names no default for an empty or zero one
		}
		_ = f.SetAnnotation(s.Name, groupAnnotation, []string{s.Group})
	}
	quietFlag(c, &rf.quiet, "no progress log on stderr")
	planFlag(c, &rf.plan)
	f.StringVar(&rf.logLevel, "log-level", "info", "stderr log level: "+strings.Join(logLevels, ", "))
	for _, n := range []string{"quiet", "log-level", "plan"} {
		_ = f.SetAnnotation(n, groupAnnotation, []string{run.GroupOutput})
	}
	c.SetUsageTemplate(groupedUsage)
}

// zero reports whether a setting's default is its type's zero value, which
// pflag would print as a default ("0s", "[]").
func zero(v run.Value) bool {
	switch v.String() {
	case "", "0", "0s", "false":
		return true
	}
	return false
}

// logLevels are the values of --log-level.
var logLevels = []string{"debug", "info", "warn", "error"}

// config returns the run the flags describe. Bad values and flags that would
// change nothing are usage errors; the rest of the checking is
// run.Config.Validate's, which run.Run calls.
func (rf *runFlags) config(f changer) (run.Config, error) {
	cfg := rf.cfg
	if err := run.ApplyCommandLine(&cfg, f.Changed); err != nil {
		return cfg, usageError{err}
	}
	cfg.Command = commandLine()
	lvl, err := parseLevel(rf.logLevel)
	if err != nil {
		return cfg, usageError{err}
	}
	if !quiet(f, rf.quiet) {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}
	return cfg, nil
}

// changer tells whether a flag was given on the command line (a
// *pflag.FlagSet).
type changer interface{ Changed(name string) bool }

// quietFlag declares -q/--quiet. Its default depends on where stderr goes,
// so the flag's own default is false and quiet decides.
func quietFlag(c *cobra.Command, p *bool, usage string) {
	c.Flags().BoolVarP(p, "quiet", "q", false, usage+" (default: on when stderr is not a terminal; -q=false forces the output)")
}

// quiet reports whether progress output is off: as -q says when it was
// given, else when stderr is not a terminal.
func quiet(f changer, given bool) bool {
	if f.Changed("quiet") {
		return given
	}
	return !term.IsTerminal(int(os.Stderr.Fd()))
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if !slices.Contains(logLevels, strings.ToLower(s)) || l.UnmarshalText([]byte(s)) != nil {
		return l, fmt.Errorf("--log-level must be %s, got %q", strings.Join(logLevels, ", "), s)
	}
	return l, nil
}
