// Package sshcli_test drives the locktest command over an SSH lab, as a
// user does: the debate's claims over the lab, a run interrupted with
// Ctrl-C or killed outright, `locktest cleanup --provider ssh`, and
// `locktest lab up` and `lab down`. The provider's own runs are in
// e2e/ssh; the two packages run side by side.
package sshcli_test

import (
	"testing"

	// Library code never picks the lock drivers: only the command and the
	// tests register them, by importing impls/all.
	_ "github.com/locktest/locktest/impls/all"
	"github.com/locktest/locktest/testkit/testexe"
)

// The test binary doubles as the worker and etcd node programs; the
// locktest command the tests built is removed at the end.
func TestMain(m *testing.M) { testexe.Main(m, func() { removeCLI() }) }
