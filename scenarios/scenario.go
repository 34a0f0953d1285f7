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
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/workloads"
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

// Duration is a time.Duration written as Go writes it ("300ms", "2s").
type Duration time.Duration

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (e.g. 300ms, 2s)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Scenario is one claim and the run that tests it. Zero run settings keep
// the defaults of `locktest run`.
type Scenario struct {
	// Name is unique in a catalogue: lower-case words joined by dashes; it
	// names the runs' folder and the make target repro-<name>.
	Name string `yaml:"name"`
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

	Impl           string              `yaml:"impl"`
	Resource       string              `yaml:"resource"`
	Clients        int                 `yaml:"clients"`
	Locks          int                 `yaml:"locks"`
	Faults         []string            `yaml:"faults"`
	Partition      string              `yaml:"partition"`
	Targets        map[string][]string `yaml:"targets"`
	ClockDirection string              `yaml:"clock_direction"`
	ClockBump      Duration            `yaml:"clock_bump"`
	Stagger        Duration            `yaml:"stagger"`
	PausePoint     string              `yaml:"pause_point"`
	Pause          Duration            `yaml:"pause"`
	Down           Duration            `yaml:"down"`
	Window         Duration            `yaml:"window"`
	Interval       Duration            `yaml:"interval"`
	Quiet          Duration            `yaml:"quiet"`
	KillHolder     bool                `yaml:"kill_holder"`
	Persistence    string              `yaml:"persistence"`
	TTL            Duration            `yaml:"ttl"`
	Time           Duration            `yaml:"time"`
	Work           Duration            `yaml:"work"`
	WorkMin        Duration            `yaml:"work_min"`
	Think          Duration            `yaml:"think"`
	Retry          Duration            `yaml:"retry"`
	OpTimeout      Duration            `yaml:"op_timeout"`
	ImplOpts       map[string]string   `yaml:"impl_opts"`
	ClusterOpts    map[string]string   `yaml:"cluster_opts"`
}

// file is the layout of a scenario file.
type file struct {
	Scenarios []Scenario `yaml:"scenarios"`
}

// Builtin returns the built-in catalogue.
func Builtin() []Scenario {
	s, err := Parse(builtin, "debate.yaml")
	if err != nil {
		panic("scenarios: the built-in catalogue is broken: " + err.Error()) // caught by the tests
	}
	return s
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
	lines := scenarioLines(&doc)
	seen := map[string]bool{}
	for i, s := range f.Scenarios {
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
	}
	return f.Scenarios, nil
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
	case s.Impl == "":
		return errors.New("impl is missing: name the lock implementation (locktest list)")
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
	c.Name, c.Impl = s.Name, s.Impl
	c.Faults = slices.Clone(s.Faults)
	c.Expect = "valid"
	if s.Expect == ExpectViolation {
		c.Expect = "invalid"
	}
	if s.Resource != "" {
		c.Mode = workloads.Mode(s.Resource)
	}
	setInt := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	setInt(&c.Clients, s.Clients)
	setInt(&c.Locks, s.Locks)
	for _, d := range s.durations(&c) {
		if d.v != 0 {
			*d.dst = time.Duration(d.v)
		}
	}
	// down: 0s is meaningful (restart at once), so it is set whenever the
	// scenario has a fault that reads it (kill-node).
	if s.Down != 0 || nemesis.Reads(checker.FaultParts(s.Faults), "down") {
		c.NodeDown = time.Duration(s.Down)
	}
	if s.PausePoint != "" {
		c.PausePoint = s.PausePoint
		if s.PausePoint == "random" {
			c.PausePoint = ""
		}
	}
	if s.Partition != "" {
		g, err := run.ParseGroups(s.Partition)
		if err != nil {
			return c, fmt.Errorf("partition: %v", err)
		}
		c.Groups = g
	}
	c.Targets = s.Targets
	for f := range s.Targets {
		if !nemesis.Known(f) {
			return c, fmt.Errorf("targets: unknown fault %q", f)
		}
	}
	c.ClockDirection = s.ClockDirection
	c.KillHolder = s.KillHolder
	c.Persistence = s.Persistence
	c.ImplParams, c.ClusterParams = s.ImplOpts, s.ClusterOpts
	return c, nil
}

// durationSetting is one duration of a scenario: its value, the run
// setting it sets and the `locktest run` flag that sets it.
type durationSetting struct {
	v    Duration
	dst  *time.Duration
	flag string
}

// durations lists the scenario's durations (down aside, whose zero is
// meaningful), pointing into c.
func (s Scenario) durations(c *run.Config) []durationSetting {
	return []durationSetting{
		{s.ClockBump, &c.ClockBump, "--clock-bump"}, {s.Stagger, &c.Stagger, "--stagger"}, {s.Pause, &c.ClientPause, "--pause"},
		{s.Window, &c.Window, "--window"}, {s.Interval, &c.Interval, "--interval"}, {s.Quiet, &c.Quiet, "--quiet-time"},
		{s.TTL, &c.TTL, "--ttl"}, {s.Time, &c.Duration, "--time"}, {s.Work, &c.Work, "--work"}, {s.WorkMin, &c.WorkMin, "--work-min"},
		{s.Think, &c.Think, "--think"}, {s.Retry, &c.Retry, "--retry"}, {s.OpTimeout, &c.Timeout, "--op-timeout"},
	}
}

// Command returns the `locktest run` command line that makes one run of
// the scenario with seed.
func (s Scenario) Command(seed int64) string {
	a := []string{"locktest", "run", "--impl", s.Impl, "--name", s.Name}
	add := func(flag, v string) {
		if v != "" && v != "0s" && v != "0" {
			a = append(a, flag, quote(v))
		}
	}
	add("--resource", s.Resource)
	if s.Clients != 0 {
		add("--clients", strconv.Itoa(s.Clients))
	}
	add("--faults", strings.Join(s.Faults, ","))
	add("--partition", s.Partition)
	var pins []string
	for _, f := range sortedKeys(s.Targets) {
		pins = append(pins, f+"="+strings.Join(s.Targets[f], ","))
	}
	add("--target", strings.Join(pins, ";"))
	add("--clock-direction", s.ClockDirection)
	for _, d := range s.durations(&run.Config{}) {
		add(d.flag, time.Duration(d.v).String())
	}
	if nemesis.Reads(checker.FaultParts(s.Faults), "down") {
		a = append(a, "--down", time.Duration(s.Down).String())
	}
	add("--pause-point", s.PausePoint)
	if s.KillHolder {
		a = append(a, "--kill-holder")
	}
	add("--persistence", s.Persistence)
	for _, k := range sortedKeys(s.ImplOpts) {
		a = append(a, "--impl-opt", quote(k+"="+s.ImplOpts[k]))
	}
	for _, k := range sortedKeys(s.ClusterOpts) {
		a = append(a, "--cluster-opt", quote(k+"="+s.ClusterOpts[k]))
	}
	if s.Expect == ExpectViolation {
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

func matches(s Scenario, sel string) bool {
	if n, err := strconv.Atoi(sel); err == nil {
		return s.Claim == n
	}
	if p, ok := strings.CutSuffix(sel, "*"); ok {
		return strings.HasPrefix(s.Name, p)
	}
	return s.Name == sel
}
