package provider

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestValuesKeepTheirKind: each kind of setting reads back what a flag
// set, a repeated Pairs flag adds, and a setting at its default is not
// set (so that another provider does not refuse it).
func TestValuesKeepTheirKind(t *testing.T) {
	text, sw, pairs := Setting{Name: "t", Kind: Text}, Setting{Name: "s", Kind: Switch}, Setting{Name: "p", Kind: Pairs}
	var v Values
	for _, s := range []Setting{text, sw, pairs} {
		if v.IsSet(s) {
			t.Errorf("%s is set in empty values", s.Name)
		}
	}
	if v.String(sw) != "false" {
		t.Errorf("a switch's default reads %q, want false", v.String(sw))
	}
	for _, c := range []struct {
		s    Setting
		text string
	}{{text, "a b"}, {sw, "true"}, {pairs, "redis=redis:7.2"}, {pairs, "etcd=x,nats=y"}} {
		if err := v.Set(c.s, c.text); err != nil {
			t.Fatal(err)
		}
	}
	if got := v.String(pairs); got != "etcd=x,nats=y,redis=redis:7.2" {
		t.Errorf("pairs = %q", got)
	}
	if v.Text("t") != "a b" || !v.Switch("s") || v.Pairs("p")["redis"] != "redis:7.2" {
		t.Errorf("values = %v", v)
	}
	if err := v.Set(pairs, "nokey"); err == nil {
		t.Error("a pair without = was taken")
	}
	d := Def{Name: "x", Settings: []Setting{text, sw}}
	if err := d.Foreign(v); err == nil || err.Error() != "--t and --s need --provider x" {
		t.Errorf("Foreign = %v", err)
	}
	if err := (Def{Name: "y", Settings: []Setting{pairs}}).Foreign(v); err == nil || err.Error() != "--p needs --provider y" {
		t.Errorf("Foreign = %v", err)
	}
	if err := d.Foreign(Values{}); err != nil {
		t.Errorf("Foreign of nothing set = %v", err)
	}
}

// TestFlagIsTheValue: a setting's flag reads and writes its value in the
// Values, is a switch only for a Switch setting, and Reset gives the
// setting its default where a Pairs flag would add.
func TestFlagIsTheValue(t *testing.T) {
	var v Values
	pairs, sw := v.Flag(Setting{Name: "p", Kind: Pairs}), v.Flag(Setting{Name: "s", Kind: Switch})
	if pairs.IsBoolFlag() || !sw.IsBoolFlag() || pairs.Type() != "key=value" {
		t.Errorf("pairs: bool %v, type %q; switch: bool %v", pairs.IsBoolFlag(), pairs.Type(), sw.IsBoolFlag())
	}
	for _, text := range []string{"a=1", "b=2"} {
		if err := pairs.Set(text); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Set("true"); err != nil {
		t.Fatal(err)
	}
	if pairs.String() != "a=1,b=2" || v.Text("p") != "a=1,b=2" || !v.Switch("s") {
		t.Errorf("flags %q %q, values %v", pairs.String(), sw.String(), v)
	}
	pairs.Reset()
	if v.IsSet(pairs.Setting) || pairs.String() != "" {
		t.Errorf("after Reset: %v", v)
	}
	if (*Flag)(nil).String() != "" {
		t.Error("a nil flag (pflag's zero value) has text")
	}
}

// TestClearTakesTheFlagsOfOne: cleanup without a provider clears every
// provider whose cleanup takes no flags, and refuses the flags of one
// that does; with it, that provider alone, with its values. A provider
// whose cleanup takes no flags cannot be named.
func TestClearTakesTheFlagsOfOne(t *testing.T) {
	saved := defs
	t.Cleanup(func() { defs = saved })
	defs = nil
	var cleared []string
	clear := func(name string) func(context.Context, io.Writer, Values, bool) error {
		return func(_ context.Context, _ io.Writer, v Values, _ bool) error {
			cleared = append(cleared, name+":"+v.Text("file"))
			return nil
		}
	}
	setup := func(context.Context, Run, *slog.Logger) (Provider, error) { return nil, nil }
	Register(Def{Name: "here", Doc: "d", Rank: 0, Setup: setup, Cleanup: &Cleanup{Clear: clear("here")}})
	Register(Def{Name: "none", Doc: "d", Rank: 1, Setup: setup})
	Register(Def{Name: "far", Doc: "d", Rank: 2, Setup: setup,
		Cleanup: &Cleanup{Flags: []Setting{{Name: "file", Kind: Text}}, Clear: clear("far")}})
	flags, values := CleanupFlags()
	if len(flags) != 1 || flags[0].Name != "file" {
		t.Fatalf("CleanupFlags = %v", flags)
	}
	if err := flags[0].Set("x.yaml"); err != nil {
		t.Fatal(err)
	}
	given := func(n string) bool { return n == "file" }
	for _, c := range []struct {
		name  string
		given func(string) bool
		want  string // an error, or what was cleared
	}{
		{"", func(string) bool { return false }, "here:"},
		{"", given, "--file need --provider far"},
		{"far", given, "far:x.yaml"},
		{"here", given, `cleanup --provider "here": want far (without it, cleanup clears what here and none runs left)`},
		{"nope", given, `cleanup --provider "nope": want far`},
	} {
		cleared = nil
		err := Clear(context.Background(), io.Discard, c.name, values, c.given, false)
		got := strings.Join(cleared, " ")
		var se *SettingError
		if err != nil && !errors.As(err, &se) {
			t.Errorf("cleanup %q: %v is not a SettingError", c.name, err)
		}
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("cleanup --provider %q: %q, want %q", c.name, got, c.want)
		}
	}
}
