package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
)

// marginOf prepares the margin search that args give, as the command
// does, without running it.
func marginOf(t *testing.T, args ...string) (*marginSearch, error) {
	t.Helper()
	rf, mf := &runFlags{cfg: run.DefaultConfig()}, &marginFlags{}
	c := &cobra.Command{Use: "margin"}
	defineMarginFlags(c, rf, mf)
	if err := c.ParseFlags(args); err != nil {
		t.Fatalf("flags %q: %v", args, err)
	}
	return prepareMargin(c.Flags(), rf, *mf)
}

// claim6Restart is claim 6's restart without persistence, whose restart
// delay a margin search varies: a kill of n3 3 s into a partition.
var claim6Restart = []string{"--impl", "redlock", "--clients", "2", "--ttl", "6s", "--work", "4s", "--resource", "none", "--persistence", "off",
	"--faults", "partition+kill-node", "--partition", "n1,n2,n3,c0/n3,n4,n5,c1", "--target", "kill-node=n3", "--window", "3s", "--stagger", "3s", "--at", "1s"}

// A search over one part of a combined fault plans every part: the
// partition at --at with its shape, the kill --stagger later with the
// value, the partition kept until the kill has healed; the value 0 of a
// restart delay is a kill restarted at once, not a run without the fault.
func TestMarginPlansEveryPartOfACombinedFault(t *testing.T) {
	m, err := marginOf(t, append(slices.Clone(claim6Restart), "--vary", "down=0s..10s")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		down, partitionLasts time.Duration
	}{{2 * time.Second, 5 * time.Second}, {0, 3 * time.Second}, {10 * time.Second, 13 * time.Second}} {
		plan, cfg, err := m.plan(float64(c.down))
		if err != nil {
			t.Fatal(err)
		}
		want := []nemesis.PlannedFault{
			{At: time.Second, Fault: "partition", Settings: map[string]string{"partition": "n1,n2,n3,c0/n3,n4,n5,c1", "window": "3s"}, Lasts: c.partitionLasts, Outcome: "ok"},
			{At: 4 * time.Second, Fault: "kill-node", Settings: map[string]string{"down": c.down.String()}, Pins: []string{"n3"}, Lasts: c.down, Outcome: "ok"},
		}
		if len(plan.Faults) != len(want) {
			t.Fatalf("down %v: plan %+v, want %+v", c.down, plan.Faults, want)
		}
		for i, f := range plan.Faults {
			w := want[i]
			if f.At != w.At || f.Fault != w.Fault || !maps.Equal(f.Settings, w.Settings) || !slices.Equal(f.Pins, w.Pins) || f.Lasts != w.Lasts || f.Outcome != w.Outcome {
				t.Errorf("down %v: faults[%d] = %+v, want %+v", c.down, i, f, w)
			}
		}
		if end := 4*time.Second + c.down + cfg.Quiet; cfg.Duration <= end {
			t.Errorf("down %v: the run lasts %v, not past the kill's heal and the quiet time (%v)", c.down, cfg.Duration, end)
		}
		cfg.Plan = &plan
		if _, err := cfg.Prepared(); err != nil {
			t.Errorf("down %v: locktest run refuses the plan: %v", c.down, err)
		}
	}
	if !slices.Equal(m.readers, []string{"kill-node"}) {
		t.Errorf("the varied part is %v, want kill-node", m.readers)
	}
}

// A part that waits for its moment (kill-on-grant waits up to its window
// for a grant) may hit that much later than planned: the other parts stay
// through the wait too, and the run lasts past its latest heal.
func TestMarginKeepsTheOtherPartsThroughAWait(t *testing.T) {
	args := slices.Clone(claim6Restart)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "kill-node", "kill-on-grant")
	}
	m, err := marginOf(t, append(args, "--vary", "down=0s..10s")...)
	if err != nil {
		t.Fatal(err)
	}
	const down = 2 * time.Second
	plan, cfg, err := m.plan(float64(down))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Faults) != 2 {
		t.Fatalf("plan %+v, want a partition and a kill-on-grant", plan.Faults)
	}
	part, kill := plan.Faults[0], plan.Faults[1]
	// The kill waits from 4 s up to its 3 s window, then stays down 2 s.
	if want := 3*time.Second + 3*time.Second + down; part.Fault != "partition" || part.Lasts != want {
		t.Errorf("partition %+v, want it to last %v: the stagger, the kill's wait and its time down", part, want)
	}
	if want := (map[string]string{"down": "2s", "window": "3s"}); kill.Fault != "kill-on-grant" || kill.Lasts != down || !maps.Equal(kill.Settings, want) {
		t.Errorf("kill %+v, want kill-on-grant lasting %v with settings %v", kill, down, want)
	}
	if end := 4*time.Second + 3*time.Second + down + cfg.Quiet; cfg.Duration <= end {
		t.Errorf("the run lasts %v, not past the latest heal and the quiet time (%v)", cfg.Duration, end)
	}
	cfg.Plan = &plan
	if _, err := cfg.Prepared(); err != nil {
		t.Errorf("locktest run refuses the plan: %v", err)
	}
}

// A combined fault is one fault to margin, but the setting it varies must
// be one its parts read, and its parts' targets cannot be varied together.
func TestMarginRefusesWhatACombinedFaultCannotVary(t *testing.T) {
	for _, c := range []struct {
		vary, want string
	}{
		{"pause=1s..2s", "partition+kill-node does not read it (it reads partition, window, down)"},
		{"targets=1..3", "the parts of partition+kill-node hit different things"},
	} {
		_, err := marginOf(t, append(slices.Clone(claim6Restart), "--vary", c.vary)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--vary %s: %v, want an error with %q", c.vary, err, c.want)
		}
	}
	if _, err := marginOf(t, "--impl", "redlock", "--faults", "pause-node,kill-node", "--vary", "down=0s..1s"); err == nil || !strings.Contains(err.Error(), "give exactly one") {
		t.Errorf("two faults: %v, want a refusal", err)
	}
}
