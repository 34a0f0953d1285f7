package local

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	_ "github.com/locktest/locktest/impls/all"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
)

// TestResetLeavesNoResidue runs, for every backend that can be reused
// (backend.Reusable), on real servers of the local provider: a fresh
// cluster shows no residue; every impl of the backend on its default
// size takes a lock and keeps holding it (its keys, znodes, rows, leases,
// sessions), and Residue must then list something, else it read nothing;
// Reset, with the holders' clients still connected, must leave no
// residue; a lock taken after the reset must show again (Residue reads
// what is there, not what Reset did); and a second Reset clears it.
func TestResetLeavesNoResidue(t *testing.T) {
	for _, b := range backend.All() {
		t.Run(b, func(t *testing.T) {
			if why := backend.BuiltReason(b); why != "" {
				t.Skip(why) // a server locktest builds itself, which this host lacks
			}
			if !backend.Reusable(b) {
				t.Fatalf("%s has no Reset and Residue: its clusters are never reused", b)
			}
			var names []string
			for _, name := range impls.Names() {
				i, _ := impls.Lookup(name)
				if i.Backend == b && i.Nodes == backend.DefaultNodes(b) {
					names = append(names, name)
				}
			}
			if len(names) == 0 {
				t.Fatalf("no impl of %s runs on its default size", b)
			}
			exe, env := testexe.Node()
			c, err := New(b, Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env})
			c = testcluster.Started(t, c, err)
			layout, err := backend.NewLayout(b, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			nodes := c.Nodes()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			residue := func(when string) []string {
				t.Helper()
				res, err := backend.Residue(ctx, layout, nodes)
				if err != nil {
					t.Fatalf("residue %s: %v", when, err)
				}
				return res
			}
			if res := residue("of a fresh cluster"); len(res) > 0 {
				t.Fatalf("a fresh cluster shows residue: %q", res)
			}
			start := time.Now()
			now := func() time.Duration { return time.Since(start) }
			hold := func(name string, p int) {
				t.Helper()
				cl := testcluster.Client(t, name, nodes, p, now, nil)
				// A lock of its own: a blocking impl would wait out another's.
				if _, err := cl.Acquire(ctx, fmt.Sprintf("lock-%d", p), time.Minute); err != nil && !errors.Is(err, impls.ErrNotAcquired) {
					t.Fatalf("%s: acquire: %v", name, err)
				}
			}
			for p, name := range names {
				hold(name, p)
			}
			if res := residue("while the impls hold their locks"); len(res) == 0 {
				t.Fatalf("no residue while %v hold locks: Residue reads nothing", names)
			} else {
				t.Logf("residue of %v: %q", names, res)
			}
			if err := backend.Reset(ctx, layout, nodes); err != nil {
				t.Fatalf("reset: %v", err)
			}
			if res := residue("after the reset"); len(res) > 0 {
				t.Fatalf("residue after the reset: %q", res)
			}
			hold(names[0], len(names))
			if res := residue("after a lock taken after the reset"); len(res) == 0 {
				t.Fatalf("no residue after %s took a lock after the reset: Residue sees no new state", names[0])
			}
			if err := backend.Reset(ctx, layout, nodes); err != nil {
				t.Fatalf("second reset: %v", err)
			}
			if res := residue("after the second reset"); len(res) > 0 {
				t.Fatalf("residue after the second reset: %q", res)
			}
		})
	}
}
