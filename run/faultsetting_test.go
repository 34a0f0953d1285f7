package run

import (
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
)

// TestOneDeclarationMakesAFaultSetting declares a fault with a setting of
// its own, as a fault's file in nemesis/ does, and finds the setting
// everywhere a run setting lives with nothing else written: an entry of
// the settings table in the faults group (which makes the flag of
// `locktest run`, as TestOneEntryMakesASetting in cmd/locktest shows),
// whose help names the fault that reads it; its default in DefaultConfig
// and in what results.json records (Config.Values); a scenario key
// (Config.Set, as a scenario file sets it); its bound, checked by
// Validate with the flag's name; and its value in the run's Env.
func TestOneDeclarationMakesAFaultSetting(t *testing.T) {
	knob := nemesis.NewSetting("test-knob", nemesis.Duration, 3*time.Second, "how long the test fault turns its knob",
		nemesis.Bound[time.Duration]{Rule: "must not be negative", OK: func(d time.Duration) bool { return d >= 0 }})
	nemesis.Register(nemesis.Spec{FaultKind: history.FaultKind{Name: "test-fault", Heal: "test-fault-done", Family: history.FamilyNone,
		Doc: "a fault of this test"}, Settings: []string{"test-knob"}, New: func(nemesis.Env) (nemesis.Fault, error) { return nil, nil }})
	// The table was made when the package started; make it again, as the
	// program does at its start, now that the test's fault is declared.
	saved := Settings
	t.Cleanup(func() { Settings = saved })
	Settings = insertAfter(slices.DeleteFunc(slices.Clone(saved), func(s Setting) bool {
		return slices.ContainsFunc(nemesis.Declared(), func(fs nemesis.AnySetting) bool { return fs.Name() == s.Name })
	}), "interval", faultRows())
	if len(Settings) != len(saved)+1 {
		t.Fatalf("the table made again has %d entries, want the %d it had and the test's", len(Settings), len(saved))
	}

	s, ok := SettingNamed("test_knob")
	if !ok {
		t.Fatal("no setting test_knob")
	}
	if s.Name != "test-knob" || s.Group != GroupFaults || !s.Scenario || s.Field(new(Config)).Type() != "duration" {
		t.Errorf("the setting is %+v, want --test-knob, a duration in the faults group that scenarios may give", s)
	}
	if h := s.Help(); h != "how long the test fault turns its knob (read by test-fault)" {
		t.Errorf("help %q, want the doc and the fault that reads it", h)
	}
	cfg := DefaultConfig()
	if got := cfg.Values()["test_knob"]; got != "3s" || knob.Of(cfg.FaultSettings) != 3*time.Second {
		t.Errorf("the default is recorded as %q (%v), want 3s", got, knob.Of(cfg.FaultSettings))
	}
	if err := cfg.Set("test_knob", "5s"); err != nil {
		t.Fatal(err)
	}
	env := nemesis.Env{Settings: cfg.FaultSettings}
	if knob.Of(env) != 5*time.Second || cfg.Values()["test_knob"] != "5s" {
		t.Errorf("test_knob: 5s gave the run %v, recorded as %q", knob.Of(env), cfg.Values()["test_knob"])
	}
	if err := cfg.Set("test-knob", "soon"); err == nil || err.Error() != `"soon" is not a duration (e.g. 300ms, 2s)` {
		t.Errorf("--test-knob soon: %v", err)
	}
	cfg.Set("test-knob", "-1s")
	if err := cfg.checkBounds(); err == nil || err.Error() != "--test-knob must not be negative, got -1s" {
		t.Errorf("--test-knob -1s: %v", err)
	}
	if def := DefaultConfig(); knob.Of(def.FaultSettings) != 3*time.Second {
		t.Errorf("setting a run's value changed the default to %v", knob.Of(def.FaultSettings))
	}
}
