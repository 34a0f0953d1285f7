// Package testlab gives the ssh provider's tests their connections to the
// hosts of an SSH lab (`locktest lab up`), and checks that a run left
// nothing on them.
package testlab

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/clusters/sshlab"
	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/gate"
)

// Up starts an SSH lab of five hosts for the test (skipping when no
// Docker engine answers or this host lacks sshd, redis-server or
// iptables, which the lab's image is made from) and removes it when the
// test ends, checking that nothing of it is left. It returns the lab's
// inventory file.
func Up(t *testing.T) string {
	t.Helper()
	gate.Need(t, "sshd", "redis-server", "iptables")
	e := dockertest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lab, err := sshlab.Up(ctx, e, sshlab.Options{Hosts: 5, Dir: t.TempDir()})
	if err != nil {
		e.Close()
		t.Fatalf("lab up: %v", err)
	}
	t.Cleanup(func() {
		defer e.Close()
		if err := sshlab.Remove(context.Background(), e, lab.ID); err != nil {
			t.Errorf("lab down: %v", err)
		}
		ids, err := sshlab.IDs(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ids, lab.ID) {
			t.Errorf("lab %s left containers or its network", lab.ID)
		}
	})
	return lab.Inventory
}

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
// working directory, locktest's iptables rules, the processes of the
// servers it starts (redis-server, a sentinel, which is redis-server
// --sentinel or redis-sentinel, locktest's uploaded node program, a
// ZooKeeper peer, mariadbd, PostgreSQL's postmaster and backends), and
// System V shared memory segments (a killed PostgreSQL's; a lab host has
// an IPC namespace of its own, where nothing else makes one).
const Leftovers = "ls -A " + sshp.DefaultWorkdir + " 2>/dev/null; iptables-save | grep locktest; " +
	"for f in /proc/[0-9]*/cmdline; do grep -qa -e 'redis-serve[r]' -e 'redis-sentine[l]' -e 'locktest-nod[e]' -e 'QuorumPeerMai[n]' -e 'mariad[b]d' -e 'postgre[s]' $f 2>/dev/null && echo process $f; done; " +
	"awk 'NR > 1 {print \"shared memory segment\", $2}' /proc/sysvipc/shm 2>/dev/null; true"

// AssertClean checks that no host of the inventory, but those named in
// except, keeps a run directory, a locktest iptables rule or a server
// process a run started. (testexe.Main checks, once every test is done,
// that this process keeps no client addresses of a run: tests of
// separate labs may run in parallel.)
func AssertClean(tb testing.TB, inventory string, except ...string) {
	tb.Helper()
	ctx, conns := Dial(tb, inventory)
	for _, c := range conns {
		if slices.Contains(except, c.Host.Name) {
			continue
		}
		out, err := c.Run(ctx, Leftovers)
		if err != nil {
			tb.Fatal(err)
		}
		if s := strings.TrimSpace(out); s != "" {
			tb.Errorf("host %s keeps what a run made: %s", c.Host.Name, s)
		}
	}
}

// Started makes a cluster with opts over the lab's hosts (opts.Conns and
// opts.Inventory), with a run id of its own when opts has none, starts it
// and returns it; the cluster is stopped, and the run's directories
// removed from the hosts, when the test ends. A failed start fails t.
func Started(t *testing.T, opts sshp.Options) *sshp.Hosts {
	t.Helper()
	if opts.RunID == "" {
		opts.RunID = sshp.NewRunID()
	}
	cl, err := sshp.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Stop(context.Background())
		if err := sshp.RemoveRunDirs(context.Background(), opts.Conns, opts.RunID); err != nil {
			t.Errorf("remove the run's directories: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return cl
}
