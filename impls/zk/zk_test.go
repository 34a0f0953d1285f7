package zk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/testcluster"
)

// ensemble is the one 3-peer ZooKeeper every test of this package shares;
// nil when java or the jars are missing.
var (
	ensemble clusters.Cluster
	addrs    []string
	setupErr error
)

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "zk-impl-test")
		if err != nil {
			setupErr = err
			return m.Run()
		}
		defer os.RemoveAll(dir)
		z, err := local.New("zookeeper", local.Options{Dir: dir})
		if err != nil {
			setupErr = err
			return m.Run()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		defer z.Stop(context.Background())
		if err := z.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "start ZooKeeper:", err)
			return 1
		}
		ensemble = z
		for _, n := range z.Nodes() {
			addrs = append(addrs, n.Addr)
		}
		return m.Run()
	}()
	os.Exit(code)
}

func needEnsemble(t *testing.T) {
	t.Helper()
	if ensemble == nil {
		t.Skipf("no ZooKeeper ensemble (make setup): %v", setupErr)
	}
}

var allImpls = []string{"zk-recipe", "zk-lock"}

// epoch is the start of the harness clock the tests give the clients.
var epoch = time.Now()

func now() time.Duration { return time.Since(epoch) }

// newClient builds a client of impl name for process p; edit may adjust
// the configuration first.
func newClient(t *testing.T, name string, p int, edit func(*impls.Config)) impls.Client {
	var nodes []clusters.Node
	for i, a := range addrs {
		nodes = append(nodes, clusters.Node{Name: fmt.Sprintf("n%d", i+1), Addr: a})
	}
	return testcluster.Client(t, name, nodes, p, now, edit)
}

// sessionOf returns the session inside a client of this package.
func sessionOf(c impls.Client) *session {
	switch c := c.(type) {
	case *Recipe:
		return c.session
	case *Lock:
		return c.session
	}
	panic(fmt.Sprintf("not a zk client: %T", c))
}

// raw returns a plain session to inspect the ensemble.
func raw(t *testing.T) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(addrs, 4*time.Second, zk.WithLogger(discard{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type discard struct{}

func (discard) Printf(string, ...any) {}

func acquire(t *testing.T, c impls.Client, lock string, ttl, wait time.Duration) (impls.Lease, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return c.Acquire(ctx, lock, ttl)
}

func mustAcquire(t *testing.T, c impls.Client, lock string, ttl time.Duration) impls.Lease {
	t.Helper()
	l, err := acquire(t, c, lock, ttl, 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", lock, err)
	}
	return l
}

func release(t *testing.T, c impls.Client, l impls.Lease) (impls.Released, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Release(ctx, l)
}

// contend runs test for each impl of this package, each in a parallel
// subtest of its name, with a lock name no other test uses and two clients
// of the impl, a (process 1) and b (process 2). It skips t when there is no
// ensemble.
func contend(t *testing.T, test func(t *testing.T, name, lock string, a, b impls.Client)) {
	needEnsemble(t)
	for _, name := range allImpls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, name, uniqueLock(t), newClient(t, name, 1, nil), newClient(t, name, 2, nil))
		})
	}
}

// uniqueLock returns a lock name no other test uses.
func uniqueLock(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
}

func TestRegistry(t *testing.T) {
	for _, name := range allImpls {
		i, err := impls.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if i.Backend != "zookeeper" || i.Nodes != 3 || i.Doc == "" || i.New == nil {
			t.Errorf("%s: %+v", name, i)
		}
		if i.Fenced != (name == "zk-recipe") {
			t.Errorf("%s: Fenced = %v", name, i.Fenced)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, name := range allImpls {
		i, _ := impls.Lookup(name)
		for _, tt := range []struct {
			cfg  impls.Config
			want string
		}{
			{impls.Config{Now: now}, "Addrs is empty"},
			{impls.Config{Addrs: []string{"127.0.0.1:1"}}, "Config.Now is required"},
			{impls.Config{Addrs: []string{"127.0.0.1:1"}, Now: now, Params: map[string]string{"session-timeout": "long"}}, "session-timeout"},
		} {
			if _, err := i.New(context.Background(), tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), name) {
				t.Errorf("%s: New(%+v) = %v, want an error about %q", name, tt.cfg, err, tt.want)
			}
		}
		c, err := i.New(context.Background(), impls.Config{Addrs: []string{"127.0.0.1:1"}, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"", "a/b", "..", "zookeeper"} {
			if _, err := c.Acquire(context.Background(), bad, time.Second); err == nil || !strings.Contains(err.Error(), "not a valid znode name") {
				t.Errorf("%s: Acquire(%q) = %v", name, bad, err)
			}
		}
		c.Close()
	}
}

func TestSeqOf(t *testing.T) {
	for _, tt := range []struct {
		name string
		seq  int64
		ok   bool
	}{
		{"_c_0123abcd-lock-0000000042", 42, true},
		{"_c_x-lock-lock-0000000007", 7, true},
		{"_c_0-lock-2147483647", 2147483647, true},
		{"lock-0000000001", 0, false},
		{"_c_abc-lock-", 0, false},
		{"other", 0, false},
	} {
		seq, ok := seqOf(tt.name)
		if seq != tt.seq || ok != tt.ok {
			t.Errorf("seqOf(%q) = %d, %v; want %d, %v", tt.name, seq, ok, tt.seq, tt.ok)
		}
	}
}

// Acquire, contend until the deadline, release, acquire again.
func TestMutualExclusion(t *testing.T) {
	contend(t, func(t *testing.T, name, lock string, a, b impls.Client) {
		const ttl = 2 * time.Second

		before := now()
		la := mustAcquire(t, a, lock, ttl)
		after := now()
		if la.Lock != lock || la.Value == "" || !slices.Contains(addrs, la.Node) {
			t.Errorf("lease %+v", la)
		}
		// The session timeout asked for is the ttl, which the servers
		// grant (400ms..4s with a 200ms tick).
		if la.ValidUntil < before+ttl-10*time.Millisecond || la.ValidUntil > after+ttl {
			t.Errorf("ValidUntil %v not within [%v, %v]", la.ValidUntil, before+ttl, after+ttl)
		}
		if la.HasToken != (name == "zk-recipe") {
			t.Errorf("HasToken = %v", la.HasToken)
		}

		// b waits until its deadline: 2 s, so that its create (a
		// quorum write) is answered before it, also on a loaded
		// machine (300 ms was not, under stress-ng: an unknown
		// outcome, rightly).
		_, err := acquire(t, b, lock, ttl, 2*time.Second)
		switch name {
		case "zk-recipe":
			// Its node was deleted again: a certain failure.
			if !errors.Is(err, impls.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("contended acquire: %v, want ErrNotAcquired at the deadline", err)
			}
			children, _, err := raw(t).Children(recipeRoot + "/" + lock)
			if err != nil || len(children) != 1 || children[0] != la.Value[len(recipeRoot)+len(lock)+2:] {
				t.Errorf("children after a timed-out acquire: %v %v, want only the holder's", children, err)
			}
		case "zk-lock":
			// zk.Lock may have created its node: unknown.
			if err == nil || errors.Is(err, impls.ErrNotAcquired) {
				t.Fatalf("contended acquire: %v, want an unknown outcome", err)
			}
		}

		rel, err := release(t, a, la)
		if err != nil {
			t.Fatalf("Release: %v", err)
		}
		if rel.Removed != la.Value {
			t.Errorf("Removed %q, want %q", rel.Removed, la.Value)
		}
		// zk-lock's abandoned Lock of b may get the lock for a moment
		// and unlock it: b's next acquire waits for it.
		lb := mustAcquire(t, b, lock, ttl)
		if lb.Value == la.Value {
			t.Errorf("two acquires with the same value %q", lb.Value)
		}
		if name == "zk-recipe" && lb.Token <= la.Token {
			t.Errorf("token %d after %d: not increasing", lb.Token, la.Token)
		}
		if _, err := release(t, b, lb); err != nil {
			t.Fatal(err)
		}
		if _, err := release(t, b, lb); !errors.Is(err, impls.ErrNotHeld) {
			t.Errorf("second Release: %v, want ErrNotHeld", err)
		}
	})
}

// A blocked acquire gets the lock as soon as the holder releases it.
func TestBlockingHandoff(t *testing.T) {
	contend(t, func(t *testing.T, name, lock string, a, b impls.Client) {
		la := mustAcquire(t, a, lock, 2*time.Second)
		got := make(chan error, 1)
		var lb impls.Lease
		go func() {
			var err error
			lb, err = acquire(t, b, lock, 2*time.Second, 20*time.Second)
			got <- err
		}()
		select {
		case err := <-got:
			t.Fatalf("acquire returned while the lock was held: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if _, err := release(t, a, la); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiting acquire: %v", err)
		}
		if _, err := release(t, b, lb); err != nil {
			t.Fatal(err)
		}
	})
}

// watches returns, for every path watched on any peer, how many sessions
// watch it (the `wchp` four-letter command).
func watches(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, a := range addrs {
		conn, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(conn, "wchp")
		b, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		var path string
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(line, "/"):
				path = line
			case strings.HasPrefix(strings.TrimSpace(line), "0x") && path != "":
				out[path]++
			}
		}
	}
	return out
}

// zk-recipe's waiters each watch only their predecessor: no watch on the
// parent, one watcher per node.
func TestNoHerdEffect(t *testing.T) {
	needEnsemble(t)
	lock := uniqueLock(t)
	parent := recipeRoot + "/" + lock
	holder := newClient(t, "zk-recipe", 0, nil)
	lh := mustAcquire(t, holder, lock, 2*time.Second)
	const waiters = 3
	var wg sync.WaitGroup
	results := make([]error, waiters)
	for i := range waiters {
		c := newClient(t, "zk-recipe", i+1, nil)
		wg.Go(func() {
			l, err := acquire(t, c, lock, 2*time.Second, 20*time.Second)
			if err == nil {
				_, err = release(t, c, l)
			}
			results[i] = err
		})
	}
	var w map[string]int
	deadline := time.Now().Add(10 * time.Second)
	for {
		w = watches(t)
		n := 0
		for p, k := range w {
			if strings.HasPrefix(p, parent+"/") {
				n += k
			}
		}
		if n >= waiters || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	children, _, err := raw(t).Children(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != waiters+1 {
		t.Errorf("%d contenders, want %d: %v", len(children), waiters+1, children)
	}
	if w[parent] != 0 {
		t.Errorf("%d watches on the lock node itself: a release would wake every waiter", w[parent])
	}
	slices.SortFunc(children, func(a, b string) int { x, _ := seqOf(a); y, _ := seqOf(b); return int(x - y) })
	for i, ch := range children {
		want := 1 // each node but the last is watched by its successor
		if i == len(children)-1 {
			want = 0
		}
		if got := w[parent+"/"+ch]; got != want {
			t.Errorf("node %d (%s) has %d watchers, want %d; watches %v", i, ch, got, want, w)
		}
	}
	// Each waiter gets the lock in turn and passes it on.
	if _, err := release(t, holder, lh); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range waiters {
		if results[i] != nil {
			t.Errorf("waiter %d: %v", i, results[i])
		}
	}
}

// cutter is a dialer whose connections the test can cut, and whose dials
// it can refuse, to make the server expire a session.
type cutter struct {
	mu      sync.Mutex
	blocked bool
	conns   []net.Conn
	// dropAfter, when set, loses the reply of the request written in the
	// first write that contains it: from that write on, what the connection
	// reads is thrown away, and once applied (if set) returns, the
	// connection is closed. The request reaches the server; its reply never
	// reaches the client.
	dropAfter []byte
	applied   func()
}

func (c *cutter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blocked {
		return nil, errors.New("test: dialling blocked")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	conn = &cutConn{Conn: conn, c: c}
	c.conns = append(c.conns, conn)
	return conn, nil
}

// cut closes every connection and refuses new ones until restore.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked = true
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cutter) restore() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked = false
}

type cutConn struct {
	net.Conn
	c *cutter
	// deaf is set once the request whose reply is lost was written; closed
	// is closed when the connection has been closed after it.
	deaf   atomic.Bool
	closed chan struct{}
}

func (cc *cutConn) Write(b []byte) (int, error) {
	cc.c.mu.Lock()
	drop := cc.c.dropAfter != nil && bytes.Contains(b, cc.c.dropAfter)
	if drop {
		cc.c.dropAfter = nil
		cc.closed = make(chan struct{})
		cc.deaf.Store(true) // before the write: its reply must not be read
	}
	applied := cc.c.applied
	cc.c.mu.Unlock()
	n, err := cc.Conn.Write(b)
	if drop {
		go func() {
			if applied != nil {
				applied()
			}
			cc.Conn.Close()
			close(cc.closed)
		}()
	}
	return n, err
}

func (cc *cutConn) Read(b []byte) (int, error) {
	n, err := cc.Conn.Read(b)
	if cc.deaf.Load() {
		<-cc.closed
		return 0, net.ErrClosed
	}
	return n, err
}

// A holder whose session expires while it holds the lock loses it to the
// next contender, and its release says that the session expired.
func TestSessionExpiryWhileHolding(t *testing.T) {
	contend(t, func(t *testing.T, name, lock string, a, b impls.Client) {
		cut := &cutter{}
		sessionOf(a).dialer = cut.dial // a connects at its first acquire
		// 100ms is below the servers' minimum of 2 ticks: they grant
		// 400ms, and the lease says so.
		const ttl = 100 * time.Millisecond
		start := now()
		la := mustAcquire(t, a, lock, ttl)
		if got := sessionOf(a).sessionTimeout(); got != 400*time.Millisecond {
			t.Errorf("negotiated session timeout %v, want 400ms (2·tickTime)", got)
		}
		if la.ValidUntil < start+400*time.Millisecond {
			t.Errorf("ValidUntil %v is not acquire time %v + 400ms", la.ValidUntil, start)
		}
		cut.cut()
		// The servers expire a's session and b gets the lock.
		lb, err := acquire(t, b, lock, 2*time.Second, 15*time.Second)
		if err != nil {
			t.Fatalf("acquire after the holder's session died: %v", err)
		}
		if name == "zk-recipe" && lb.Token <= la.Token {
			t.Errorf("token %d after %d", lb.Token, la.Token)
		}
		cut.restore()
		// a learns of the expiry when it reconnects.
		deadline := time.Now().Add(10 * time.Second)
		for sessionOf(a).newHold().expiries == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		_, err = release(t, a, la)
		if !errors.Is(err, impls.ErrNotHeld) || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "while this client held") {
			t.Fatalf("release after expiry: %v, want ErrNotHeld saying the session expired", err)
		}
		t.Logf("release error: %v", err)
		if _, err := release(t, b, lb); err != nil {
			t.Errorf("b's release: %v", err)
		}
	})
}

// A create whose reply is lost is found by its GUID: the acquire succeeds
// with one node, not two.
func TestLostCreateReply(t *testing.T) {
	needEnsemble(t)
	lock := uniqueLock(t)
	// The lock node exists: the lost create is the contender's.
	b := newClient(t, "zk-recipe", 2, nil)
	if _, err := release(t, b, mustAcquire(t, b, lock, 4*time.Second)); err != nil {
		t.Fatal(err)
	}
	a := newClient(t, "zk-recipe", 1, nil)
	// The connection is closed only once the server has the node, so the
	// create certainly took effect and only its reply was lost.
	cut := &cutter{dropAfter: []byte("-lock-"), applied: func() {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if ch, _, err := raw(t).Children(recipeRoot + "/" + lock); err == nil && len(ch) > 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}}
	sessionOf(a).dialer = cut.dial
	la := mustAcquire(t, a, lock, 4*time.Second)
	if cut.dropAfter != nil {
		t.Fatal("the create request was never written")
	}
	if sessionOf(a).foundByGUID.Load() != 1 {
		t.Errorf("the node was not found by its GUID (%d)", sessionOf(a).foundByGUID.Load())
	}
	children, _, err := raw(t).Children(recipeRoot + "/" + lock)
	if err != nil || len(children) != 1 || !strings.HasSuffix(la.Value, children[0]) {
		t.Fatalf("children %v (%v), want only the lease's node %s", children, err, la.Value)
	}
	if _, err := release(t, a, la); err != nil {
		t.Fatal(err)
	}
}

// A request whose connection broke is one to send again: the library's
// ErrConnectionClosed, and the socket's EPIPE or ECONNRESET, which the
// library passes on as a net.OpError when it writes to a connection the
// server closed (a session that expired while its client was paused); not
// a refusal of the server.
func TestConnBroken(t *testing.T) {
	write := func(errno syscall.Errno) error {
		return &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", errno)}
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{zk.ErrConnectionClosed, true},
		{write(syscall.EPIPE), true},
		{fmt.Errorf("delete: %w", write(syscall.ECONNRESET)), true},
		{zk.ErrNoNode, false},
		{zk.ErrSessionExpired, false},
		{write(syscall.ENOSPC), false},
		{nil, false},
	} {
		if got := connBroken(tc.err); got != tc.want {
			t.Errorf("connBroken(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
