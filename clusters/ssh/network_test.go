package ssh_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestHealAfterACutItsContextCutShort: a cut whose context ends while it
// goes in (CI at ed6ca05: the fault phase ended during an isolate that
// took seconds over SSH) must leave the hosts with the rules the driver
// knows of, so that the heal right after it removes every rule of the run
// and none comes back later from a host's shell still at work. Each round
// ends the cut's context a little later, to meet it at another point.
func TestHealAfterACutItsContextCutShort(t *testing.T) {
	ctx, conns, cl, runID := labCluster(t, "redis", 3)
	nw := cl.Network(conns, nil, "test")
	t.Cleanup(func() { nw.Heal(context.Background()) })
	rules := func() []string {
		t.Helper()
		var left []string
		for _, c := range conns {
			out, err := c.Root(ctx, "iptables-save -t filter | grep -F -e locktest:"+runID+" || true")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if l != "" {
					left = append(left, c.Host.Name+": "+l)
				}
			}
		}
		return left
	}
	for i := range 8 {
		cctx, cancel := context.WithTimeout(ctx, time.Duration(i)*4*time.Millisecond)
		cerr := nw.Cut(cctx, []string{"n1"}, []string{"n2", "n3"})
		cancel()
		if i == 0 && cerr == nil {
			t.Errorf("a cut with an ended context reported success")
		}
		if err := nw.Heal(ctx); err != nil {
			t.Fatalf("round %d: heal after a cut (its error: %v): %v", i, cerr, err)
		}
		time.Sleep(300 * time.Millisecond)
		if left := rules(); len(left) > 0 {
			t.Fatalf("round %d: after a cut (its error: %v) and its heal, rules of the run came back: %q", i, cerr, left)
		}
	}
}
