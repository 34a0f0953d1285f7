package nemesis

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// positive refuses duration settings of which one is not positive, naming
// them ("fault window", "delay and fault window") and their values in the
// error.
func positive(what string, ds ...time.Duration) error {
	if !slices.ContainsFunc(ds, func(d time.Duration) bool { return d <= 0 }) {
		return nil
	}
	got := make([]string, len(ds))
	for i, d := range ds {
		got[i] = d.String()
	}
	return fmt.Errorf("%s must be positive, got %s", what, strings.Join(got, " and "))
}

// clockEnv checks the settings of the faults that move a clock, a node's
// or a worker's: a jump and a window to keep it for.
func clockEnv(env Env) error {
	if ClockBump.Of(env) == 0 || Window.Of(env) <= 0 {
		return fmt.Errorf("clock bump must be non-zero and the fault window positive, got %v and %v", ClockBump.Of(env), Window.Of(env))
	}
	return nil
}

// Setting is one run setting that faults read, named as its flag
// ("pause", "window"). Each is declared once, in the file of the fault
// that owns it (the window, which most faults read, here), and the faults
// that read it name it in Spec.Settings; Register refuses a name that no
// declaration made. Its value travels in Env: a run sets it (Set), a fault
// reads it (Of), a schedule records it as its flag's text (Plan), and a
// replay parses that text back (BuildPlan).
type Setting[T any] struct {
	name   string
	parse  func(string) (T, error)
	format func(T) string
}

// setting is a Setting with its type left out: what a plan's record and
// its replay need of it.
type setting interface {
	// text renders the setting's value in env as its flag takes it.
	text(env Env) string
	// setText parses a flag's text into env's value of the setting; an
	// error says what the text should have been.
	setText(env *Env, s string) error
}

// settings are the declared settings by flag name.
var settings = map[string]setting{}

// newSetting declares the setting of the flag name, whose text parse reads
// and format writes. It panics on a name declared twice: a programming
// error found at start-up.
func newSetting[T any](name string, parse func(string) (T, error), format func(T) string) *Setting[T] {
	if _, dup := settings[name]; dup {
		panic(fmt.Sprintf("nemesis: setting %q declared twice", name))
	}
	s := &Setting[T]{name: name, parse: parse, format: format}
	settings[name] = s
	return s
}

// newDuration declares a duration setting, as time.ParseDuration reads it.
func newDuration(name string) *Setting[time.Duration] {
	return newSetting(name, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("want a duration such as 1.5s, got %q", s)
		}
		return d, nil
	}, time.Duration.String)
}

// Name is the setting's flag name.
func (s *Setting[T]) Name() string { return s.name }

// Of returns the setting's value in env: the zero value where the run did
// not set it.
func (s *Setting[T]) Of(env Env) T {
	v, _ := env.settings[s.name].(T)
	return v
}

// Set gives the setting the value v in env. Copies of env made before keep
// their own value.
func (s *Setting[T]) Set(env *Env, v T) {
	m := maps.Clone(env.settings)
	if m == nil {
		m = map[string]any{}
	}
	m[s.name] = v
	env.settings = m
}

// Is pairs the setting with the value v, for Env.With.
func (s *Setting[T]) Is(v T) SettingValue {
	return SettingValue{set: func(env *Env) { s.Set(env, v) }}
}

// SettingValue is a setting paired with a value (Setting.Is).
type SettingValue struct {
	set func(env *Env)
}

// With returns a copy of env whose settings have the values vs give them;
// env itself keeps its own.
func (env Env) With(vs ...SettingValue) Env {
	for _, v := range vs {
		v.set(&env)
	}
	return env
}

func (s *Setting[T]) text(env Env) string { return s.format(s.Of(env)) }

func (s *Setting[T]) setText(env *Env, text string) error {
	v, err := s.parse(text)
	if err != nil {
		return err
	}
	s.Set(env, v)
	return nil
}

// Window is how long the faults without a length of their own (node
// pauses, partitions, loss, delay, clock faults) stay before their heal,
// and how long a fault that waits for its moment waits at most.
var Window = newDuration("window")

// settingsOf returns the settings the fault of spec reads, by flag name,
// as env has them.
func settingsOf(spec *Spec, env Env) map[string]string {
	if len(spec.Settings) == 0 {
		return nil
	}
	out := make(map[string]string, len(spec.Settings))
	for _, name := range spec.Settings {
		out[name] = settings[name].text(env)
	}
	return out
}

// ParseGroups reads an explicit partition, "n1,n2/n3,c0": groups separated
// by slashes, hosts by commas. It refuses an empty group and fewer than
// two groups.
func ParseGroups(s string) ([][]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out [][]string
	for _, g := range strings.Split(s, "/") {
		hosts := hostList(g)
		if len(hosts) == 0 {
			return nil, fmt.Errorf("empty group in %q", s)
		}
		out = append(out, hosts)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%q has one group; a partition needs two or more, separated by /", s)
	}
	return out, nil
}

// hostList reads hosts separated by commas, skipping blanks: a group of
// ParseGroups, a side of a cut (parseCut).
func hostList(s string) []string {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// FormatGroups renders groups as ParseGroups reads them.
func FormatGroups(groups [][]string) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = strings.Join(g, ",")
	}
	return strings.Join(parts, "/")
}
