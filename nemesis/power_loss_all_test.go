package nemesis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

// power-loss-all cuts every data node, records each node and each file it
// cut, and its heal restarts them all; it takes no pins, and is available
// where power-loss is.
func TestPowerLossAllCutsEveryNodeAndRestartsThemAll(t *testing.T) {
	const down = 200 * time.Millisecond
	c := &powerCluster{liveCluster: newLiveCluster("n1", "n2", "n3"),
		cuts: []clusters.FileCut{{Path: "jetstream/KV_locktest/msgs/1.blk", Size: 4096, Durable: 0}}}
	f := buildOne(t, "power-loss-all", Env{Cluster: c}.With(Down.Is(down)))
	wantKind(t, f, "power-loss-all", "restart-node", down)
	injectOnce(t, f, "n1", "n2", "n3",
		"n1:jetstream/KV_locktest/msgs/1.blk 4096->0 (-4096B)",
		"n2:jetstream/KV_locktest/msgs/1.blk 4096->0 (-4096B)",
		"n3:jetstream/KV_locktest/msgs/1.blk 4096->0 (-4096B)")
	calls := c.log()
	slices.Sort(calls)
	if want := []string{"cut n1", "cut n2", "cut n3"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	hv, err := f.Heal(context.Background())
	if err != nil || !slices.Equal(hv.Targets, []string{"n1", "n2", "n3"}) {
		t.Errorf("Heal = %+v, %v", hv, err)
	}
	if got := c.log(); len(got) != 6 {
		t.Errorf("calls %q: want three cuts and three restarts", got)
	}
	// A second heal has nothing left to restart.
	if hv, err := f.Heal(context.Background()); err != nil || len(hv.Targets) != 0 {
		t.Errorf("second Heal = %+v, %v", hv, err)
	}
	if _, err := Build([]string{"power-loss-all"}, Env{Cluster: c, Targets: map[string][]string{"power-loss-all": {"n1"}}}.With(Down.Is(down))); err == nil {
		t.Errorf("power-loss-all took a pin")
	}
	if err := Available("power-loss-all", Env{Cluster: newLiveCluster("n1")}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("on a cluster that cannot cut power: %v, want unavailable", err)
	}
}

// A cut that failed may have killed its node: the injection is of unknown
// outcome, and the heal restarts it; a restart that fails is an error and
// the node stays for the next heal.
func TestPowerLossAllFailures(t *testing.T) {
	c := &powerCluster{liveCluster: newLiveCluster("n1", "n2"), cutErr: errors.New("truncate: permission denied")}
	f := buildOne(t, "power-loss-all", Env{Cluster: c}.With(Down.Is(time.Second)))
	_, err := f.Inject(context.Background(), testRng())
	if completion(err) != history.Info || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Inject with failed cuts: %v, want info", err)
	}
	c.restartErr = errors.New("port taken")
	if _, err := f.Heal(context.Background()); err == nil || !strings.Contains(err.Error(), "restart n1: port taken") {
		t.Errorf("Heal with failed restarts: %v", err)
	}
	c.restartErr = nil
	if hv, err := f.Heal(context.Background()); err != nil || !slices.Equal(hv.Targets, []string{"n1", "n2"}) {
		t.Errorf("the next Heal = %+v, %v; want both restarted", hv, err)
	}
}

// kill-all kills every data node at once, cuts no file, and its heal
// restarts them all; it needs only a cluster that kills nodes.
func TestKillAllKillsEveryNodeAndRestartsThemAll(t *testing.T) {
	c := newLiveCluster("n1", "n2", "n3")
	f := buildOne(t, "kill-all", Env{Cluster: c}.With(Down.Is(time.Second)))
	wantKind(t, f, "kill-all", "restart-node", time.Second)
	// The plan records the setting it was built with, so that a replay of
	// a scenario's 20 s kill-all is not a 1 s one.
	if s, ok := f.(settingsPlanner); !ok || s.plannedSettings()["down"] != "1s" {
		t.Errorf("kill-all's plan settings: %T %v, want down 1s", f, ok)
	}
	injectOnce(t, f, "n1", "n2", "n3")
	calls := c.log()
	slices.Sort(calls)
	if want := []string{"kill n1", "kill n2", "kill n3"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if hv, err := f.Heal(context.Background()); err != nil || !slices.Equal(hv.Targets, []string{"n1", "n2", "n3"}) {
		t.Errorf("Heal = %+v, %v", hv, err)
	}
}
