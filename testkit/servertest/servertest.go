// Package servertest is the shared set-up of the tests of the impls whose
// backend is one local server (MariaDB, PostgreSQL): it starts the server
// for a test and makes clients of it.
package servertest

import (
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/testcluster"
)

// Start starts a one-server local cluster of kind ("mysql", "postgres")
// in a temporary folder of t and returns it. As testcluster.Started does,
// it skips t under -short, fails t when the server cannot start, and stops
// the server when t ends.
func Start(t *testing.T, kind string) clusters.Cluster {
	t.Helper()
	c, err := local.New(kind, local.Options{Dir: t.TempDir()})
	return testcluster.Started(t, c, err)
}

// SlowConnect runs testcluster.SlowConnect against c for each of the
// impls named, each in a subtest of its name.
func SlowConnect(t *testing.T, c clusters.Cluster, names ...string) {
	for _, name := range names {
		t.Run(name, func(t *testing.T) { testcluster.SlowConnect(t, c, name) })
	}
}

// Client returns a client of the impl named impl for process p against
// the one server at addr, node n1, on a harness clock that starts now;
// edit, when not nil, adjusts the configuration first. As
// testcluster.Client does, it fails t when the client cannot be made and
// closes the client when t ends.
func Client(t *testing.T, impl, addr string, p int, edit func(*impls.Config)) impls.Client {
	t.Helper()
	start := time.Now()
	return testcluster.Client(t, impl, []clusters.Node{{Name: "n1", Addr: addr}}, p,
		func() time.Duration { return time.Since(start) }, edit)
}
