package scenarios

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/workloads"
)

// The built-in catalogue covers every claim of the debate, and each of its
// scenarios makes a valid run.
func TestBuiltinCatalogue(t *testing.T) {
	all := Builtin()
	claims := map[int]bool{}
	for _, s := range all {
		claims[s.Claim] = true
		cfg, err := s.Config(run.DefaultConfig())
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if s.Expect == ExpectViolation && cfg.Expect != "invalid" {
			t.Errorf("%s expects a violation but its run expects %s", s.Name, cfg.Expect)
		}
		// A run that expects a violation stops at its first one; one that
		// expects safety runs its whole time.
		if cfg.StopOnViolation != (s.Expect == ExpectViolation) {
			t.Errorf("%s (expects %s): stop-on-violation %v", s.Name, s.Expect, cfg.StopOnViolation)
		}
		if cmd := s.Command(1); strings.Contains(cmd, "--stop-on-violation") != cfg.StopOnViolation {
			t.Errorf("%s: its command %q and its run disagree on --stop-on-violation", s.Name, cmd)
		}
		for _, side := range s.Sides() {
			if Outcome(s.Predictions[side]) == "" {
				t.Errorf("%s: %s's prediction %q names no outcome", s.Name, side, s.Predictions[side])
			}
		}
	}
	for c := 1; c <= 12; c++ {
		if !claims[c] {
			t.Errorf("claim %d has no scenario", c)
		}
	}
	// The claims as the issue states them.
	byName := map[string]Scenario{}
	for _, s := range all {
		byName[s.Name] = s
	}
	jump := byName["redlock-clock-jump"]
	cfg, _ := jump.Config(run.DefaultConfig())
	groups := nemesis.Partition.Of(cfg.FaultSettings)
	if cfg.Impl != "redlock" || !slices.Equal(cfg.Targets["clock-bump"], []string{"n3"}) || nemesis.ClockDirection.Of(cfg.FaultSettings) != "forward" ||
		len(groups) != 2 || !slices.Contains(groups[0], "n3") || !slices.Contains(groups[1], "n3") {
		t.Errorf("redlock-clock-jump is not Kleppmann's case: %+v", cfg)
	}
	restart := byName["redlock-restart-without-persistence"]
	cfg, _ = restart.Config(run.DefaultConfig())
	if down := nemesis.Down.Of(cfg.FaultSettings); down != 0 || cfg.Persistence != "off" {
		t.Errorf("redlock-restart-without-persistence restarts after %v with persistence %q", down, cfg.Persistence)
	}
	control := byName["redlock-control"]
	cfg, _ = control.Config(run.DefaultConfig())
	down, pause := nemesis.Down.Of(cfg.FaultSettings), nemesis.Pause.Of(cfg.FaultSettings)
	if down < cfg.TTL || pause >= cfg.TTL/2 || slices.ContainsFunc(cfg.Faults, func(f string) bool { return strings.Contains(f, "clock") }) {
		t.Errorf("redlock-control is outside antirez's conditions: down %v, pause %v, ttl %v, faults %v", down, pause, cfg.TTL, cfg.Faults)
	}
	if byName["etcd-pause-guarded"].Settings["resource"] != string(workloads.ModeEtcdGuarded) {
		t.Error("etcd-pause-guarded does not guard")
	}
}

// scenarioHead is a file of one valid scenario, a, named up to its impl,
// which the tests below end with the fields they test: a fault or a
// schedule.
const scenarioHead = `scenarios:
  - name: a
    claim: 1
    title: t
    source: s
    predictions: {kleppmann: violation}
    expect: violation
    impl: redis-set-nx-px
`

func TestParseErrors(t *testing.T) {
	const good = scenarioHead + `    faults: [pause-client]
`
	if s, err := Parse([]byte(good), "f.yaml"); err != nil || len(s) != 1 || s[0].Name != "a" {
		t.Fatalf("good file: %v, %v", s, err)
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", strings.Replace(good, "claim: 1", "claim: 1\n    colour: red", 1), `f.yaml: line 4: field colour not found (in scenario "a")`},
		{"bad duration", good + "    ttl: soon\n", `f.yaml: line 10: ttl: "soon" is not a duration (e.g. 300ms, 2s) (in scenario "a")`},
		{"wrong type", strings.Replace(good, "claim: 1", "claim: one", 1), "f.yaml: line 3: cannot unmarshal !!str `one` into int (in scenario \"a\")"},
		{"two wrong types", good + "    clients: many\n    kill_holder: maybe\n", "f.yaml: line 10: cannot unmarshal !!str `many` into int (and 1 more) (in scenario \"a\")"},
		{"wrong type in the second scenario", good + strings.Replace(strings.TrimPrefix(good, "scenarios:\n"), "name: a", "name: b", 1) + "    locks: [1]\n",
			"f.yaml: line 18: cannot unmarshal !!seq into int (in scenario \"b\")"},
		{"unnamed scenario", "scenarios:\n  - claim: x\n", "f.yaml: line 2: cannot unmarshal !!str `x` into int (in scenario 1)"},
		{"scenarios not a list", "scenarios: 3\n", "f.yaml: line 1: cannot unmarshal !!int `3`"},
		{"no impl", strings.Replace(good, "    impl: redis-set-nx-px\n", "", 1), `f.yaml:2: scenario "a": impl is missing`},
		{"bad expect", strings.Replace(good, "expect: violation", "expect: maybe", 1), `f.yaml:2: scenario "a": expect must be violation or safe`},
		{"duplicate", good + strings.TrimPrefix(good, "scenarios:\n"), `f.yaml:10: scenario "a": the name is used twice`},
		{"unknown impl", strings.Replace(good, "redis-set-nx-px", "redis-magic", 1), `--impl: `},
		{"unknown fault", strings.Replace(good, "[pause-client]", "[pause-client+explode]", 1), `unknown fault "pause-client+explode"`},
		{"prediction", strings.Replace(good, "{kleppmann: violation}", "{kleppmann: probably fine}", 1), "must start with violation or safe"},
		{"bad name", strings.Replace(good, "name: a", "name: Big Name", 1), "lower-case words"},
		{"safe with anomalies", strings.Replace(good, "expect: violation", "expect: safe\n    anomalies: [stale-write]", 1), "anomalies are for a scenario that expects a violation"},
		{"unknown anomaly kind", strings.Replace(good, "expect: violation", "expect: violation\n    anomalies: [stale-write, double-hold]", 1), `f.yaml:2: scenario "a": anomalies: unknown kind "double-hold"; the checkers report overlapping-holds, `},
		{"partition", good + "    partition: n1\n", "partition: "},
		{"empty", "scenarios: []\n", "no scenarios"},
		{"not yaml", "scenarios: [\n", "f.yaml: line 1: did not find expected node content"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml), "f.yaml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", tt.name, err)
		}
	}
}

func TestConfigKeepsDefaultsAndAppliesSettings(t *testing.T) {
	s := Scenario{Name: "x", Expect: ExpectSafe, Settings: map[string]string{"impl": "redlock", "faults": "partition+kill-node",
		"partition": "n1,c0/n2,c1", "ttl": "2s", "stagger": "1s", "persistence": "off"}}
	base := run.DefaultConfig()
	base.StoreDir = "/somewhere"
	cfg, err := s.Config(base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StoreDir != "/somewhere" || cfg.Clients != base.Clients || cfg.Interval != base.Interval {
		t.Errorf("base settings lost: %+v", cfg)
	}
	down := nemesis.Down.Of(cfg.FaultSettings)
	if cfg.TTL != 2*time.Second || cfg.Stagger != time.Second || down != 0 || cfg.Name != "x" || cfg.Expect != "valid" {
		t.Errorf("scenario settings not applied: ttl %v stagger %v down %v name %q expect %q", cfg.TTL, cfg.Stagger, down, cfg.Name, cfg.Expect)
	}
	if groups := nemesis.Partition.Of(cfg.FaultSettings); len(groups) != 2 || groups[1][1] != "c1" {
		t.Errorf("groups %v", groups)
	}
	want := "locktest run --impl redlock --name x --ttl 2s --faults partition+kill-node --partition n1,c0/n2,c1 --stagger 1s --persistence off --down 0s --seed 3"
	if got := s.Command(3); got != want {
		t.Errorf("command\n%s\nwant\n%s", got, want)
	}
}

func TestSelect(t *testing.T) {
	all := []Scenario{{Name: "a-one", Claim: 1}, {Name: "a-two", Claim: 1}, {Name: "b", Claim: 2}, {Name: "c", Claim: 3}}
	names := func(s []Scenario) string {
		var n []string
		for _, x := range s {
			n = append(n, x.Name)
		}
		return strings.Join(n, ",")
	}
	for _, tt := range []struct {
		only []string
		want string
	}{
		{nil, "a-one,a-two,b,c"},
		{[]string{"c", "1"}, "a-one,a-two,c"},
		{[]string{"a-*"}, "a-one,a-two"},
		{[]string{"b", "2"}, "b"},
	} {
		got, err := Select(all, tt.only)
		if err != nil || names(got) != tt.want {
			t.Errorf("Select(%v) = %s, %v; want %s", tt.only, names(got), err, tt.want)
		}
	}
	if _, err := Select(all, []string{"zzz"}); err == nil {
		t.Error("a selector that matches nothing was accepted")
	}
}

func TestOutcome(t *testing.T) {
	for in, want := range map[string]string{
		"violation — two holders": ExpectViolation, "Safe: fenced": ExpectSafe, "safe, if ...": ExpectSafe,
		"violations galore": "", "maybe": "", "": "",
	} {
		if got := Outcome(in); got != want {
			t.Errorf("Outcome(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every source a built-in scenario cites by name is listed, with a title,
// once; a source without a name or title is refused.
func TestBuiltinSourcesAreCitedAndListed(t *testing.T) {
	srcs := BuiltinSources()
	names := map[string]bool{}
	for _, s := range srcs {
		if names[s.Name] {
			t.Errorf("source %q listed twice", s.Name)
		}
		names[s.Name] = true
	}
	for _, want := range []string{"Kleppmann (2016)", "antirez (2016)", "Jepsen (2020)", "the lock-selection articles"} {
		if !names[want] {
			t.Errorf("no source %q", want)
		}
	}
	for _, sc := range Builtin() {
		cited := false
		for n := range names {
			cited = cited || strings.Contains(sc.Source, strings.TrimSuffix(n, " (2016)")) || strings.Contains(sc.Source, strings.TrimSuffix(n, " (2020)"))
		}
		if !cited {
			t.Errorf("scenario %s cites %q, which names no listed source", sc.Name, sc.Source)
		}
	}
	if _, err := ParseSources([]byte("sources:\n  - name: x\nscenarios: []\n"), "f.yaml"); err == nil {
		t.Error("a source without a title accepted")
	}
}

// TestScenarioSchedule: a scenario's explicit steps (schedule:) are a
// plan in schedule.json's format: its runs inject exactly them, and a bad
// step is one line naming the scenario's line, the entry and the field.
func TestScenarioSchedule(t *testing.T) {
	const good = scenarioHead + `    ttl: 300ms
    schedule:
      - {at: 1s, fault: pause-client, pins: [p0], settings: {pause: 1200ms, pause-point: before-write}, lasts: 1200ms}
      - {at: 4s, fault: kill-node, lasts: 0s}
`
	s, err := Parse([]byte(good), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := s[0].Plan
	if p == nil || len(p.Faults) != 2 || p.Faults[0].At != time.Second || p.Faults[0].Settings["pause"] != "1200ms" || p.Faults[1].Fault != "kill-node" {
		t.Fatalf("plan %+v", p)
	}
	if f := s[0].Faults(); !slices.Equal(f, []string{"pause-client", "kill-node"}) {
		t.Errorf("Faults() = %v", f)
	}
	cfg, err := s[0].Config(run.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Plan == nil || len(cfg.Plan.Faults) != 2 || len(cfg.Faults) != 0 {
		t.Errorf("config: plan %v, faults %v; want the plan and no --faults", cfg.Plan, cfg.Faults)
	}
	if got, want := s[0].Command(5), "locktest debate --only a --seeds 1 --seed 5"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"bad offset", strings.Replace(good, "at: 4s", "at: soon", 1), `f.yaml: line 12: schedule: faults[1].at: want a duration such as 1.5s, got "soon" (in scenario "a")`},
		{"unknown fault", strings.Replace(good, "fault: kill-node", "fault: meteor", 1), `schedule: faults[1].fault: unknown fault "meteor"`},
		{"unknown field", strings.Replace(good, "lasts: 0s}", "lasts: 0s, colour: red}", 1), `schedule: not a schedule file: unknown field "colour"`},
		{"not a list", strings.Replace(good, "    schedule:\n", "    schedule: 3\n    x:\n", 1), "schedule: want a list of faults"},
		{"with faults", good + "    faults: [kill-node]\n", "faults and schedule both say which faults go in: give one"},
	} {
		_, err := Parse([]byte(tc.yaml), "f.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line containing %q", tc.name, err, tc.want)
		}
	}
}

// TestReproCommand: a built-in scenario reproduces with its make target,
// which runs the built-in catalogue; one read from a user's file with a
// debate of that file, since the make target does not know the file.
func TestReproCommand(t *testing.T) {
	b := Builtin()[0]
	if got, want := b.ReproCommand(), "make repro-"+b.Name; got != want {
		t.Errorf("built-in: %q, want %q", got, want)
	}
	mine, err := Parse([]byte(`scenarios:
  - name: mine
    claim: 1
    title: t
    source: s
    predictions: {me: violation}
    expect: violation
    impl: redis-naive-del
    faults: [pause-client]
`), "my dir/mine.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mine[0].ReproCommand(), "locktest debate --scenarios 'my dir/mine.yaml' --only mine --seeds 10 --until-reproduced"; got != want {
		t.Errorf("from a file: %q, want %q", got, want)
	}
	if got := Score(mine[0], nil, ".", DefaultMaxRate).Repro; got != mine[0].ReproCommand() {
		t.Errorf("the scoreboard row's repro is %q", got)
	}
}

// TestByImpl keeps the scenarios of the impls named, in catalogue order,
// and refuses an impl that no scenario runs.
func TestByImpl(t *testing.T) {
	all := Builtin()
	got, err := ByImpl(all, []string{"etcd-mutex", "redlock"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("no scenario of etcd-mutex or redlock")
	}
	last := -1
	for _, s := range got {
		if s.Impl() != "etcd-mutex" && s.Impl() != "redlock" {
			t.Errorf("%s runs %s", s.Name, s.Impl())
		}
		i := slices.IndexFunc(all, func(o Scenario) bool { return o.Name == s.Name })
		if i < last {
			t.Errorf("%s is out of catalogue order", s.Name)
		}
		last = i
	}
	for _, s := range all {
		if (s.Impl() == "etcd-mutex" || s.Impl() == "redlock") && !slices.ContainsFunc(got, func(o Scenario) bool { return o.Name == s.Name }) {
			t.Errorf("%s is left out", s.Name)
		}
	}
	if same, err := ByImpl(all, nil); err != nil || len(same) != len(all) {
		t.Errorf("no impl named: %d scenarios, %v; want all %d", len(same), err, len(all))
	}
	if _, err := ByImpl(all, []string{"nope"}); err == nil || !strings.Contains(err.Error(), `no scenario runs "nope"`) {
		t.Errorf("an impl no scenario runs: %v", err)
	}
}
