package run

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
)

// ApplyCommandLine finishes cfg, made from a command line's flags
// (Settings), where changed tells which flags the command line gave, and
// refuses a command line that does not say what its run would be: it
// reads the schedule file of --schedule (with its refusals), refuses pins
// that no run of the impl's cluster can match (--target), and refuses a
// flag that would change nothing in the run. Its errors are the command
// line's, in the words of its flags; the rest of the checking is
// Config.Validate's.
func ApplyCommandLine(cfg *Config, changed func(flag string) bool) error {
	if cfg.Schedule != "" {
		if err := applySchedule(cfg, changed); err != nil {
			return err
		}
	}
	if err := checkTargets(*cfg); err != nil {
		return fmt.Errorf("--target: %v", err)
	}
	return checkFaultFlags(*cfg, changed)
}

// scheduleFlags are the flags of `locktest run` that shape the nemesis's
// schedule rather than one fault: they need some fault (or, stagger, a
// combined one). The flags that shape one fault are the Settings of the
// faults that read them (nemesis.Spec).
var scheduleFlags = []string{"interval", "quiet-time", "stagger"}

// checkFaultFlags refuses a flag given on the command line that would
// change nothing in the run: a setting that is silently ignored makes a run
// that is not the one its command line says. A flag is used when a fault
// of the run lists it among its Settings; --pause-point reaches kill-client
// only with --kill-holder.
func checkFaultFlags(cfg Config, changed func(flag string) bool) error {
	if cfg.Plan != nil {
		cfg.Faults = cfg.Plan.FaultNames()
	}
	parts := checker.FaultParts(cfg.Faults)
	readers := map[string][]string{} // flag → the faults that read it
	for _, s := range nemesis.Specs() {
		for _, flag := range s.Settings {
			readers[flag] = append(readers[flag], s.Name)
		}
	}
	faults := "none"
	if len(cfg.Faults) > 0 {
		faults = strings.Join(cfg.Faults, ",")
	}
	for _, flag := range slices.Sorted(maps.Keys(readers)) {
		if !changed(flag) {
			continue
		}
		used := slices.ContainsFunc(parts, func(p string) bool {
			return slices.Contains(readers[flag], p) && !(flag == "pause-point" && p == "kill-client" && !nemesis.KillHolder.Of(cfg.FaultSettings))
		})
		if !used {
			return fmt.Errorf("--%s changes nothing in this run: it needs %s (faults: %s)", flag, needs(flag, readers[flag]), faults)
		}
	}
	for _, flag := range scheduleFlags {
		switch {
		case !changed(flag):
		case flag == "stagger" && !slices.ContainsFunc(cfg.Faults, func(f string) bool { return strings.Contains(f, "+") }):
			return fmt.Errorf("--stagger changes nothing in this run: it needs a combined fault (--faults a+b) (faults: %s)", faults)
		case len(parts) == 0:
			return fmt.Errorf("--%s changes nothing in this run: it needs --faults (faults: %s)", flag, faults)
		}
	}
	return nil
}

// needs says which faults a flag needs, for the error of checkFaultFlags:
// the faults that read it, or, when most do, those that do not.
func needs(flag string, readers []string) string {
	if flag == "pause-point" {
		return "--faults pause-client, or kill-client with --kill-holder"
	}
	all := nemesis.Names()
	if len(readers) <= len(all)/2 {
		return "--faults " + strings.Join(readers, ", ")
	}
	var not []string
	for _, n := range all {
		if !slices.Contains(readers, n) {
			not = append(not, n)
		}
	}
	return fmt.Sprintf("a fault that reads --%s (any but %s)", flag, strings.Join(not, ", "))
}

// applySchedule reads the schedule file of --schedule into cfg: its plan,
// and its workload's settings wherever the command line gives none. A
// flag that would pick or shape faults (--faults, --target, --interval,
// --stagger and every fault's own settings) is refused: each planned fault
// carries its own.
func applySchedule(cfg *Config, changed func(flag string) bool) error {
	for _, flag := range append([]string{"faults", "target", "interval", "stagger"}, faultSettingFlags()...) {
		if changed(flag) {
			return fmt.Errorf("--%s changes nothing with --schedule: the schedule file says which faults go in, where and how hard", flag)
		}
	}
	plan, err := ReadSchedule(cfg.Schedule)
	if err != nil {
		return err
	}
	cfg.Plan = plan
	return ApplyWorkload(cfg, plan, changed)
}

// faultSettingFlags are the flags that set one fault's settings
// (nemesis.Spec.Settings), each once.
func faultSettingFlags() []string {
	var out []string
	for _, s := range nemesis.Specs() {
		for _, flag := range s.Settings {
			if !slices.Contains(out, flag) {
				out = append(out, flag)
			}
		}
	}
	return out
}

// checkTargets refuses, before anything starts, the pins that no run of
// the impl's cluster can match: a node it lacks, a role its nodes never
// have, a worker or client host beyond --clients. It reads the nodes'
// names and roles from the backend's outline of the cluster
// (backend.NewOutline), which every provider names and casts alike; an
// outline that cannot be made here is left for the run to report, and the
// run checks the pins again against the cluster it started.
func checkTargets(cfg Config) error {
	if len(cfg.Targets) == 0 || cfg.Client != "" {
		// An external client's backend is known once its manifest is
		// read; the run checks its pins then, against the cluster it
		// started, before the workload begins.
		return nil
	}
	impl, err := impls.Lookup(cfg.Impl)
	if err != nil {
		return nil
	}
	cl, err := backend.NewOutline(impl.Backend, impl.Nodes, cfg.ClusterParams)
	if err != nil {
		return nil
	}
	return nemesis.CheckTargets(cfg.Targets, cl, cfg.Clients)
}

// ChangesSomething reports whether the flag called flag (without its
// dashes), given on a command line, would change something in a run of
// cfg: false where `locktest run` refuses it as changing nothing. Code that
// writes a run's command line (the matrix's jobs) asks it, so that the
// line it writes runs.
func ChangesSomething(cfg Config, flag string) bool {
	return checkFaultFlags(cfg, func(f string) bool { return f == flag }) == nil
}
