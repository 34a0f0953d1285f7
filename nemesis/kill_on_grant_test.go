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

// grantCluster is a live cluster whose nodes grant a lock when a test
// says so: WaitForGrant returns the key sent on grants, or, when none
// comes within its time, an error wrapping clusters.ErrUntouched.
type grantCluster struct {
	*liveCluster
	why    string
	grants chan string
}

var _ clusters.GrantWatcher = (*grantCluster)(nil)

func (c *grantCluster) GrantWatchReason() string { return c.why }

func (c *grantCluster) WaitForGrant(ctx context.Context, n clusters.Node, within time.Duration) (string, error) {
	c.add("watch %s", n.Name)
	select {
	case key := <-c.grants:
		return key, nil
	case <-time.After(within):
		return "", fmt.Errorf("%w: %s granted nothing", clusters.ErrUntouched, n.Name)
	case <-ctx.Done():
		return "", fmt.Errorf("%w: %w", clusters.ErrUntouched, ctx.Err())
	}
}

func newGrantCluster() *grantCluster {
	return &grantCluster{liveCluster: newLiveCluster("n1"), grants: make(chan string, 1)}
}

// kill-on-grant is available only where the cluster can watch its nodes
// grant, and says why not.
func TestKillOnGrantAvailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  Env
		want string // "" when available
	}{
		{"watching cluster", Env{Cluster: newGrantCluster(), Window: time.Second}, ""},
		{"cluster that cannot watch", Env{Cluster: newLiveCluster("n1"), Window: time.Second}, "cannot tell when a node grants"},
		{"cluster that says why not", Env{Cluster: &grantCluster{liveCluster: newLiveCluster("n1"), why: "no client port"}, Window: time.Second}, "no client port"},
	} {
		err := Available("kill-on-grant", tc.env)
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Available = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Build([]string{"kill-on-grant"}, Env{Cluster: newGrantCluster()}); err == nil || !strings.Contains(err.Error(), "positive") {
		t.Errorf("kill-on-grant without a window: %v", err)
	}
}

// The kill waits for the node's grant, comes after it, records what was
// granted, and the heal restarts the node.
func TestKillOnGrantKillsAfterTheGrant(t *testing.T) {
	const down = 300 * time.Millisecond
	c := newGrantCluster()
	f := buildOne(t, "kill-on-grant", Env{Cluster: c, NodeDown: down, Window: time.Minute})
	if f.Name() != "kill-on-grant" || f.HealName() != "restart-node" || f.Duration() != down {
		t.Errorf("fault is %s/%s for %v, want kill-on-grant/restart-node for %v", f.Name(), f.HealName(), f.Duration(), down)
	}
	go func() {
		for !slices.Contains(c.log(), "watch n1") {
			time.Sleep(time.Millisecond)
		}
		if slices.Contains(c.log(), "kill n1") {
			t.Error("killed before the grant")
		}
		c.grants <- "lock-0"
	}()
	v, err := f.Inject(context.Background(), testRng())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"n1", "n1:granted lock-0"}
	if !slices.Equal(v.Targets, want) || v.Duration != int64(down) {
		t.Errorf("Inject value %+v, want targets %q and duration %v", v, want, down)
	}
	hv, err := f.Heal(context.Background())
	if err != nil || !slices.Equal(hv.Targets, []string{"n1"}) {
		t.Errorf("Heal = %+v, %v", hv, err)
	}
	if got, want := c.log(), []string{"watch n1", "kill n1", "restart n1"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// A window without a grant, or a wait cut short, kills nothing: the
// fault fails as not applied and its heal restarts nothing (a restart of
// the running server would find its port taken).
func TestKillOnGrantWithoutAGrant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		cancel bool
	}{
		{"no grant in the window", 20 * time.Millisecond, false},
		{"cancelled while waiting", time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newGrantCluster()
			f := buildOne(t, "kill-on-grant", Env{Cluster: c, NodeDown: time.Second, Window: tc.window})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				go func() {
					for !slices.Contains(c.log(), "watch n1") {
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
			if err != nil || len(hv.Targets) != 0 || slices.Contains(c.log(), "kill n1") || slices.Contains(c.log(), "restart n1") {
				t.Errorf("Heal = %+v, %v, calls %q; want nothing killed or restarted", hv, err, c.log())
			}
		})
	}
}
