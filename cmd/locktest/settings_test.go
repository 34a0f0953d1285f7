package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/scenarios"
	"github.com/spf13/cobra"
)

// TestOneEntryMakesASetting adds one entry to the settings table and finds
// it everywhere a setting lives: a flag of `locktest run` in its help
// group, parsed into run.Config; a key of a scenario file, in the
// scenario's Config and its command line; and a key of what results.json
// records (Config.Values). No other code knows of it.
func TestOneEntryMakesASetting(t *testing.T) {
	saved := run.Settings
	t.Cleanup(func() { run.Settings = saved })
	think := func(c *run.Config) run.Value {
		s, _ := run.SettingNamed("think")
		return s.Field(c)
	}
	run.Settings = append(slices.Clone(saved), run.Setting{Name: "pause-between", Group: run.GroupWorkload,
		Doc: "a second name of the think time, for this test", Field: think, Scenario: true})

	c := newRunCmd()
	var help bytes.Buffer
	c.SetOut(&help)
	c.SetArgs([]string{"--help"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	workload, _, _ := strings.Cut(help.String(), "Faults flags:")
	if !strings.Contains(workload, "--pause-between duration") || !strings.Contains(workload, "for this test") {
		t.Errorf("the help's workload group has no --pause-between:\n%s", help.String())
	}

	rf := &runFlags{cfg: run.DefaultConfig()}
	c = &cobra.Command{Use: "run"}
	rf.define(c)
	if err := c.Flags().Parse([]string{"--pause-between", "7ms"}); err != nil {
		t.Fatal(err)
	}
	if rf.cfg.Think != 7*time.Millisecond {
		t.Errorf("--pause-between 7ms set think to %v", rf.cfg.Think)
	}

	scs, err := scenarios.Parse([]byte(`scenarios: [{name: a, claim: 1, title: t, source: s, predictions: {kleppmann: violation},
  expect: violation, impl: redis-set-nx-px, faults: [pause-client], pause_between: 9ms}]`), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := scs[0].Config(run.DefaultConfig())
	if err != nil || cfg.Think != 9*time.Millisecond {
		t.Errorf("scenario pause_between: 9ms gave think %v, %v", cfg.Think, err)
	}
	if cmd := scs[0].Command(1); !strings.Contains(cmd, "--pause-between 9ms") {
		t.Errorf("the scenario's command %q does not give --pause-between", cmd)
	}
	if v := cfg.Values()["pause_between"]; v != "9ms" {
		t.Errorf("results record pause_between = %q, want 9ms", v)
	}
}
