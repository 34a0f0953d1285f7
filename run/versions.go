package run

import (
	"context"
	"debug/buildinfo"
	"log/slog"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/runstore"
)

// clientVersions returns the versions of the run's client libraries: the
// Go modules a Go impl declares (impls.Impl.Libraries) as the build info
// of the program that runs it gives them, which is this binary's (the
// workers are processes of it) or, with --lib, the adapter's; or an
// external client's library as its hello_ok named it.
func clientVersions(impl impls.Impl, client *runstore.ClientInfo, adapter string) map[string]string {
	if adapter != "" {
		bi, err := buildinfo.ReadFile(adapter)
		if err != nil {
			vs := map[string]string{}
			for _, l := range impl.Libraries {
				vs[l] = "unknown: the adapter's build info cannot be read: " + err.Error()
			}
			return vs
		}
		return runstore.LibraryVersionsIn(bi, impl.Libraries)
	}
	if client == nil {
		return runstore.LibraryVersions(impl.Libraries)
	}
	switch {
	case client.Library == "":
		return map[string]string{"external client": "unknown: its hello_ok named no library"}
	case client.Version == "":
		return map[string]string{client.Library: "unknown: its hello_ok named no version"}
	}
	return map[string]string{client.Library: client.Version}
}

// serverVersions asks the nodes of cl, which startCluster returned with
// startErr, for their versions (backend.Versions), straight at their
// addresses, not through the delaying proxy; the SQL servers are asked
// with the impl's user and password. A cluster that did not start gives
// its product as unknown, with startCluster's error as the reason. It
// logs what it found, and never fails the run.
func serverVersions(ctx context.Context, cfg Config, b string, cl clusters.Cluster, startErr error, lg *slog.Logger) map[string]string {
	var vs map[string]string
	if startErr != nil {
		vs = backend.VersionsNotAsked(b, "the nodes did not come up: "+startErr.Error())
	} else {
		vs = backend.Versions(ctx, b, cl.Nodes(), cfg.ImplParams)
	}
	lg.Info("server versions", "backend", b, "versions", vs)
	return vs
}
