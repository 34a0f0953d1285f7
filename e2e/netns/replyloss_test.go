package netns_test

import (
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/workloads"
)

// TestReplyLossAppliesWritesWhoseRepliesAreLost runs one etcd-mutex
// client whose resource lives in etcd (etcd-guarded: its read and write
// are etcd requests too) under reply-loss pinned to its host: for each
// window the nodes' packets to c0 are dropped, and c0's requests still
// arrive. The client's critical sections are long (0.8 to 1 s of work),
// so a window mostly begins while it works, and the write that follows
// goes out into it: the write times out (info), yet the next read, after
// the window, returns its value, which no other write put there. That is
// the fault's promise: requests applied, replies lost. (A window that
// begins in another step hits that step instead: 6 of 8 and 6 of 7
// windows of two runs had a write time out; one is enough.)
func TestReplyLossAppliesWritesWhoseRepliesAreLost(t *testing.T) {
	if err := netns.Check(); err != nil {
		t.Skip(err)
	}
	testkit.LocalOnly(t, "the docker and ssh providers apply the same planned rules; their own tests cover them")
	cfg := testkit.EtcdConfig(t, "etcd-mutex")
	cfg.Mode = workloads.ModeEtcdGuarded
	cfg.Faults, cfg.Targets = []string{"reply-loss"}, map[string][]string{"reply-loss": {"c0"}}
	cfg.Clients, cfg.Locks = 1, 1
	// A session lease that outlives a window: its keep-alives arrive (and
	// renew it) but their answers do not. An op times out well inside a
	// window, and outside one has time to spare: with a 400 ms deadline,
	// under stress-ng beside the suite, every acquire after the second
	// window timed out until the run ended, and the lost write was never
	// read back.
	cfg.TTL, cfg.Timeout = 4*time.Second, time.Second
	cfg.WorkMin, cfg.Work, cfg.Think = 800*time.Millisecond, time.Second, 0
	cfg.Duration, cfg.Interval, cfg.Quiet = 30*time.Second, 1500*time.Millisecond, 4*time.Second
	nemesis.Window.Set(&cfg.FaultSettings, 2500*time.Millisecond)
	out, h := testkit.MustRun(t, cfg)
	defer testkit.AssertLabGone(t, out.Results.Run.Lab)

	// The windows: from each reply-loss's ok to the heal after it.
	type window struct{ from, to int64 }
	var windows []window
	for _, o := range h {
		switch {
		case o.IsNemesis() && o.F == "partition-reply-loss" && o.Type == history.OK:
			if got := strings.Join(o.Value.Targets, ";"); got != "n1,n2,n3>c0" {
				t.Errorf("reply-loss recorded %q, want the one-way cut n1,n2,n3>c0", got)
			}
			windows = append(windows, window{o.Time, -1})
		case o.IsNemesis() && o.F == "heal-network" && o.Type == history.Invoke && len(windows) > 0 && windows[len(windows)-1].to < 0:
			windows[len(windows)-1].to = o.Time
		}
	}
	if len(windows) < 3 || windows[len(windows)-1].to < 0 {
		t.Fatalf("%d reply-loss windows, the last healed: %v; want 3 or more, all healed: %v", len(windows), len(windows) > 0 && windows[len(windows)-1].to >= 0, testkit.NemesisSeq(h))
	}
	inWindow := func(t int64) bool {
		for _, w := range windows {
			if t >= w.from && t < w.to {
				return true
			}
		}
		return false
	}

	// Each write of unknown outcome invoked in a window, and whether a
	// later read returned its value before another write of that value
	// was invoked.
	pair := h.Pair()
	lost, applied := 0, 0
	for i, o := range h {
		if o.Process != 0 || o.F != history.Write || o.Type != history.Invoke || !inWindow(o.Time) || o.Value.N == nil {
			continue
		}
		done := pair[i]
		if done < 0 || h[done].Type != history.Info || !testkit.TimedOut(h[done].Error) {
			continue
		}
		lost++
		n := *o.Value.N
		for _, later := range h[done+1:] {
			if later.Process != 0 {
				continue
			}
			if later.F == history.Write && later.Type == history.Invoke && later.Value.N != nil && *later.Value.N == n {
				break // written again: a read of n proves nothing any more
			}
			if later.F == history.Read && later.Type == history.OK && later.Value.N != nil {
				if *later.Value.N == n {
					applied++
				}
				break
			}
		}
	}
	t.Logf("%d windows, %d writes timed out in them, %d of those read back", len(windows), lost, applied)
	if applied == 0 {
		t.Errorf("no write whose reply was lost was read back (%d timed out in the windows): the requests did not arrive, or the fault cut both ways", lost)
	}
}
