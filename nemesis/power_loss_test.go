package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

// powerCluster is a live cluster that can cut power: each Unsynced call
// returns the next of unsynced (the last one from then on), and CutPower
// returns cuts and cutErr.
type powerCluster struct {
	*liveCluster
	why         string
	unsynced    []int64
	unsyncedErr error
	cuts        []clusters.FileCut
	cutErr      error
}

var _ clusters.PowerCutter = (*powerCluster)(nil)

func (c *powerCluster) PowerCutReason() string { return c.why }

func (c *powerCluster) Unsynced(_ context.Context, n clusters.Node) (int64, error) {
	c.add("unsynced %s", n.Name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unsyncedErr != nil {
		return 0, c.unsyncedErr
	}
	u := c.unsynced[0]
	if len(c.unsynced) > 1 {
		c.unsynced = c.unsynced[1:]
	}
	return u, nil
}

func (c *powerCluster) CutPower(_ context.Context, n clusters.Node) ([]clusters.FileCut, error) {
	c.add("cut %s", n.Name)
	return c.cuts, c.cutErr
}

// CutPowerOnWrite waits as the clusters do, asking Unsynced every
// millisecond until it is positive or within passes, then cuts. A failed
// or cancelled wait wraps clusters.ErrUntouched.
func (c *powerCluster) CutPowerOnWrite(ctx context.Context, n clusters.Node, within time.Duration) ([]clusters.FileCut, error) {
	deadline := time.Now().Add(within)
	for {
		u, err := c.Unsynced(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", clusters.ErrUntouched, err)
		}
		if u > 0 || time.Now().After(deadline) {
			return c.CutPower(ctx, n)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", clusters.ErrUntouched, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func newPowerCluster(unsynced ...int64) *powerCluster {
	return &powerCluster{liveCluster: newLiveCluster("n1"), unsynced: unsynced,
		cuts: []clusters.FileCut{{Path: "appendonlydir/appendonly.aof.1.incr.aof", Size: 134, Durable: 78}}}
}

// power-loss is available only where the cluster knows what its nodes
// synced, and says why not everywhere else.
func TestPowerLossAvailability(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  Env
		want string // "" when available
	}{
		{"power cutter", Env{Cluster: newPowerCluster(0)}.With(Window.Is(time.Second)), ""},
		{"a killer that cannot cut power", Env{Cluster: newLiveCluster("n1")}.With(Window.Is(time.Second)), "does not know what its nodes synced"},
		{"no cluster", Env{}.With(Window.Is(time.Second)), "cannot kill nodes"},
		{"no shim", Env{Cluster: newPowerCluster(0), PowerReason: "no C compiler"}.With(Window.Is(time.Second)), "no C compiler"},
		{"nodes without records", Env{Cluster: &powerCluster{liveCluster: newLiveCluster("n1"), why: "its nodes record nothing"}}.With(Window.Is(time.Second)),
			"its nodes record nothing"},
	} {
		err := Available("power-loss", tc.env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want unavailable with %q", tc.name, err, tc.want)
		}
	}
	if _, err := Build([]string{"power-loss"}, Env{Cluster: newPowerCluster(0)}); err == nil || !strings.Contains(err.Error(), "positive") {
		t.Errorf("power-loss without a window: %v", err)
	}
}

// The cut waits for unsynced data, records what it cut, and the heal
// restarts the node.
func TestPowerLossCutsOnceTheNodeHoldsUnsyncedData(t *testing.T) {
	const down = 300 * time.Millisecond
	c := newPowerCluster(0, 0, 0, 56)
	f := buildOne(t, "power-loss", Env{Cluster: c}.With(Down.Is(down), Window.Is(time.Minute)))
	wantKind(t, f, "power-loss", "restart-node", down)
	injectOnce(t, f, "n1", "n1:appendonlydir/appendonly.aof.1.incr.aof 134->78 (-56B)")
	hv, err := f.Heal(context.Background())
	if err != nil || !slices.Equal(hv.Targets, []string{"n1"}) {
		t.Errorf("Heal = %+v, %v", hv, err)
	}
	wantCalls := []string{"unsynced n1", "unsynced n1", "unsynced n1", "unsynced n1", "cut n1", "restart n1"}
	if got := c.log(); !slices.Equal(got, wantCalls) {
		t.Errorf("calls %q, want %q", got, wantCalls)
	}
}

func TestPowerLossWait(t *testing.T) {
	t.Run("nothing unsynced in the window", func(t *testing.T) {
		// The cut comes at the end of the window, and loses nothing.
		c := newPowerCluster(0)
		c.cuts = nil
		f := buildOne(t, "power-loss", Env{Cluster: c}.With(Down.Is(time.Second), Window.Is(20*time.Millisecond)))
		v, err := f.Inject(context.Background(), testRng())
		if err != nil || !slices.Equal(v.Targets, []string{"n1"}) {
			t.Fatalf("Inject = %+v, %v", v, err)
		}
		if got := c.log(); got[len(got)-1] != "cut n1" {
			t.Errorf("calls %q, want a cut at the end", got)
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		c := newPowerCluster(0)
		f := buildOne(t, "power-loss", Env{Cluster: c}.With(Down.Is(time.Second), Window.Is(time.Minute)))
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for !slices.Contains(c.log(), "unsynced n1") {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		_, err := f.Inject(ctx, testRng())
		if !errors.Is(err, errNotApplied) || completion(err) != history.Fail {
			t.Errorf("Inject cancelled while waiting: %v, want a fail that applied nothing", err)
		}
		if slices.Contains(c.log(), "cut n1") {
			t.Error("a cancelled power-loss cut the power")
		}
		// The node was never cut: its heal restarts nothing (a restart
		// of the running server would find its port taken).
		hv, err := f.Heal(context.Background())
		if err != nil || len(hv.Targets) != 0 || slices.Contains(c.log(), "restart n1") {
			t.Errorf("Heal after a cut that did not go in = %+v, %v, calls %q; want nothing restarted", hv, err, c.log())
		}
	})
	t.Run("unsynced unknown", func(t *testing.T) {
		c := newPowerCluster(0)
		c.unsyncedErr = errors.New("record unreadable")
		f := buildOne(t, "power-loss", Env{Cluster: c}.With(Down.Is(time.Second), Window.Is(time.Minute)))
		_, err := f.Inject(context.Background(), testRng())
		if !errors.Is(err, errNotApplied) || !strings.Contains(err.Error(), "record unreadable") || slices.Contains(c.log(), "cut n1") {
			t.Errorf("Inject = %v, calls %q; want a fail that applied nothing", err, c.log())
		}
	})
	t.Run("cut fails", func(t *testing.T) {
		// The node may be dead: recorded as info with what was cut, and
		// restarted at the heal.
		c := newPowerCluster(1)
		c.cutErr = errors.New("truncate: permission denied")
		f := buildOne(t, "power-loss", Env{Cluster: c}.With(Down.Is(time.Second), Window.Is(time.Minute)))
		v, err := f.Inject(context.Background(), testRng())
		if completion(err) != history.Info || len(v.Targets) != 2 || !strings.Contains(err.Error(), "cut the power of n1") {
			t.Errorf("Inject = %+v, %v", v, err)
		}
		if _, err := f.Heal(context.Background()); err != nil || c.log()[len(c.log())-1] != "restart n1" {
			t.Errorf("Heal: %v, calls %q", err, c.log())
		}
	})
}
