// Package testlab gives the ssh provider's tests their connections to the
// hosts of an SSH lab (`locktest lab up`), and checks that a run left
// nothing on them.
package testlab

import (
	"context"
	"strings"
	"testing"
	"time"

	sshp "github.com/locktest/locktest/clusters/ssh"
)

// DialTimeout bounds the connection to the lab's hosts and what a test
// does with them through Dial's context.
const DialTimeout = time.Minute

// Dial loads the inventory file and connects to each of its hosts, failing
// the test on an error. The context it returns ends after DialTimeout; the
// connections are closed, and the context cancelled, when the test ends.
func Dial(tb testing.TB, inventory string) (context.Context, []*sshp.Conn) {
	tb.Helper()
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	tb.Cleanup(cancel)
	conns, err := sshp.Dial(ctx, inv)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sshp.CloseAll(conns) })
	return ctx, conns
}

// Leftovers is the shell command that lists, on a host, what a run of the
// ssh provider makes there: the run directories under the default
// working directory, locktest's iptables rules, and the processes of the
// servers it starts (redis-server, locktest's uploaded node program).
const Leftovers = "ls -A " + sshp.DefaultWorkdir + " 2>/dev/null; iptables-save | grep locktest; " +
	"for f in /proc/[0-9]*/cmdline; do grep -qa -e 'redis-serve[r]' -e 'locktest-nod[e]' $f 2>/dev/null && echo process $f; done; true"

// AssertClean checks that no host of the inventory keeps a run directory,
// a locktest iptables rule or a server process a run started.
func AssertClean(tb testing.TB, inventory string) {
	tb.Helper()
	ctx, conns := Dial(tb, inventory)
	for _, c := range conns {
		out, err := c.Run(ctx, Leftovers)
		if err != nil {
			tb.Fatal(err)
		}
		if s := strings.TrimSpace(out); s != "" {
			tb.Errorf("host %s keeps what a run made: %s", c.Host.Name, s)
		}
	}
}
