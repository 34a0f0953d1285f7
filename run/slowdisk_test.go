package run

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/locktest/locktest/impls"
)

// A run asking for slow-disk preloads the shim into nodes that sync
// through libc (Redis), and slows their syncs through its own clocks; on
// nodes the shim cannot reach (etcd's Go members) slow-disk is
// unavailable, with the backend's reason, and no shim is set up for it.
func TestSlowDiskNeedsNodesUnderTheShim(t *testing.T) {
	ctx, lg := context.Background(), slog.New(slog.DiscardHandler)
	setup := func(implName string) *providerSetup {
		t.Helper()
		cfg := providerConfig(t, implName)
		cfg.Faults = []string{"slow-disk"}
		impl, err := impls.Lookup(cfg.Impl)
		if err != nil {
			t.Fatal(err)
		}
		prov, err := setupProvider(ctx, cfg, impl, t.TempDir(), lg)
		if prov != nil {
			t.Cleanup(func() { prov.close(context.Background(), lg) })
		}
		if err != nil {
			t.Fatal(err)
		}
		return prov
	}

	prov := setup("etcd-mutex")
	if d, why := diskControl(prov); d != nil || !strings.Contains(why, "cannot reach the nodes of etcd") || !strings.Contains(why, "Go programs") {
		t.Errorf("slow-disk on etcd: %v, %q; want none, with the backend's reason", d, why)
	}
	if prov.clocks != nil {
		t.Error("a run of etcd set up the shim for slow-disk")
	}

	prov = setup("redis-set-nx-px")
	d, why := diskControl(prov)
	if prov.clocks == nil {
		// No C compiler: the reason says so, and nothing is faked.
		if d != nil || !strings.Contains(why, "C compiler") {
			t.Errorf("slow-disk without the shim: %v, %q", d, why)
		}
		t.Skip(why)
	}
	if d != prov.clocks || why != "" {
		t.Errorf("slow-disk on redis: %v, %q; want the run's shim", d, why)
	}
	if env := prov.nodeEnv("n1"); len(env) == 0 {
		t.Error("a redis node of a slow-disk run does not run under the shim")
	}
}
