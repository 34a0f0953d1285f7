// Package dockertest is the test rig of the tests that need a Docker
// engine: a connection to it, or the test skipped saying why there is
// none.
package dockertest

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/testkit/gate"
)

// Engine returns a connection to the Docker engine, closed at the test's
// end, or skips the test (gate.Docker, or an engine that does not answer
// within a minute) saying why there is none.
func Engine(t testing.TB) *engine.Engine {
	t.Helper()
	e := Open(t)
	t.Cleanup(func() { e.Close() })
	return e
}

// Open is Engine for a caller that closes the connection itself, before
// the test ends: it returns a connection to the Docker engine, or skips
// the test (gate.Docker, or an engine that does not answer within a minute)
// saying why there is none.
func Open(t testing.TB) *engine.Engine {
	t.Helper()
	gate.Docker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := engine.Open(ctx, nil)
	if err != nil {
		t.Skipf("docker tests need a Docker engine: %v", err)
	}
	return e
}
