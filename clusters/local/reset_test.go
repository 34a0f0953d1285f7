package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
			var open []impls.Client
			hold := func(name string, p int) {
				t.Helper()
				i, err := impls.Lookup(name)
				if err != nil {
					t.Fatal(err)
				}
				cfg := impls.Config{Addrs: testcluster.Addrs(nodes), Process: p, Now: now, Wall: time.Now}
				for _, n := range nodes {
					cfg.Nodes = append(cfg.Nodes, impls.Node{Name: n.Name, Addr: n.Addr, Role: n.Role})
				}
				cl, err := i.New(ctx, cfg)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				open = append(open, cl)
				// A lock of its own: a blocking impl would wait out another's.
				if _, err := cl.Acquire(ctx, fmt.Sprintf("lock-%d", p), time.Minute); err != nil && !errors.Is(err, impls.ErrNotAcquired) {
					t.Fatalf("%s: acquire: %v", name, err)
				}
			}
			// closeAll closes the clients, as a run stops its workers.
			closeAll := func() {
				for _, cl := range open {
					cl.Close()
				}
				open = nil
			}
			reset := func(when string) {
				t.Helper()
				if err := backend.Reset(ctx, layout, nodes); err != nil {
					t.Fatalf("reset %s: %v", when, err)
				}
			}
			defer func() { closeAll() }() // each client once: some refuse a second Close
			for p, name := range names {
				hold(name, p)
			}
			held := residue("while the impls hold their locks")
			if len(held) == 0 {
				t.Fatalf("no residue while %v hold locks: Residue reads nothing", names)
			}
			t.Logf("residue of %v: %q", names, held)
			// The holders' clients are still connected: what they made,
			// their sessions included, must be gone all the same. (A
			// client may make a session anew, and its set-up with it,
			// which a run's stopped workers cannot.)
			reset("with the holders connected")
			for _, r := range residue("after the reset") {
				if slices.Contains(held, r) {
					t.Errorf("%q outlived the reset", r)
				}
			}
			closeAll()
			reset("once the clients closed")
			if res := residue("after the reset"); len(res) > 0 {
				t.Fatalf("residue after the reset: %q", res)
			}
			hold(names[0], len(names))
			if res := residue("after a lock taken after the reset"); len(res) == 0 {
				t.Fatalf("no residue after %s took a lock after the reset: Residue sees no new state", names[0])
			}
			closeAll()
			reset("after the lock taken after it")
			if res := residue("after the last reset"); len(res) > 0 {
				t.Fatalf("residue after the last reset: %q", res)
			}
		})
	}
}
