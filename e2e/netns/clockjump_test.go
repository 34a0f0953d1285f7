package netns_test

import (
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/e2e/testkit"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/gate"
	"github.com/locktest/locktest/workloads"
)

// TestRedlockClockJumpOverlaps is Kleppmann's construction with every
// fault pinned, so that no seed decides whether it happens: a partition
// keeps client 0 from D and E (n4, n5) and client 1 from A and B (n1, n2),
// both reach C (n3); client 0 locks A, B, C; C's clock jumps forward past
// the TTL and its key expires; client 1 locks C, D, E while client 0 still
// holds the lock. Each of the run's partition windows repeats it.
func TestRedlockClockJumpOverlaps(t *testing.T) {
	gate.Need(t, "redis-server")
	needNetns(t)
	cfg := testkit.Config(t, "redlock")
	cfg.Clients, cfg.Mode = 2, workloads.ModeNone
	cfg.Faults = []string{"partition+clock-bump"}
	cfg.Groups = [][]string{{"n1", "n2", "n3", "c0"}, {"n3", "n4", "n5", "c1"}}
	cfg.Targets = map[string][]string{"clock-bump": {"n3"}}
	cfg.ClockDirection, cfg.ClockBump, cfg.Stagger = "forward", 6*time.Second, 3500*time.Millisecond
	cfg.TTL, cfg.Work, cfg.Interval, cfg.Window, cfg.Duration = 3*time.Second, 2500*time.Millisecond, time.Second, 3*time.Second, 26*time.Second
	out, h := testkit.MustRun(t, cfg)
	if n := testkit.NemesisOps(h, "clock-bump", history.OK); n < 1 {
		t.Fatalf("%d clock bumps applied", n)
	}
	if k := testkit.Kinds(out.Results); out.Results.Valid != checker.Invalid || k["overlapping-holds"] == 0 {
		t.Fatalf("verdict %s, anomalies %v: want overlapping holds (%s)", out.Results.Valid, k, out.Results.Run.Network)
	}
}
