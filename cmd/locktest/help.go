package main

import (
	"errors"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locktest/locktest/run"
)

// groupAnnotation is the flag annotation that names a flag's group in the
// help (run.Groups).
const groupAnnotation = "locktest_group"

func init() { cobra.AddTemplateFunc("groupedFlags", groupedFlags) }

// groupedFlags renders a command's flags under one heading per group, in
// run.Groups order; flags without a group come last under "Other flags".
func groupedFlags(c *cobra.Command) string {
	var b strings.Builder
	sets := map[string]*pflag.FlagSet{}
	other := pflag.NewFlagSet("other", pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		g := f.Annotations[groupAnnotation]
		if len(g) == 0 {
			other.AddFlag(f)
			return
		}
		if sets[g[0]] == nil {
			sets[g[0]] = pflag.NewFlagSet(g[0], pflag.ContinueOnError)
		}
		sets[g[0]].AddFlag(f)
	})
	for _, g := range run.Groups {
		if fs := sets[g]; fs != nil {
			b.WriteString("\n" + strings.ToUpper(g[:1]) + g[1:] + " flags:\n" + fs.FlagUsages())
		}
	}
	if other.HasFlags() {
		b.WriteString("\nOther flags:\n" + other.FlagUsages())
	}
	return strings.TrimRight(b.String(), " \n")
}

// groupedUsage is cobra's usage template with the flags grouped.
const groupedUsage = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableLocalFlags}}
{{groupedFlags .}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}
`

// settingFlagError is pflag's error for a value a flag's Set refused.
var settingFlagError = regexp.MustCompile(`^invalid argument ".*" for "(--[a-z-]+)" flag: (.*)$`)

// plainSettingError turns pflag's error for a setting whose own parser
// explains the refusal (the partition's groups, the fault targets) into
// "--flag: reason", the form of every other refused setting.
func plainSettingError(err error) error {
	m := settingFlagError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	s, ok := run.SettingNamed(strings.TrimPrefix(m[1], "--"))
	if !ok {
		return err
	}
	switch s.Field(new(run.Config)).Type() {
	case "groups", "fault=targets":
		return errors.New(m[1] + ": " + m[2])
	}
	return err
}
