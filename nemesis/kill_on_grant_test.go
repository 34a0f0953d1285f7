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

// grantCluster is a live cluster whose kills record, in the clients'
// log, when they came: so that a test sees the kill between the holder's
// arrival at its point and its continuing.
type grantCluster struct {
	*liveCluster
	clients *fakeClients
}

func (c *grantCluster) Kill(ctx context.Context, n clusters.Node) error {
	c.clients.add("kill %s", n.Name)
	return c.liveCluster.Kill(ctx, n)
}

// kill-on-grant needs a cluster that kills nodes and clients it can hold
// at a point, and a window to wait in.
func TestKillOnGrantAvailable(t *testing.T) {
	pool := &fakeClients{procs: []int{1}}
	if err := Available("kill-on-grant", Env{Cluster: newLiveCluster("n1"), Clients: pool}.With(Window.Is(time.Second))); err != nil {
		t.Errorf("with a killer and clients: %v", err)
	}
	if err := Available("kill-on-grant", Env{Cluster: &fakeCluster{nodes: nodes("n1")}, Clients: pool}.With(Window.Is(time.Second))); !errors.Is(err, ErrUnavailable) {
		t.Errorf("without a killer: %v, want unavailable", err)
	}
	if err := Available("kill-on-grant", Env{Cluster: newLiveCluster("n1")}.With(Window.Is(time.Second))); !errors.Is(err, ErrUnavailable) {
		t.Errorf("without clients: %v, want unavailable", err)
	}
	if _, err := Build([]string{"kill-on-grant"}, Env{Cluster: newLiveCluster("n1"), Clients: pool}); err == nil || !strings.Contains(err.Error(), "positive") {
		t.Errorf("kill-on-grant without a window: %v", err)
	}
}

// The kill waits for a client's acquire to succeed (its arrival at
// after-acquire), kills the node while that client waits there, then lets
// it go on; it records the node and the holder, and the heal restarts the
// node.
func TestKillOnGrantKillsAfterAnAcquire(t *testing.T) {
	const down = 300 * time.Millisecond
	pool := &fakeClients{procs: []int{2}}
	c := &grantCluster{liveCluster: newLiveCluster("n1"), clients: pool}
	f := buildOne(t, "kill-on-grant", Env{Cluster: c, Clients: pool}.With(Down.Is(down), Window.Is(time.Minute)))
	wantKind(t, f, "kill-on-grant", "restart-node", down)
	injectOnce(t, f, "n1", "n1:after p2's acquire")
	if got, want := pool.log(), []string{"arm p2 after-acquire", "wait p2", "kill n1", "continue p2"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	hv, err := f.Heal(context.Background())
	if err != nil || !slices.Equal(hv.Targets, []string{"n1"}) || !slices.Contains(c.log(), "restart n1") {
		t.Errorf("Heal = %+v, %v, cluster calls %q", hv, err, c.log())
	}
}

// A window in which no acquire succeeds, or a wait cut short, kills
// nothing: the fault fails as not applied and its heal restarts nothing
// (a restart of the running server would find its port taken).
func TestKillOnGrantWithoutAnAcquire(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		cancel bool
	}{
		{"no acquire in the window", 20 * time.Millisecond, false},
		{"cancelled while waiting", time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &fakeClients{procs: []int{2}, starving: map[int]bool{2: true}}
			c := &grantCluster{liveCluster: newLiveCluster("n1"), clients: pool}
			f := buildOne(t, "kill-on-grant", Env{Cluster: c, Clients: pool}.With(Down.Is(time.Second), Window.Is(tc.window)))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				go func() {
					for !slices.Contains(pool.log(), "wait p2") {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
			}
			_, err := f.Inject(ctx, testRng())
			if !errors.Is(err, errNotApplied) || completion(err) != history.Fail {
				t.Errorf("Inject = %v, want a fail that applied nothing", err)
			}
			hv, err := f.Heal(context.Background())
			if err != nil || len(hv.Targets) != 0 || slices.Contains(pool.log(), "kill n1") || slices.Contains(c.log(), "restart n1") {
				t.Errorf("Heal = %+v, %v, calls %q %q; want nothing killed or restarted", hv, err, pool.log(), c.log())
			}
		})
	}
}
