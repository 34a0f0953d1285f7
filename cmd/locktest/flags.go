package main

import (
	"bufio"
	"encoding/json"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locktest/locktest/internal/cliflags"
	"github.com/locktest/locktest/margin"
	"github.com/locktest/locktest/run"
)

// newFlagsCmd is `locktest flags`, hidden: it prints every command's
// flags as JSON (flagsJSON), for the tests that hold the docs to the
// command (guards/), which do not import it. With --check it reads
// command lines, one JSON object {"path", "args"} a line, and prints for
// each, as a JSON line, what the command makes of it without running it
// (cliflags.Line).
func newFlagsCmd() *cobra.Command {
	var check bool
	c := &cobra.Command{
		Use:    "flags",
		Short:  "Print every command's flags as JSON, or check command lines (internal, for the docs tests)",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			enc := json.NewEncoder(cmd.OutOrStdout())
			if !check {
				return enc.Encode(flagsJSON())
			}
			sc := bufio.NewScanner(cmd.InOrStdin())
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var line cliflags.Line
				if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
					return usageError{err}
				}
				if err := enc.Encode(checkLine(line)); err != nil {
					return err
				}
			}
			return sc.Err()
		},
	}
	c.Flags().BoolVar(&check, "check", false, "check the command lines of the standard input")
	return c
}

// visibleCommands returns every command by its path ("run", "images
// build"; "" for locktest itself), hidden ones and help aside.
func visibleCommands() map[string]*cobra.Command {
	root := newRoot()
	out := map[string]*cobra.Command{"": root}
	var walk func(prefix string, c *cobra.Command)
	walk = func(prefix string, c *cobra.Command) {
		for _, s := range c.Commands() {
			if s.Hidden || s.Name() == "help" || s.Name() == "completion" {
				continue
			}
			p := strings.TrimSpace(prefix + " " + s.Name())
			out[p] = s
			walk(p, s)
		}
	}
	walk("", root)
	return out
}

// flagsJSON is every visible command's flags, --help aside, by the
// command's path.
func flagsJSON() map[string][]cliflags.Flag {
	out := map[string][]cliflags.Flag{}
	for path, c := range visibleCommands() {
		out[path] = []cliflags.Flag{}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && f.Deprecated == "" {
				out[path] = append(out[path], cliflags.Flag{Name: f.Name, Shorthand: f.Shorthand, Default: f.DefValue, Usage: f.Usage})
			}
		})
	}
	return out
}

// checkLine says what the command of l's path makes of l's arguments, with
// a fresh command, so that the flags of one line do not leak into the
// next.
func checkLine(l cliflags.Line) cliflags.Line {
	var c *cobra.Command
	rf, mf := &runFlags{cfg: run.DefaultConfig()}, &margin.Settings{}
	var jsonOut string
	switch l.Path {
	case "run":
		c = &cobra.Command{Use: "run"}
		rf.define(c)
		jsonFlag(c, &jsonOut, "results.json", "the run's folder")
	case "margin":
		c = &cobra.Command{Use: "margin"}
		defineMarginFlags(c, rf, mf, &jsonOut)
	default:
		if c = visibleCommands()[l.Path]; c == nil {
			l.ParseError = "no such command"
			return l
		}
	}
	if err := c.ParseFlags(l.Args); err != nil {
		l.ParseError = err.Error()
		return l
	}
	l.Positional = c.Flags().Args()
	if err := c.ValidateArgs(l.Positional); err != nil {
		l.ArgsError = err.Error()
	}
	l.Values = map[string][]string{}
	c.Flags().Visit(func(f *pflag.Flag) {
		if s, ok := f.Value.(pflag.SliceValue); ok {
			l.Values[f.Name] = s.GetSlice()
		} else {
			l.Values[f.Name] = []string{f.Value.String()}
		}
	})
	var err error
	switch l.Path {
	case "margin":
		_, err = prepareMargin(c.Flags(), rf, *mf)
	case "run":
		var cfg run.Config
		if cfg, err = rf.config(c.Flags()); err == nil {
			err = cfg.Validate()
		}
	}
	if err != nil {
		l.Error = err.Error()
	}
	return l
}
