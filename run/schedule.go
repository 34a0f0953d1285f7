package run

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
)

// ReadSchedule reads the schedule file path (nemesis.ReadPlan); its error
// names the file and the field.
func ReadSchedule(path string) (*nemesis.Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--schedule: %w", err)
	}
	defer f.Close()
	p, err := nemesis.ReadPlan(f)
	if err != nil {
		return nil, fmt.Errorf("--schedule %s: %v", path, err)
	}
	return &p, nil
}

// loadPlan reads c.Schedule into c.Plan when the caller did not, and makes
// the plan's faults the run's. A run given both a plan and --faults is
// refused: the two would say different things.
func (c *Config) loadPlan() error {
	if c.Plan == nil && c.Schedule != "" {
		p, err := ReadSchedule(c.Schedule)
		if err != nil {
			return setupErr("%v", err)
		}
		c.Plan = p
	}
	if c.Plan == nil {
		return nil
	}
	if len(c.Faults) > 0 {
		return setupErr("--faults and --schedule both say which faults to inject: give one")
	}
	c.Faults = c.Plan.FaultNames()
	return nil
}

// ApplyWorkload sets cfg's settings from plan's workload (Plan.Workload),
// each as its flag takes it, but not those keep says to keep (the command
// line gave them; nil keeps none). A key that is not a workload setting
// (WorkloadKeys), or a value its setting refuses, is an error naming the
// schedule file (cfg.Schedule) and the key.
func ApplyWorkload(cfg *Config, plan *nemesis.Plan, keep func(flag string) bool) error {
	workload := WorkloadKeys()
	for _, k := range slices.Sorted(maps.Keys(plan.Workload)) {
		s, ok := SettingNamed(k)
		if !ok || !slices.Contains(workload, s.Name) {
			return fmt.Errorf("--schedule %s: workload.%s: not a workload setting of locktest run", orDash(cfg.Schedule), k)
		}
		if keep != nil && keep(s.Name) {
			continue
		}
		if err := s.Field(cfg).Set(plan.Workload[k]); err != nil {
			return fmt.Errorf("--schedule %s: workload.%s: %v", orDash(cfg.Schedule), k, err)
		}
	}
	return nil
}

// orDash names a schedule file, or says it was given in memory.
func orDash(path string) string {
	if path == "" {
		return "(given)"
	}
	return path
}

// WorkloadKeys are the settings a schedule file records of its run's
// workload (nemesis.Plan.Workload), by flag name: every setting of the
// run but the faults (which the plan holds, each with its own settings),
// this machine's and its hosts' addresses and credentials, and the output. A replay
// takes them from the file unless its command line gives them.
func WorkloadKeys() []string {
	var out []string
	for _, s := range Settings {
		switch {
		case s.Group == GroupOutput:
		case s.Group == GroupFaults && s.Name != "quiet-time":
		case slices.Contains(machineSettings, s.Name):
		default:
			out = append(out, s.Name)
		}
	}
	return out
}

// WorkloadValues are c's workload settings (WorkloadKeys) that have a
// value, by flag name: what a schedule file records of its run
// (nemesis.Plan.Workload).
func (c *Config) WorkloadValues() map[string]string {
	out := map[string]string{}
	values := c.Values()
	for _, k := range WorkloadKeys() {
		set, _ := SettingNamed(k)
		if v := values[set.Key()]; v != "" {
			out[k] = v
		}
	}
	return out
}

// ApplyMachine sets cfg's machine settings (the hosts, addresses and
// credentials of machineSettings) from settings, a stored run's
// (RunInfo.Settings, by key): a replay on the machine that made the run
// reaches its hosts as the run did. A value its setting refuses is an
// error naming it.
func ApplyMachine(cfg *Config, settings map[string]string) error {
	for _, name := range machineSettings {
		s, _ := SettingNamed(name)
		v, ok := settings[s.Key()]
		if !ok || v == "" {
			continue
		}
		if err := s.Field(cfg).Set(v); err != nil {
			return fmt.Errorf("settings.%s: %v", s.Key(), err)
		}
	}
	return nil
}

// machineSettings name this machine or its hosts, not the run: a replay
// elsewhere gives its own. Those of the providers say so themselves
// (provider.Setting.Machine).
var machineSettings = func() []string {
	out := []string{"subnet"}
	for _, d := range provider.All() {
		for _, s := range d.Settings {
			if s.Machine {
				out = append(out, s.Name)
			}
		}
	}
	return out
}()

// writeSchedule writes the run's schedule.json: what its schedule did, the
// seed (or the file) it came from, and its workload's settings.
func writeSchedule(dir string, cfg Config, s *nemesis.Schedule) error {
	p := nemesis.Plan{SchemaVersion: nemesis.PlanSchemaVersion, Seed: cfg.Seed, Began: s.Began(), Faults: s.Planned()}
	if cfg.Plan != nil {
		p.ReplayOf = orDash(cfg.Schedule)
	} else if len(cfg.Faults) > 0 {
		p.Interval = cfg.Interval
	}
	p.Workload = cfg.WorkloadValues()
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, runstore.ScheduleFile), append(data, '\n'), 0o644)
}
