package netns_test

import (
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/workloads"
)

// TestRedlockClockJumpOverlaps is Kleppmann's construction with every
// fault pinned, so that no seed decides whether it happens: a partition
// keeps client 0 from D and E (n4, n5) and client 1 from A and B (n1, n2),
// both reach C (n3); client 0 locks A, B, C; C's clock jumps forward past
// the TTL and its key expires; client 1 locks C, D, E while client 0 still
// holds the lock. Each of the run's partition windows repeats it.
//
// The faults are pinned; the clients' phase is not. The construction
// needs client 0 to hold a lock granted by A, B and C alone (so, granted
// inside the partition) when C's clock jumps. Under stress-ng (at 0ff0001)
// no window of a run lined up so: client 0 took its locks before the
// partition was in, on four or five nodes, or released them before the
// jump. Such a run did not make the construction, and says nothing of the
// lock: it is logged and made again (three runs at most). A run that made
// it and shows no overlapping hold fails at once.
func TestRedlockClockJumpOverlaps(t *testing.T) {
	gate.Need(t, "redis-server")
	needNetns(t)
	cfg := testkit.Config(t, "redlock")
	cfg.Clients, cfg.Mode = 2, workloads.ModeNone
	cfg.Faults = []string{"partition+clock-bump"}
	nemesis.Partition.Set(&cfg.FaultSettings, [][]string{{"n1", "n2", "n3", "c0"}, {"n3", "n4", "n5", "c1"}})
	cfg.Targets = map[string][]string{"clock-bump": {"n3"}}
	cfg.Stagger = 3500 * time.Millisecond
	cfg.FaultSettings = cfg.FaultSettings.With(nemesis.ClockDirection.Is("forward"), nemesis.ClockBump.Is(6*time.Second), nemesis.Window.Is(3*time.Second))
	cfg.TTL, cfg.Work, cfg.Interval, cfg.Duration = 3*time.Second, 2500*time.Millisecond, time.Second, 26*time.Second
	for attempt := 1; ; attempt++ {
		out, h := testkit.MustRun(t, cfg)
		if n := testkit.NemesisOps(h, "clock-bump", history.OK); n < 1 {
			t.Fatalf("%d clock bumps applied", n)
		}
		k := testkit.Kinds(out.Results)
		if out.Results.Valid == checker.Invalid && k["overlapping-holds"] > 0 {
			return
		}
		made := constructionMade(h, "n1,n2,n3")
		if made > 0 || attempt == 3 {
			t.Fatalf("verdict %s, anomalies %v: want overlapping holds (%s); %d of its windows had client 0 holding A, B and C alone when C's clock jumped",
				out.Results.Valid, k, out.Results.Run.Network, made)
		}
		t.Logf("run %d: no window had client 0 holding a lock of A, B and C alone when C's clock jumped (verdict %s); running it again", attempt, out.Results.Valid)
	}
}

// constructionMade counts the clock bumps of h that came while process 0
// held a lock granted by exactly the nodes nodes (its acquire's ok before
// the bump, its release invoked after it, or never).
func constructionMade(h history.History, nodes string) int {
	made := 0
	for _, b := range h {
		if !b.IsNemesis() || b.F != "clock-bump" || b.Type != history.OK {
			continue
		}
		var granted *history.Op
		for i := range h {
			o := &h[i]
			if o.Process != 0 || o.Time > b.Time {
				continue
			}
			switch {
			case o.F == "acquire" && o.Type == history.OK:
				granted = o
			case o.F == "release" && o.Type == history.Invoke:
				granted = nil
			}
		}
		if granted != nil && granted.Value.Node == nodes {
			made++
		}
	}
	return made
}
