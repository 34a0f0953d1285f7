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
	backendtable.Run(t, backend.All(), func(t *testing.T, b string) clusters.Cluster {
		exe, env := testexe.Node()
		c, err := New(b, Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env})
		return testcluster.Started(t, c, err)
	})
}
