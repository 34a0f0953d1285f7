package run

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/runstore"
)

// startCluster makes the cluster of impl's backend on the run's provider
// and starts it. What it made is returned even on error, so the
// caller can stop it; errors are SetupErrors.
func startCluster(ctx context.Context, cfg Config, impl impls.Impl, dir string, prov *providerSetup, lg *slog.Logger) (clusters.Cluster, error) {
	cl, err := prov.p.Cluster(cfg.providerRun(impl), prov.nodes(dir, lg))
	if err != nil {
		return nil, &SetupError{err}
	}
	if err := cl.Start(ctx); err != nil {
		return cl, &SetupError{fmt.Errorf("start %s cluster: %w", impl.Backend, err)}
	}
	if why := prov.p.ClockReason(); why != "" {
		// A host that could not preload the clock shim: clock faults are
		// unavailable, with its reason.
		prov.clockWhy = why
	}
	return cl, nil
}

// WithCluster starts the cluster a run of cfg would start (its impl's
// backend and node count, on cfg.Provider, with cfg.Persistence and
// cfg.ClusterParams) with its files under dir, calls fn with the nodes as
// the run's workers would dial them, and stops the cluster and whatever
// the provider set up before it returns, also when ctx is cancelled. It is
// for probes that need a real cluster but no workload, such as the
// matrix's reentrancy probe. A cluster that cannot start is a *SetupError;
// fn's error is returned as it is.
func WithCluster(ctx context.Context, cfg Config, dir string, fn func(ctx context.Context, nodes []impls.Node) error) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	impl, err := cfg.ImplInfo()
	if err != nil {
		return err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	// A probe starts its own cluster, in its own lab: it takes nothing
	// from a series' keeper, which hands its clusters to runs alone.
	cfg.Clusters = nil
	if err := os.MkdirAll(filepath.Join(dir, runstore.LogsDir), 0o755); err != nil {
		return setupErr("%v", err)
	}
	prov, err := setupProvider(ctx, cfg, impl, dir, lg)
	var cl clusters.Cluster
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cl != nil {
			if serr := cl.Stop(stopCtx); serr != nil {
				lg.Warn("stop cluster", "impl", cfg.Impl, "err", serr)
			}
		}
		// A budget of its own, as Run's teardown has.
		closeCtx, cancelClose := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancelClose()
		prov.close(closeCtx, lg)
	}()
	if err != nil {
		return err
	}
	if cl, err = startCluster(ctx, cfg, impl, dir, prov, lg); err != nil {
		return err
	}
	nodes, err := prov.proxied(cl.Nodes())
	if err != nil {
		return &SetupError{err}
	}
	return fn(ctx, ClientNodes(nodes))
}

// ClientNodes returns the nodes as lock clients see them: their names,
// addresses and roles.
func ClientNodes(nodes []clusters.Node) []impls.Node {
	out := make([]impls.Node, len(nodes))
	for i, n := range nodes {
		out[i] = impls.Node{Name: n.Name, Addr: n.Addr, Role: n.Role}
	}
	return out
}
