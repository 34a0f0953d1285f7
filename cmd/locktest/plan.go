package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locktest/locktest/scenarios"
)

// planFlag declares --plan on c: a plan file whose settings are c's flags
// unless the command line gives them.
func planFlag(c *cobra.Command, p *string) {
	c.Flags().StringVar(p, "plan", "", "a plan file (YAML, docs/schemas/plan.schema.json): the impls, faults, run settings, seeds and gates of a comparison kept in a repository; a flag given here overrides it")
}

// matrixPlanSettings are the run settings a matrix takes from a plan: the
// ones it has flags for (resource, the store of its saved-by-fencing
// column; cluster-opt and impl-opt, the params of a deployment). It sets
// the others itself, per fault class.
var matrixPlanSettings = []string{"ttl", "time", "clients", "persistence", "resource", "cluster-opt", "impl-opt"}

// applyPlan reads the plan file path and sets, for the command named
// command (run, margin or matrix), every flag of f that the plan gives and
// the command line does not. An error names the plan, and the field or
// flag.
func applyPlan(f *pflag.FlagSet, path, command string) error {
	if path == "" {
		return nil
	}
	p, err := scenarios.ReadPlanFile(path)
	if err != nil {
		return err
	}
	set := func(field, flag, value string) error {
		if value == "" || f.Changed(flag) {
			return nil
		}
		if f.Lookup(flag) == nil {
			return fmt.Errorf("--plan %s: %s: locktest %s has no --%s", path, field, command, flag)
		}
		if err := f.Set(flag, value); err != nil {
			return fmt.Errorf("--plan %s: %s: %v", path, field, err)
		}
		return nil
	}
	var errs []error
	switch command {
	case "run", "margin":
		if n := len(p.Impls) + len(p.Clients); n > 1 {
			return fmt.Errorf("--plan %s: impls and clients name %d locks, and locktest %s tests one: give --impl or --client", path, n, command)
		}
		if len(p.Impls) == 1 {
			errs = append(errs, set("impls", "impl", p.Impls[0]))
		}
		if len(p.Clients) == 1 {
			errs = append(errs, set("clients", "client", p.Clients[0]))
		}
		if p.Seeds != 0 {
			return fmt.Errorf("--plan %s: seeds: locktest %s makes one run per trial; seeds are a matrix's", path, command)
		}
		if p.Gates.Baseline != "" {
			return fmt.Errorf("--plan %s: gates.baseline is a matrix's gate", path)
		}
		if command == "run" && (p.Margin != nil || p.Gates.Margin != "") {
			return fmt.Errorf("--plan %s: margin and gates.margin are a margin search's; locktest run makes one run", path)
		}
	case "matrix":
		errs = append(errs, set("impls", "impl", strings.Join(p.Impls, ",")), set("clients", "client", strings.Join(p.Clients, ",")))
		if p.Seeds > 0 {
			errs = append(errs, set("seeds", "seeds", strconv.Itoa(p.Seeds)))
		}
		errs = append(errs, set("gates.baseline", "baseline", p.Gates.Baseline))
		if p.Margin != nil || p.Gates.Margin != "" {
			return fmt.Errorf("--plan %s: margin and gates.margin are a margin search's; locktest matrix runs none", path)
		}
	}
	errs = append(errs, set("faults", "faults", strings.Join(p.Faults, ",")))
	for _, name := range sortedKeys(p.Run) {
		if command == "matrix" && !slices.Contains(matrixPlanSettings, name) {
			return fmt.Errorf("--plan %s: run: %s: the matrix sets it itself for each fault class (a plan gives it %s)", path, strings.ReplaceAll(name, "-", "_"), strings.Join(matrixPlanSettings, ", "))
		}
		errs = append(errs, set("run."+strings.ReplaceAll(name, "-", "_"), name, p.Run[name]))
	}
	if command == "margin" {
		if m := p.Margin; m != nil {
			errs = append(errs, set("margin.vary", "vary", m.Vary), set("margin.resolution", "resolution", m.Resolution),
				set("margin.at", "at", m.At), set("margin.budget", "budget", m.Budget))
			if m.Trials != 0 {
				errs = append(errs, set("margin.trials", "trials", strconv.Itoa(m.Trials)))
			}
			if m.Grid != 0 {
				errs = append(errs, set("margin.grid", "grid", strconv.Itoa(m.Grid)))
			}
		}
		errs = append(errs, set("gates.margin", "gate", p.Gates.Margin))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
