package nemesis

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
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
// ("pause", "window"), and declared once (NewSetting), in the file of the
// fault that owns it (the window, which most faults read, here): its
// flag's help, its kind of value, its default and the bound its values
// keep. The faults that read it name it in Spec.Settings; Register refuses
// a name that no declaration made. The run's flags, scenario keys and
// results are made from the declarations (Declared), so a new setting
// needs nothing outside its fault's file. Its value travels in Values: a
// run sets it (Set), a fault reads it (Of), a schedule records it as its
// flag's text (Plan), and a replay parses that text back (BuildPlan).
type Setting[T any] struct {
	name  string
	doc   string
	kind  Kind[T]
	def   T
	bound Bound[T]
}

// Kind is how the values of a type are written: the type's name in the
// flag's help ("duration"), and its text, as its flag, a scenario file, the
// run's results and a schedule file take it. Parse's error says what the
// text should have been.
type Kind[T any] struct {
	Type   string
	Parse  func(string) (T, error)
	Format func(T) string
}

// The kinds of the fault settings.
var (
	// Duration is a Go duration ("1.5s").
	Duration = Kind[time.Duration]{"duration", ParseAs(time.ParseDuration, "a duration (e.g. 300ms, 2s)"), time.Duration.String}
	// Number is a floating-point number.
	Number = Kind[float64]{"float", ParseAs(func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, "a number"),
		func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }}
	// Switch is true or false; a flag of it without a value is true.
	Switch = Kind[bool]{"bool", ParseAs(strconv.ParseBool, "true or false"), strconv.FormatBool}
	// Text is a string, as given.
	Text = Kind[string]{"string", func(s string) (string, error) { return s, nil }, func(s string) string { return s }}
	// Groups are hosts by commas, groups by slashes (ParseGroups).
	Groups = Kind[[][]string]{"groups", ParseGroups, FormatGroups}
)

// ParseAs wraps a parser so that its error quotes the text and says what
// it should be (want): "\"soon\" is not a duration (e.g. 300ms, 2s)".
func ParseAs[T any](parse func(string) (T, error), want string) func(string) (T, error) {
	return func(s string) (T, error) {
		x, err := parse(s)
		if err != nil {
			return x, fmt.Errorf("%q is not %s", s, want)
		}
		return x, nil
	}
}

// Bound is the rule a setting's values keep: OK says whether a value
// keeps it, and Rule says what the value must be ("must be positive"). A
// Bound without OK allows every value.
type Bound[T any] struct {
	Rule string
	OK   func(T) bool
}

// The usual bounds of a duration.
var (
	positiveDuration    = Bound[time.Duration]{"must be positive", func(d time.Duration) bool { return d > 0 }}
	nonNegativeDuration = Bound[time.Duration]{"must not be negative", func(d time.Duration) bool { return d >= 0 }}
)

// AnySetting is a Setting with its type left out: what a run's flag, its
// scenario key, its results and a schedule's record and replay need of it.
type AnySetting interface {
	// Name is the setting's flag name.
	Name() string
	// Doc is the flag's help, without the faults that read it (Readers).
	Doc() string
	// Type names the kind of value, for the help ("duration").
	Type() string
	// Text renders the setting's value in h as its flag takes it.
	Text(h Holder) string
	// SetText parses a flag's text into vs's value of the setting; an
	// error says what the text should have been. It does not check the
	// bound (Check does).
	SetText(vs *Values, s string) error
	// Check returns nil when the value in h keeps the setting's bound,
	// else an error saying what it must be and what it is: "must be
	// positive, got 0s".
	Check(h Holder) error
	// setDefault gives the setting its default in vs.
	setDefault(vs *Values)
}

// declared are the declared settings by flag name.
var declared = map[string]AnySetting{}

// NewSetting declares the fault setting of the flag --name: a value of
// kind, def where the run gives none (Defaults), doc its flag's help and
// bound the rule its values keep (a zero Bound: none). It panics on a
// name declared twice: a programming error found at start-up.
func NewSetting[T any](name string, kind Kind[T], def T, doc string, bound Bound[T]) *Setting[T] {
	if _, dup := declared[name]; dup {
		panic(fmt.Sprintf("nemesis: setting %q declared twice", name))
	}
	s := &Setting[T]{name: name, doc: doc, kind: kind, def: def, bound: bound}
	declared[name] = s
	return s
}

// Declared returns every declared setting, sorted by name.
func Declared() []AnySetting {
	out := make([]AnySetting, 0, len(declared))
	for _, name := range slices.Sorted(maps.Keys(declared)) {
		out = append(out, declared[name])
	}
	return out
}

// Defaults returns the values of a run that gives no setting: each
// declared setting's default.
func Defaults() Values {
	var vs Values
	for _, s := range declared {
		s.setDefault(&vs)
	}
	return vs
}

// Readers returns the faults that read the setting called name (their
// Spec.Settings name it), sorted: none for a name no setting has.
func Readers(name string) []string {
	var out []string
	for _, s := range Specs() {
		if slices.Contains(s.Settings, name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// Values are the values of fault settings: a run's (run.Config), and an
// Env's. The zero Values has none; a setting without a value reads as its
// type's zero value. Copies made before a Set keep their own values.
type Values struct {
	m map[string]any
}

// Holder is what holds setting values: Values, and an Env (its Settings).
type Holder interface{ values() Values }

func (vs Values) values() Values { return vs }

func (s *Setting[T]) Name() string { return s.name }
func (s *Setting[T]) Doc() string  { return s.doc }
func (s *Setting[T]) Type() string { return s.kind.Type }

// Of returns the setting's value in h: the zero value where none was
// set.
func (s *Setting[T]) Of(h Holder) T {
	v, _ := h.values().m[s.name].(T)
	return v
}

// Set gives the setting the value v in vs. Copies of vs made before keep
// their own value.
func (s *Setting[T]) Set(vs *Values, v T) {
	m := maps.Clone(vs.m)
	if m == nil {
		m = map[string]any{}
	}
	m[s.name] = v
	vs.m = m
}

// Is pairs the setting with the value v, for Env.With.
func (s *Setting[T]) Is(v T) SettingValue {
	return SettingValue{set: func(vs *Values) { s.Set(vs, v) }}
}

// SettingValue is a setting paired with a value (Setting.Is).
type SettingValue struct {
	set func(vs *Values)
}

// With returns a copy of vs with the values svs give; vs itself keeps its
// own.
func (vs Values) With(svs ...SettingValue) Values {
	for _, v := range svs {
		v.set(&vs)
	}
	return vs
}

// With returns a copy of env whose settings have the values svs give
// them; env itself keeps its own.
func (env Env) With(svs ...SettingValue) Env {
	env.Settings = env.Settings.With(svs...)
	return env
}

func (s *Setting[T]) Text(h Holder) string { return s.kind.Format(s.Of(h)) }

func (s *Setting[T]) SetText(vs *Values, text string) error {
	v, err := s.kind.Parse(text)
	if err != nil {
		return err
	}
	s.Set(vs, v)
	return nil
}

func (s *Setting[T]) Check(h Holder) error {
	v := s.Of(h)
	if s.bound.OK == nil || s.bound.OK(v) {
		return nil
	}
	got := s.kind.Format(v)
	if _, text := any(v).(string); text {
		got = strconv.Quote(got)
	}
	return fmt.Errorf("%s, got %s", s.bound.Rule, got)
}

func (s *Setting[T]) setDefault(vs *Values) { s.Set(vs, s.def) }

// Window is how long the faults without a length of their own (node
// pauses, partitions, loss, delay, clock faults) stay before their heal,
// and how long a fault that waits for its moment waits at most.
var Window = NewSetting("window", Duration, 2*time.Second,
	"how long a fault without a length of its own lasts (a killed client's absence included), and how long a fault that waits for its moment (an unsynced write, a client's acquire) waits at most",
	positiveDuration)

// settingsOf returns the settings the fault of spec reads, by flag name,
// as env has them.
func settingsOf(spec *Spec, env Env) map[string]string {
	if len(spec.Settings) == 0 {
		return nil
	}
	out := make(map[string]string, len(spec.Settings))
	for _, name := range spec.Settings {
		out[name] = declared[name].Text(env)
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
