package scenarios

import (
	"slices"
	"testing"

	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
)

// The rueidislock scenarios of scenarios/bugs.yaml make valid runs, its bug is in its bugs
// list, and each scenario moves the node's clock the way its claim says:
// ahead (forward) by more than half the validity where it expects the
// violation, by less or behind (backward) where it expects safety, and
// the control runs the relative SET NX PX recipe.
func TestRueidislockScenarios(t *testing.T) {
	t.Chdir("..") // the Curator scenarios name client manifests, resolved from the root
	cat, err := LoadFiles([]string{"scenarios/bugs.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cat.Bugs, func(b reports.Bug) bool { return b.ID == "rueidislock-pxat" }) {
		t.Fatalf("bugs %+v, want rueidislock-pxat among them", cat.Bugs)
	}
	names := map[string]bool{}
	for _, s := range cat.Scenarios {
		if s.Impl() != "rueidislock" {
			continue
		}
		names[s.Name] = true
		cfg, err := s.Config(run.DefaultConfig())
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		// The bug's scenarios are those of its violation; the safe ones
		// are controls of the same version, not a fixed one.
		if (s.Bug == "rueidislock-pxat") != (s.Expect == ExpectViolation) || !slices.Equal(cfg.Faults, []string{"clock-bump"}) {
			t.Errorf("%s: bug %q, expects %s, faults %v", s.Name, s.Bug, s.Expect, cfg.Faults)
			continue
		}
		bump, dir := nemesis.ClockBump.Of(cfg.FaultSettings), nemesis.ClockDirection.Of(cfg.FaultSettings)
		harmful := dir == nemesis.ClockForward && bump > cfg.TTL/2
		if harmful != (s.Expect == ExpectViolation) {
			t.Errorf("%s expects %s with %s, a %s bump of %v over a %v validity", s.Name, s.Expect, cfg.Impl, dir, bump, cfg.TTL)
		}
		if s.Expect == ExpectViolation && (cfg.Expect != "invalid" || !cfg.StopOnViolation) {
			t.Errorf("%s: its run expects %s, stop-on-violation %v", s.Name, cfg.Expect, cfg.StopOnViolation)
		}
		if cfg.ImplParams["setpx"] == "on" && s.Name != "rueidislock-setpx-server-clock-ahead" {
			t.Errorf("%s sends setpx=on", s.Name)
		}
	}
	for _, n := range []string{"rueidislock-server-clock-ahead", "rueidislock-server-clock-behind", "rueidislock-setpx-server-clock-ahead"} {
		if !names[n] {
			t.Errorf("no scenario %s", n)
		}
	}
}
