// Package scenarios is the catalogue of named, reproducible experiments:
// each scenario is one claim — of the Kleppmann / antirez Redlock debate, or
// of the lock-selection articles — with the run that tests it and the
// outcome each side predicts. The built-in catalogue is debate.yaml; users
// add their own in the same format. Run executes a scenario over several
// seeds and Score turns the runs into a scoreboard row.
package scenarios

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/shellquote"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
)

//go:embed debate.yaml
var builtin []byte

// Outcomes a scenario can expect.
const (
	// ExpectViolation: the run shows one of the scenario's anomalies.
	ExpectViolation = "violation"
	// ExpectSafe: the run shows no anomaly at all.
	ExpectSafe = "safe"
)

// Scenario is one claim and the run that tests it. In a file, the keys
// beside the claim's own are run settings, each the key of a run.Setting.
type Scenario struct {
	// Name is unique in a catalogue: lower-case words joined by dashes; it
	// names the runs' folder and, in the built-in catalogue, the make
	// target repro-<name>.
	Name string `yaml:"name"`
	// file is the scenario file it was read from; "" for the built-in
	// catalogue.
	file string
	// Claim numbers the claim the scenario tests; scenarios of one claim
	// (a violation and its remedy, say) share it.
	Claim  int    `yaml:"claim"`
	Title  string `yaml:"title"`
	Source string `yaml:"source"`
	// Predictions maps a side ("kleppmann", "antirez", "articles", ...) to
	// what it predicts, starting with "violation" or "safe".
	Predictions map[string]string `yaml:"predictions"`
	// Expect is the outcome the scenario tests for: violation or safe.
	Expect string `yaml:"expect"`
	// Anomalies are the kinds that count as the violation; empty means any
	// anomaly of any checker.
	Anomalies []string `yaml:"anomalies"`
	// Bug is the id of the public bug, in the file's bugs list, that the
	// scenario reproduces (it expects a violation, on a version that has
	// the bug) or holds (it expects safe, on a version that fixed it); ""
	// for a scenario about no bug.
	Bug string `yaml:"bug"`

	// Settings are the run's settings (run.Settings) the scenario gives,
	// by key, as the flag of the same name would take them; the others
	// keep `locktest run`'s defaults. "impl" is required.
	Settings map[string]string `yaml:"-"`
	// Plan, when the scenario gives `schedule:` (a list of faults in the
	// format of schedule.json's, docs/schemas/schedule.schema.json), is
	// what its runs inject, exactly, at those offsets, in place of a
	// seeded choice of faults: explicit steps and a seeded schedule are
	// the same thing, and each run writes its schedule.json.
	Plan *nemesis.Plan `yaml:"-"`
}

// file is the layout of a scenario file; each item is decoded by
// decodeScenario.
type file struct {
	// Sources are the works the scenarios cite, listed once.
	Sources []reports.ScoreSource `yaml:"sources"`
	// Bugs are the public bugs the scenarios reproduce (bugs.yaml).
	Bugs      []reports.Bug `yaml:"bugs"`
	Scenarios []yaml.Node   `yaml:"scenarios"`
}

// metaKeys are the keys of a scenario that are not run settings.
var metaKeys = []string{"name", "claim", "title", "source", "predictions", "expect", "anomalies", "bug"}

// decodeScenario decodes one item of the scenarios list: the claim's own
// keys into the Scenario's fields, every other key as a run setting. A key
// that is neither, or a setting a scenario may not give, is an error; so
// is a value its setting cannot parse. Errors carry the line, as yaml's
// do, and when there are several the first is given with how many follow.
func decodeScenario(n *yaml.Node) (Scenario, error) {
	var sc Scenario
	if n.Kind != yaml.MappingNode {
		return sc, &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s into a scenario", n.Line, n.Tag)}}
	}
	meta := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	var errs []string
	scratch := run.DefaultConfig()
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if slices.Contains(metaKeys, k.Value) {
			meta.Content = append(meta.Content, k, v)
			continue
		}
		if k.Value == "schedule" {
			p, err := decodeSteps(v)
			if err != nil {
				line := v.Line
				// An error about faults[i] is at that step's line.
				var i int
				if _, serr := fmt.Sscanf(err.Error(), "faults[%d]", &i); serr == nil && i >= 0 && i < len(v.Content) {
					line = v.Content[i].Line
				}
				errs = append(errs, fmt.Sprintf("line %d: schedule: %v", line, err))
				continue
			}
			sc.Plan = p
			continue
		}
		set, ok := run.SettingNamed(k.Value)
		if !ok || set.Key() != k.Value || !set.Scenario {
			errs = append(errs, fmt.Sprintf("line %d: field %s not found", k.Line, k.Value))
			continue
		}
		text, err := settingText(set, v)
		if err == nil {
			err = scratch.Set(set.Name, text)
			switch {
			case err != nil && slices.Contains([]string{"int", "float", "bool"}, set.Field(&scratch).Type()):
				err = fmt.Errorf("cannot unmarshal %s `%s` into %s", v.Tag, v.Value, set.Field(&scratch).Type())
			case err != nil:
				err = fmt.Errorf("%s: %v", k.Value, err)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("line %d: %v", v.Line, err))
			continue
		}
		if sc.Settings == nil {
			sc.Settings = map[string]string{}
		}
		sc.Settings[set.Key()] = text
	}
	if err := meta.Decode(&sc); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return sc, err
		}
		errs = append(te.Errors, errs...)
	}
	if _, ok := sc.Settings["faults"]; ok && sc.Plan != nil {
		errs = append(errs, fmt.Sprintf("line %d: faults and schedule both say which faults go in: give one", n.Line))
	}
	if len(errs) > 0 {
		return sc, &yaml.TypeError{Errors: errs}
	}
	return sc, nil
}

// decodeSteps reads a scenario's schedule: a list of faults as
// schedule.json has them, checked as a schedule file's are (its errors
// name the entry and the field, "faults[1].at: ...").
func decodeSteps(v *yaml.Node) (*nemesis.Plan, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("want a list of faults (at, fault, settings, pins or cuts, lasts)")
	}
	var steps []any
	if err := v.Decode(&steps); err != nil {
		return nil, err
	}
	b, err := json.Marshal(map[string]any{"schema_version": nemesis.PlanSchemaVersion, "faults": steps})
	if err != nil {
		return nil, err
	}
	p, err := nemesis.ReadPlan(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// settingText turns a setting's YAML value into the text its flag takes:
// a scalar as it is, a list joined by commas (a list setting), a mapping
// as key=value pairs (the targets: fault=a,b pairs joined by ;).
func settingText(set run.Setting, v *yaml.Node) (string, error) {
	typ := set.Field(new(run.Config)).Type()
	switch {
	case v.Kind == yaml.ScalarNode:
		return v.Value, nil
	case v.Kind == yaml.SequenceNode && typ == "strings":
		return joinScalars(v, ",")
	case v.Kind == yaml.MappingNode && (typ == "key=value" || typ == "fault=targets"):
		sep := ","
		if typ == "fault=targets" {
			sep = ";"
		}
		var parts []string
		for i := 0; i+1 < len(v.Content); i += 2 {
			val := v.Content[i+1]
			text := val.Value
			if val.Kind == yaml.SequenceNode {
				var err error
				if text, err = joinScalars(val, ","); err != nil {
					return "", err
				}
			} else if val.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("cannot unmarshal %s into a value of %s", val.Tag, v.Content[i].Value)
			}
			parts = append(parts, v.Content[i].Value+"="+text)
		}
		return strings.Join(parts, sep), nil
	}
	return "", fmt.Errorf("cannot unmarshal %s into %s", v.Tag, typ)
}

// joinScalars joins the items of a list of scalars with sep.
func joinScalars(v *yaml.Node, sep string) (string, error) {
	var items []string
	for _, it := range v.Content {
		if it.Kind != yaml.ScalarNode {
			return "", fmt.Errorf("line %d: cannot unmarshal %s into a list item", it.Line, it.Tag)
		}
		items = append(items, it.Value)
	}
	return strings.Join(items, sep), nil
}

// Impl is the lock implementation the scenario runs: its impl, or its
// external client (the client setting).
func (s Scenario) Impl() string {
	if c := s.Settings["client"]; c != "" {
		return c
	}
	return s.Settings["impl"]
}

// Faults are the faults the scenario injects.
func (s Scenario) Faults() []string {
	if s.Plan != nil {
		return s.Plan.FaultNames()
	}
	if f := s.Settings["faults"]; f != "" {
		return strings.Split(f, ",")
	}
	return nil
}

// builtinName is the name the built-in catalogue is read under.
const builtinName = "debate.yaml"

// ReproCommand is the command that loops over seeds until s shows what it
// tests for: the make target of a built-in scenario, a debate of its own
// file for one read from a file.
func (s Scenario) ReproCommand() string {
	if s.file == "" {
		return "make repro-" + s.Name
	}
	return "locktest debate --scenarios " + shellquote.Quote(s.file) + " --only " + s.Name + " --seeds 10 --until-reproduced"
}

// Builtin returns the built-in catalogue.
func Builtin() []Scenario {
	s, err := Parse(builtin, builtinName)
	if err != nil {
		panic("scenarios: the built-in catalogue is broken: " + err.Error()) // caught by the tests
	}
	return s
}

// BuiltinSources returns the works the built-in catalogue's claims come
// from, with where to read them.
func BuiltinSources() []reports.ScoreSource {
	s, err := ParseSources(builtin, builtinName)
	if err != nil {
		panic("scenarios: the built-in catalogue is broken: " + err.Error()) // caught by the tests
	}
	return s
}

// ParseSources reads the sources list of a scenario file: each needs a
// name and a title; a file without one has none.
func ParseSources(b []byte, name string) ([]reports.ScoreSource, error) {
	var f file
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	for i, s := range f.Sources {
		if s.Name == "" || s.Title == "" {
			return nil, fmt.Errorf("%s: source %d needs a name and a title", name, i+1)
		}
	}
	return f.Sources, nil
}

// Load reads a scenario file.
func Load(path string) ([]Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse reads scenarios in the catalogue's YAML format from b; name is the
// file's name for errors. Unknown fields are errors, and so is any
// scenario that would not make a valid run; each error names the file, the
// scenario and the line.
func Parse(b []byte, name string) ([]Scenario, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, decodeError(name, &doc, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, decodeError(name, &doc, err)
	}
	if len(f.Scenarios) == 0 {
		return nil, fmt.Errorf("%s: no scenarios (the file needs a top-level `scenarios:` list)", name)
	}
	all := make([]Scenario, len(f.Scenarios))
	for i := range f.Scenarios {
		s, err := decodeScenario(&f.Scenarios[i])
		if err != nil {
			return nil, decodeError(name, &doc, err)
		}
		if name != builtinName {
			s.file = name
		}
		all[i] = s
	}
	lines := scenarioLines(&doc)
	seen := map[string]bool{}
	for i, s := range all {
		where := fmt.Sprintf("%s: scenario %d", name, i+1)
		if i < len(lines) {
			where = fmt.Sprintf("%s:%d: scenario %q", name, lines[i], s.Name)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", where)
		}
		seen[s.Name] = true
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if s.Bug != "" && !slices.ContainsFunc(f.Bugs, func(b reports.Bug) bool { return b.ID == s.Bug }) {
			return nil, fmt.Errorf("%s: bug %q is not in the file's bugs list", where, s.Bug)
		}
	}
	if err := checkBugs(f.Bugs, all); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return all, nil
}

// checkBugs refuses a bugs list with a bug that is incomplete (Bug.Check)
// or listed twice, a bug in reach that no scenario reproduces, and one out
// of reach that has scenarios.
func checkBugs(bugs []reports.Bug, all []Scenario) error {
	seen := map[string]bool{}
	for _, b := range bugs {
		if err := b.Check(); err != nil {
			return err
		}
		if seen[b.ID] {
			return fmt.Errorf("bug %q is listed twice", b.ID)
		}
		seen[b.ID] = true
		reproduces := slices.ContainsFunc(all, func(s Scenario) bool { return s.Bug == b.ID && s.Expect == ExpectViolation })
		has := slices.ContainsFunc(all, func(s Scenario) bool { return s.Bug == b.ID })
		switch {
		case b.OutOfReach == "" && !reproduces:
			return fmt.Errorf("bug %q has no scenario that expects its violation: add one, or say why it is out of reach", b.ID)
		case b.OutOfReach != "" && has:
			return fmt.Errorf("bug %q is out of reach but has scenarios", b.ID)
		}
	}
	return nil
}

// ParseBugs reads the bugs list of a scenario file (bugs.yaml); a file
// without one has none. Parse checks the list against the scenarios.
func ParseBugs(b []byte, name string) ([]reports.Bug, error) {
	var f file
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return f.Bugs, nil
}

// scenarioLines returns the line of each item of the top-level scenarios
// list.
func scenarioLines(doc *yaml.Node) []int {
	var out []int
	for _, it := range scenarioItems(doc) {
		out = append(out, it.Line)
	}
	return out
}

// scenarioItems returns the items of the top-level scenarios list.
func scenarioItems(doc *yaml.Node) []*yaml.Node {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "scenarios" && m.Content[i+1].Kind == yaml.SequenceNode {
			return m.Content[i+1].Content
		}
	}
	return nil
}

// lineRE finds the line number yaml puts at the start of an error.
var lineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// decodeError turns an error of the YAML decoder into one line that names
// the file, the line and, when the line is inside one, the scenario:
// `my.yaml: line 9: field bogus not found (in scenario "a")`. Of several
// errors (a wrong type in two fields) the first is given, with how many
// follow.
func decodeError(file string, doc *yaml.Node, err error) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msgs = te.Errors
	}
	msg := oneLine(errors.New(msgs[0]))
	if len(msgs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(msgs)-1)
	}
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%s: %s", file, msg)
	}
	line, _ := strconv.Atoi(m[1])
	if sc, ok := scenarioAt(doc, line); ok {
		msg += " (in scenario " + sc + ")"
	}
	return fmt.Errorf("%s: %s", file, msg)
}

// scenarioAt names the scenario of the top-level list that line falls in:
// by its name, or by its position when it has none yet.
func scenarioAt(doc *yaml.Node, line int) (string, bool) {
	items := scenarioItems(doc)
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Line > line {
			continue
		}
		it := items[i]
		for j := 0; it.Kind == yaml.MappingNode && j+1 < len(it.Content); j += 2 {
			if it.Content[j].Value == "name" && it.Content[j+1].Value != "" {
				return strconv.Quote(it.Content[j+1].Value), true
			}
		}
		return strconv.Itoa(i + 1), true
	}
	return "", false
}

func oneLine(err error) string {
	msg := strings.NewReplacer("yaml: ", "", "unmarshal errors:", "", " in type scenarios.Scenario", "", " in type scenarios.file", "").Replace(err.Error())
	return strings.Join(strings.Fields(msg), " ")
}

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Validate checks the scenario's own fields and that its run settings make
// a valid run.
func (s Scenario) Validate() error {
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("name %q must be lower-case words joined by dashes", s.Name)
	case s.Title == "":
		return errors.New("title is missing: say what the claim is")
	case s.Source == "":
		return errors.New("source is missing: say where the claim comes from")
	case s.Expect != ExpectViolation && s.Expect != ExpectSafe:
		return fmt.Errorf("expect must be %s or %s, got %q", ExpectViolation, ExpectSafe, s.Expect)
	case len(s.Predictions) == 0:
		return errors.New("predictions are missing: say what each side expects")
	case s.Impl() == "":
		return errors.New("impl is missing: name the lock implementation (locktest list), or an external client")
	case s.Expect == ExpectSafe && len(s.Anomalies) > 0:
		return errors.New("anomalies are for a scenario that expects a violation; a safe one counts every anomaly")
	}
	for _, k := range s.Anomalies {
		if !checker.IsAnomalyKind(k) {
			return fmt.Errorf("anomalies: unknown kind %q; the checkers report %s", k, strings.Join(checker.AnomalyKinds, ", "))
		}
	}
	for side, p := range s.Predictions {
		if Outcome(p) == "" {
			return fmt.Errorf("prediction of %s must start with violation or safe, got %q", side, p)
		}
	}
	cfg, err := s.Config(run.DefaultConfig())
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	return nil
}

// Outcome returns the outcome a prediction names: its first word,
// violation or safe; "" when it names neither.
func Outcome(prediction string) string {
	w := strings.ToLower(strings.TrimSpace(prediction))
	for _, o := range []string{ExpectViolation, ExpectSafe} {
		if w == o || strings.HasPrefix(w, o+" ") || strings.HasPrefix(w, o+",") || strings.HasPrefix(w, o+":") {
			return o
		}
	}
	return ""
}

// Sides returns the scenario's prediction sides: kleppmann and antirez
// first, then the others in name order.
func (s Scenario) Sides() []string {
	var out []string
	for side := range s.Predictions {
		out = append(out, side)
	}
	rank := func(x string) string {
		switch x {
		case "kleppmann":
			return "0"
		case "antirez":
			return "1"
		}
		return "2" + x
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(rank(a), rank(b)) })
	return out
}

// Config returns the run of the scenario: base, with the scenario's
// settings applied. The run is named after the scenario and expects
// "invalid" for a violation scenario.
func (s Scenario) Config(base run.Config) (run.Config, error) {
	c := base
	c.Name = s.Name
	c.Expect = "valid"
	if s.Expect == ExpectViolation {
		c.Expect = "invalid"
		// A run that expects a violation stops at its first one (a
		// grace after it), unless the scenario says otherwise: the rest
		// of the run could not change its outcome.
		c.StopOnViolation = true
	}
	for _, set := range run.Settings {
		text, ok := s.Settings[set.Key()]
		if !ok {
			continue
		}
		if err := c.Set(set.Name, text); err != nil {
			return c, fmt.Errorf("%s: %v", set.Key(), err)
		}
	}
	if s.Plan != nil {
		p := *s.Plan
		c.Plan = &p
	}
	// down: a scenario that kills nodes and does not say how long they stay
	// down restarts them at once.
	if _, ok := s.Settings["down"]; !ok && nemesis.Reads(checker.FaultParts(c.Faults), "down") {
		nemesis.Down.Set(&c.FaultSettings, 0)
	}
	return c, nil
}

// Command returns the `locktest run` command line that makes one run of
// the scenario with seed.
func (s Scenario) Command(seed int64) string {
	if s.Plan != nil {
		// Its steps are in the scenario file, not on a command line.
		return fmt.Sprintf("locktest debate --only %s --seeds 1 --seed %d", s.Name, seed)
	}
	a := []string{"locktest", "run", "--impl", s.Impl(), "--name", s.Name}
	if s.Settings["client"] != "" {
		a[2] = "--client"
	}
	for _, set := range run.Settings {
		text, ok := s.Settings[set.Key()]
		switch {
		case !ok || set.Name == "impl" || set.Name == "client":
		case text == "true" && set.Field(new(run.Config)).Type() == "bool":
			a = append(a, "--"+set.Name)
		default:
			a = append(a, "--"+set.Name, quote(text))
		}
	}
	if _, ok := s.Settings["down"]; !ok && nemesis.Reads(checker.FaultParts(s.Faults()), "down") {
		a = append(a, "--down", "0s")
	}
	if s.Expect == ExpectViolation {
		if _, given := s.Settings["stop_on_violation"]; !given {
			a = append(a, "--stop-on-violation")
		}
		a = append(a, "--expect", "invalid")
	}
	a = append(a, "--seed", strconv.FormatInt(seed, 10))
	return strings.Join(a, " ")
}

func quote(s string) string {
	if strings.ContainsAny(s, " ;'\"$|&<>") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Select returns the scenarios whose name, or claim number, is in only;
// empty only selects all. A name may end in * to match a prefix. A
// selector that matches nothing is an error.
func Select(all []Scenario, only []string) ([]Scenario, error) {
	if len(only) == 0 {
		return all, nil
	}
	var out []Scenario
	for _, sel := range only {
		n := 0
		for _, s := range all {
			if matches(s, sel) && !slices.ContainsFunc(out, func(o Scenario) bool { return o.Name == s.Name }) {
				out = append(out, s)
			}
			if matches(s, sel) {
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("no scenario %q (see locktest debate --list)", sel)
		}
	}
	// Keep catalogue order.
	slices.SortStableFunc(out, func(a, b Scenario) int {
		return slices.IndexFunc(all, func(s Scenario) bool { return s.Name == a.Name }) -
			slices.IndexFunc(all, func(s Scenario) bool { return s.Name == b.Name })
	})
	return out, nil
}

// ByImpl keeps the scenarios whose runs use one of impls (an impl's name,
// or an external client's), in catalogue order; none given keeps all. An
// impl no scenario uses is an error.
func ByImpl(all []Scenario, impls []string) ([]Scenario, error) {
	if len(impls) == 0 {
		return all, nil
	}
	var out []Scenario
	for _, s := range all {
		if slices.Contains(impls, s.Impl()) {
			out = append(out, s)
		}
	}
	for _, i := range impls {
		if !slices.ContainsFunc(out, func(s Scenario) bool { return s.Impl() == i }) {
			return nil, fmt.Errorf("no scenario runs %q (see locktest debate --list)", i)
		}
	}
	return out, nil
}

func matches(s Scenario, sel string) bool {
	if n, err := strconv.Atoi(sel); err == nil {
		return s.Claim == n
	}
	if p, ok := strings.CutSuffix(sel, "*"); ok {
		return strings.HasPrefix(s.Name, p)
	}
	return s.Name == sel || (s.Bug != "" && s.Bug == sel)
}
