package nemesis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDisks keeps the nodes' sync delays.
type fakeDisks struct {
	mu    sync.Mutex
	delay map[string]time.Duration
}

func (d *fakeDisks) SetSyncDelay(n string, x time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.delay == nil {
		d.delay = map[string]time.Duration{}
	}
	d.delay[n] = x
	return nil
}

func (d *fakeDisks) SyncDelay(n string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.delay[n]
}

// slow-disk sets the sync delay of the node it hits (a pinned one) for
// the window, records the node and the delay, and its heal sets the delay
// back to what it was; without a way to slow syncs it is unavailable with
// the run's reason; its setting keeps its bound.
func TestSlowDisk(t *testing.T) {
	disks := &fakeDisks{}
	env := Env{Cluster: &fakeCluster{nodes: nodes("n1", "n2", "n3")}, Disks: disks,
		Targets: map[string][]string{"slow-disk": {"n3"}}}.With(Window.Is(4*time.Second), SyncDelay.Is(1500*time.Millisecond))
	f := buildOne(t, "slow-disk", env)
	wantKind(t, f, "slow-disk", "heal-disk", 4*time.Second)
	v, err := f.Inject(context.Background(), testRng())
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Targets) != 1 || v.Targets[0] != "n3+1.5s" || time.Duration(v.Duration) != 4*time.Second {
		t.Errorf("recorded targets %v, duration %v; want [n3+1.5s], 4s", v.Targets, time.Duration(v.Duration))
	}
	for n, want := range map[string]time.Duration{"n1": 0, "n2": 0, "n3": 1500 * time.Millisecond} {
		if got := disks.SyncDelay(n); got != want {
			t.Errorf("%s's sync delay is %v, want %v", n, got, want)
		}
	}
	h, err := f.Heal(context.Background())
	if err != nil || len(h.Targets) != 1 || h.Targets[0] != "n3" {
		t.Errorf("heal: %v, %v; want targets [n3]", h.Targets, err)
	}
	if got := disks.SyncDelay("n3"); got != 0 {
		t.Errorf("n3's sync delay is %v after the heal, want 0", got)
	}
	// The heal restores the delay the node had, not none; a second heal
	// does nothing.
	disks.SetSyncDelay("n3", time.Second)
	f.Inject(context.Background(), testRng())
	f.Inject(context.Background(), testRng())
	if _, err := f.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := disks.SyncDelay("n3"); got != time.Second {
		t.Errorf("n3's sync delay is %v after the heal, want the 1s it had", got)
	}
	if h, err := f.Heal(context.Background()); err != nil || len(h.Targets) != 0 {
		t.Errorf("a second heal: %v, %v; want nothing", h.Targets, err)
	}

	_, err = Build([]string{"slow-disk"}, Env{Cluster: env.Cluster,
		DiskReason: "etcd nodes sync without libc"}.With(Window.Is(time.Second), SyncDelay.Is(time.Second)))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "etcd nodes sync without libc") {
		t.Errorf("slow-disk without a way to slow syncs: %v", err)
	}
	for _, d := range []time.Duration{0, -time.Second, 11 * time.Minute} {
		if err := SyncDelay.Check(Values{}.With(SyncDelay.Is(d))); err == nil {
			t.Errorf("--sync-delay %v kept its bound", d)
		}
	}
	if err := SyncDelay.Check(Values{}.With(SyncDelay.Is(10 * time.Minute))); err != nil {
		t.Errorf("--sync-delay 10m: %v", err)
	}
}
