package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/locktest/locktest/run"
)

// PlanFile is a plan file (docs/schemas/plan.schema.json): a comparison a
// team keeps in its repository, which `locktest run`, `matrix` and
// `margin` read with --plan. Its run settings are a scenario's, with the
// keys of a scenario file; a flag on the command line overrides the plan.
type PlanFile struct {
	// Impls and Clients are the locks to test: the impls by name, the
	// external clients by their manifests' names. run and margin take
	// exactly one of them all.
	Impls   []string `yaml:"impls"`
	Clients []string `yaml:"clients"`
	// Faults are the faults (and, for a matrix, fault classes) to inject.
	Faults []string `yaml:"faults"`
	// Seeds is how many seeds each matrix cell runs.
	Seeds int `yaml:"seeds"`
	// Run holds run settings by their scenario keys (ttl, time, resource,
	// persistence, impl_opt, ...), as flag text.
	Run map[string]string `yaml:"-"`
	// Margin is the margin search: what it varies and how it searches.
	Margin *PlanMargin `yaml:"margin"`
	// Gates are what the commands exit 1 on.
	Gates PlanGates `yaml:"gates"`

	// RunNode is the run mapping as written, for DecodeRunSettings.
	RunNode yaml.Node `yaml:"run"`
}

// PlanMargin is a plan's margin search, each field a flag of locktest
// margin.
type PlanMargin struct {
	Vary       string `yaml:"vary"`
	Trials     int    `yaml:"trials"`
	Grid       int    `yaml:"grid"`
	Resolution string `yaml:"resolution"`
	At         string `yaml:"at"`
	Budget     string `yaml:"budget"`
}

// PlanGates are a plan's gates: Baseline is a matrix.json the matrix must
// not get worse than (matrix --baseline); Margin the value a margin search
// must hold at (margin --gate).
type PlanGates struct {
	Baseline string `yaml:"baseline"`
	Margin   string `yaml:"margin"`
}

// ReadPlanFile reads and checks a plan file. Errors are one line that
// names the file, the line and the field.
func ReadPlanFile(path string) (PlanFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return PlanFile{}, fmt.Errorf("--plan: %v", err)
	}
	var p PlanFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return PlanFile{}, fmt.Errorf("--plan %s: %s", path, oneLine(planError(err)))
	}
	if p.RunNode.Kind != 0 {
		if p.Run, err = DecodeRunSettings(&p.RunNode); err != nil {
			return PlanFile{}, fmt.Errorf("--plan %s: run: %s", path, oneLine(planError(err)))
		}
	}
	for _, k := range []string{"impl", "client", "faults"} {
		if _, ok := p.Run[k]; ok {
			return PlanFile{}, fmt.Errorf("--plan %s: run: %s is given by the plan's %ss list", path, k, strings.TrimSuffix(k, "s"))
		}
	}
	if p.Seeds < 0 {
		return PlanFile{}, fmt.Errorf("--plan %s: seeds must be at least 1, got %d", path, p.Seeds)
	}
	return p, nil
}

// planError is a yaml error's first message.
func planError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg := te.Errors[0]
		if len(te.Errors) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(te.Errors)-1)
		}
		return errors.New(msg)
	}
	return err
}

// DecodeRunSettings reads a mapping of run settings by their scenario
// keys, as a scenario file gives them beside its claim, into flag text by
// flag name. A key that is no scenario setting, or a value its flag
// refuses, is an error naming its line.
func DecodeRunSettings(n *yaml.Node) (map[string]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of run settings", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; slices.Contains(metaKeys, k.Value) || k.Value == "schedule" {
			return nil, fmt.Errorf("line %d: field %s not found", k.Line, k.Value)
		}
	}
	sc, err := decodeScenario(n)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range sc.Settings {
		set, _ := run.SettingNamed(k)
		out[set.Name] = v
	}
	return out, nil
}
