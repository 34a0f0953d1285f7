package provider

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Kind is the type of a provider's setting, which gives its parsing and
// its text.
type Kind string

const (
	// Text is a string.
	Text Kind = "string"
	// Switch is a bool: a flag without a value sets it.
	Switch Kind = "bool"
	// Pairs is key=value pairs separated by commas; a repeated flag adds
	// to them.
	Pairs Kind = "key=value"
)

// Setting is one setting only a provider reads, declared in its folder:
// its name is the flag (--Name) and the key of results.json, Doc its help.
// Its value lives in Values, by name; its default is the empty value.
// Machine says that it names this machine or its hosts (an address, a
// credential), not the run: a schedule file does not record it, and a
// replay elsewhere gives its own.
type Setting struct {
	Name    string
	Doc     string
	Kind    Kind
	Machine bool
}

// Values are the values of providers' settings, by name, each as its
// canonical text (Values.Set). A missing name holds the empty value.
type Values map[string]string

// IsSet reports whether v gives s a value other than its default.
func (v Values) IsSet(s Setting) bool {
	if s.Kind == Switch {
		return v.Switch(s.Name)
	}
	return v[s.Name] != ""
}

// Text returns the value of a Text setting.
func (v Values) Text(name string) string { return v[name] }

// Switch returns the value of a Switch setting.
func (v Values) Switch(name string) bool {
	b, _ := strconv.ParseBool(v[name])
	return b
}

// Pairs returns the value of a Pairs setting as a map (nil when empty).
func (v Values) Pairs(name string) map[string]string {
	if v[name] == "" {
		return nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(v[name], ",") {
		k, val, _ := strings.Cut(kv, "=")
		out[k] = val
	}
	return out
}

// String returns s's value in v as its flag would take it.
func (v Values) String(s Setting) string {
	if s.Kind == Switch {
		return strconv.FormatBool(v.Switch(s.Name))
	}
	return v[s.Name]
}

// Set parses text into s's value in *v, allocating the map: a Pairs
// setting adds text's pairs to those it holds, as a repeated flag does.
func (v *Values) Set(s Setting, text string) error {
	switch s.Kind {
	case Switch:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return err
		}
		text = strconv.FormatBool(b)
	case Pairs:
		m := v.Pairs(s.Name)
		if m == nil {
			m = map[string]string{}
		}
		for _, kv := range strings.Split(text, ",") {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("%s must be formatted as key=value", kv)
			}
			m[k] = val
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+"="+m[k])
		}
		text = strings.Join(parts, ",")
	}
	if *v == nil {
		*v = Values{}
	}
	(*v)[s.Name] = text
	return nil
}

// Reset gives s its default (empty) value in v.
func (v Values) Reset(s Setting) { delete(v, s.Name) }

// Clone returns a copy of v that shares nothing with it.
func (v Values) Clone() Values { return maps.Clone(v) }

// Flag is a setting's value in a Values as a command-line flag takes it
// (a pflag.Value): --Name, with the setting's Doc as its help. A Switch
// flag takes no value (IsBoolFlag).
type Flag struct {
	Setting
	vs *Values
}

// Flag returns s's flag over its value in *v.
func (v *Values) Flag(s Setting) *Flag { return &Flag{s, v} }

func (f *Flag) String() string {
	if f == nil || f.vs == nil {
		return ""
	}
	return f.vs.String(f.Setting)
}
func (f *Flag) Set(text string) error { return f.vs.Set(f.Setting, text) }
func (f *Flag) Type() string          { return string(f.Kind) }

// IsBoolFlag reports whether the flag is a switch, which a flag without a
// value sets.
func (f *Flag) IsBoolFlag() bool { return f.Kind == Switch }

// Reset gives the flag's setting its default (empty) value, where a
// repeated Set would add to a Pairs setting's pairs.
func (f *Flag) Reset() { f.vs.Reset(f.Setting) }
