package provider

import "testing"

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
