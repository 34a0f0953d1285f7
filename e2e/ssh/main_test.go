package ssh_test

import (
	"testing"

	// Library code never picks the lock drivers: only the command and the
	// tests register them, by importing impls/all.
	_ "github.com/locktest/locktest/impls/all"
	"github.com/locktest/locktest/testkit/testexe"
	"github.com/locktest/locktest/testkit/testlab"
)

// The test binary doubles as the worker and etcd node programs; the
// locktest command the CLI tests built, and the lab the tests shared
// (testlab.Shared), are removed at the end.
func TestMain(m *testing.M) {
	testexe.Main(m, func() error { removeCLI(); return nil }, testlab.Down)
}
