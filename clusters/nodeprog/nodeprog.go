// Package nodeprog names the servers that locktest's node program embeds,
// each by the kind of node it runs: `locktest node <kind> [flags]` runs
// one, and so does a test binary standing in for locktest (testkit's
// testexe). A backend whose servers run in the node program (its kind's
// Program is backend.NodeProgram) adds its server here.
package nodeprog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/etcdnode"
	"github.com/locktest/locktest/clusters/natsnode"
	"github.com/locktest/locktest/clusters/synctrace"
)

// Server is one embedded server: it runs until ctx ends or the process is
// told to stop, and returns an error naming what was wrong with args or
// the server's start.
type Server struct {
	// Short says in a line what the server is, for the command's help.
	Short string
	Main  func(ctx context.Context, args []string) error
}

var servers = map[string]Server{
	backend.KindEtcd: {Short: "Run one embedded etcd member (internal)", Main: etcdnode.Main},
	backend.KindNats: {Short: "Run one embedded NATS server with JetStream (internal)", Main: natsnode.Main},
}

// Names returns the kinds of node the node program runs, sorted.
func Names() []string { return slices.Sorted(maps.Keys(servers)) }

// Of returns the server of the kind called name.
func Of(name string) (Server, bool) {
	s, ok := servers[name]
	return s, ok
}

// Run runs the server of the kind called name with args, as
// `locktest node <name>` does. When the node's environment names a sync
// record (durable.EnvFile, set by a provider for a run with power-loss),
// the server runs under the sync tracer (clusters/synctrace), which
// records every file it syncs there: this process execs itself again
// under the tracer's filter, and a process started as the tracer's
// supervisor supervises instead.
func Run(ctx context.Context, name string, args []string) error {
	if synctrace.IsSupervisor() {
		return synctrace.Supervise()
	}
	srv, ok := Of(name)
	if !ok {
		return fmt.Errorf("node: no server %q (there are %s)", name, strings.Join(Names(), ", "))
	}
	if synctrace.Asked() {
		if err := synctrace.Start(); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
	}
	return srv.Main(ctx, args)
}
