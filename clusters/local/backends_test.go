package local

import (
	"testing"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/backendtable"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
)

// Every backend runs on the local provider, with the checks every
// provider passes (backendtable.Run): its layout, readiness, roles and
// targets, a pause, a kill and a restart, and a stop. A backend missing
// here is a failure, not a gap in a doc.
func TestEveryBackendRunsOnLocal(t *testing.T) {
	backendtable.Run(t, Backends(), func(t *testing.T, b string) clusters.Cluster {
		exe, env := testexe.Node()
		c, err := New(b, Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env})
		return testcluster.Started(t, c, err)
	})
}

// Every backend whose nodes are kinds (backend.Kinds) runs on the local
// provider's generic cluster, KindCluster, from its definition alone, with
// the checks every provider passes: what a backend written once in
// clusters/backend gets here with no code of its own.
func TestEveryKindBackendRunsOnKindCluster(t *testing.T) {
	var kinds []string
	for _, b := range backend.All() {
		if b != backend.MySQL && b != backend.Postgres {
			kinds = append(kinds, b)
		}
	}
	backendtable.RunSome(t, kinds, func(t *testing.T, b string) clusters.Cluster {
		exe, env := testexe.Node()
		c, err := NewKindCluster(b, Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env})
		return testcluster.Started(t, c, err)
	})
}
