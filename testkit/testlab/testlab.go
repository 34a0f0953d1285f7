// Package testlab gives the ssh provider's tests their connections to the
// hosts of an SSH lab (`locktest lab up`), and checks that a run left
// nothing on them.
package testlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/engine"
	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/clusters/sshlab"
	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/gate"
)

// Up starts an SSH lab of five hosts for the test alone (skipping when no
// Docker engine answers or this host lacks sshd, redis-server or
// iptables, which the lab's image is made from) and removes it when the
// test ends, checking that nothing of it is left; an interrupt of the test
// binary removes it too (see Shared). It returns the lab's inventory
// file. A test that leaves the lab as it found it takes Shared's instead.
func Up(t *testing.T) string {
	t.Helper()
	gate.Need(t, "sshd", "redis-server", "iptables")
	e := dockertest.Open(t)
	dir := t.TempDir()
	unwatch := watch(dir, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lab, err := sshlab.Up(ctx, e, sshlab.Options{Hosts: 5, Dir: dir})
	if err != nil {
		unwatch()
		e.Close()
		t.Fatalf("lab up: %v", err)
	}
	t.Cleanup(func() {
		defer unwatch()
		defer e.Close()
		if err := remove(e, lab.ID); err != nil {
			t.Error(err)
		}
	})
	return lab.Inventory
}

// remove removes the lab id and checks that nothing of it is left.
func remove(e *engine.Engine, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := sshlab.Remove(ctx, e, id); err != nil {
		return fmt.Errorf("lab down: %v", err)
	}
	ids, err := sshlab.IDs(ctx, e)
	if err != nil {
		return fmt.Errorf("lab down: %v", err)
	}
	if slices.Contains(ids, id) {
		return fmt.Errorf("lab %s left containers or its network", id)
	}
	return nil
}

// shared is the test binary's one lab of Shared.
var shared struct {
	// turn is held by the test that uses the lab, from Shared to its end.
	turn sync.Mutex
	// once starts the lab, at the first Shared.
	once    sync.Once
	e       *engine.Engine
	dir     string
	unwatch func()
	lab     *sshlab.Lab
	// skip says why no lab could be made here (no engine answered);
	// err is why the lab's start failed.
	skip string
	err  error
}

// Shared returns the inventory of the test binary's shared SSH lab of
// five hosts, started at the first call (skipping the test as Up does),
// for the tests that leave its hosts as they found them (AssertClean at
// their end): one lab up for all of them instead of one each. The tests
// take turns: Shared holds the lab for t until t ends, so that a test
// that runs in parallel with others waits for its turn there. The
// package's TestMain removes the lab once the tests are done (Down,
// through testexe.Main), and an interrupt (SIGINT, SIGTERM) of the test
// binary removes it and every lab of Up before the binary exits. A test
// that leaves a host broken (an sshd killed, a rule on the SSH port) takes
// a lab of its own from Up.
func Shared(t *testing.T) string {
	t.Helper()
	gate.Need(t, "sshd", "redis-server", "iptables")
	gate.Docker(t)
	shared.turn.Lock()
	t.Cleanup(shared.turn.Unlock)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		e, err := engine.Open(ctx, nil)
		if err != nil {
			shared.skip = fmt.Sprintf("docker tests need a Docker engine: %v", err)
			return
		}
		shared.e = e
		if shared.dir, shared.err = os.MkdirTemp("", "locktest-sshlab"); shared.err != nil {
			return
		}
		shared.unwatch = watch(shared.dir, true)
		shared.lab, shared.err = sshlab.Up(ctx, shared.e, sshlab.Options{Hosts: 5, Dir: shared.dir})
	})
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	if shared.err != nil {
		t.Fatalf("lab up: %v", shared.err)
	}
	return shared.lab.Inventory
}

// Down removes the lab of Shared, if a test started one, checks that
// nothing of it is left, and removes its folder. A package whose tests
// call Shared passes it to testexe.Main, which runs it after the tests.
func Down() error {
	if shared.e == nil {
		return nil
	}
	defer shared.e.Close()
	if shared.unwatch != nil {
		defer shared.unwatch()
	}
	var err error
	if shared.lab != nil {
		err = remove(shared.e, shared.lab.ID)
	}
	if shared.dir != "" {
		err = errors.Join(err, os.RemoveAll(shared.dir))
	}
	return err
}

// watching is the folders of the labs this test binary has up, or is
// bringing up, which an interrupt removes (sshlab.Down by the folder
// label, so that a lab still coming up goes too), each with whether the
// folder itself goes too.
var watching struct {
	sync.Mutex
	dirs    map[string]bool
	started bool
}

// watch adds the lab of folder dir to those an interrupt of the test
// binary removes (and the folder, with rmdir), and returns the function
// that takes it off.
func watch(dir string, rmdir bool) (unwatch func()) {
	watching.Lock()
	defer watching.Unlock()
	if watching.dirs == nil {
		watching.dirs = map[string]bool{}
	}
	watching.dirs[dir] = rmdir
	if !watching.started {
		watching.started = true
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go onInterrupt(sig)
	}
	return func() {
		watching.Lock()
		defer watching.Unlock()
		delete(watching.dirs, dir)
	}
}

// onInterrupt waits for the first signal on sig, removes the labs being
// watched, and exits: go test's Ctrl-C reaches the test binary too, which
// would otherwise die at once and leave its labs running.
func onInterrupt(sig <-chan os.Signal) {
	s := <-sig
	watching.Lock() // held to the exit: no lab is added or removed meanwhile
	code := 1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := engine.Open(ctx, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testlab: %v: cannot reach the Docker engine to remove the SSH labs of %v: %v\n", s, watching.dirs, err)
		os.Exit(code)
	}
	for dir, rmdir := range watching.dirs {
		ids, err := sshlab.Down(ctx, e, dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testlab: %v: remove the SSH lab of %s: %v\n", s, dir, err)
			continue
		}
		fmt.Fprintf(os.Stderr, "testlab: %v: removed the SSH labs %v\n", s, ids)
		if rmdir {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
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
