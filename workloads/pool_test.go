package workloads

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/history"
	_ "github.com/locktest/locktest/impls/all"
	"github.com/locktest/locktest/testkit/gate"
)

// The test binary doubles as the worker program: with this variable set it
// runs one worker instead of the tests.
const workerEnv = "LOCKTEST_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := RunWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testPool starts a redis-server, a store and n workers of impl, all
// stopped at the end of the test.
func testPool(t *testing.T, impl string, n int) (*Pool, *history.Recorder, *local.Processes, history.Clock) {
	t.Helper()
	return testPoolWith(t, impl, n, nil)
}

// testPoolWith is testPool with the pool's config changed by edit first.
func testPoolWith(t *testing.T, impl string, n int, edit func(*PoolConfig)) (*Pool, *history.Recorder, *local.Processes, history.Clock) {
	t.Helper()
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	ctx := context.Background()
	cl, err := local.NewProcesses("redis", local.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop(context.Background()) })
	clock := history.StartClock()
	store, err := StartStore(ModeNone, clock, filepath.Join(dir, "resource.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	rec := history.NewRecorder(nil)
	cfg := PoolConfig{
		Command: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}, LogDir: dir, Recorder: rec, Clock: clock,
		Base: WorkerConfig{
			Impl: impl, Addrs: []string{cl.Nodes()[0].Addr}, Locks: []string{"l"}, TTL: Duration(time.Second),
			Backoff: Backoff{Policy: BackoffUniform, Retry: Duration(2 * time.Millisecond)}, Think: Duration(2 * time.Millisecond), Timeout: Duration(time.Second),
			StoreAddr: store.Addr(), Mode: ModeNone, ClockOrigin: clock.Origin(), Seed: 1,
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	pool, err := StartPool(ctx, cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Stop(context.Background()) })
	return pool, rec, cl, clock
}

// opsOf counts the ops of process p recorded so far.
func opsOf(rec *history.Recorder, p int) int {
	n := 0
	for _, o := range rec.History() {
		if o.Process == p {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or the test's patience runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// armAndWait arms worker process at point and waits, until ctx is done,
// for it to report the pause point it stands at, which it returns. It
// fails the test when the arm or the wait fails.
func armAndWait(ctx context.Context, t *testing.T, pool *Pool, process int, point string) string {
	t.Helper()
	if err := pool.Arm(process, point); err != nil {
		t.Fatal(err)
	}
	pt, err := pool.WaitPoint(ctx, process)
	if err != nil {
		t.Fatalf("WaitPoint: %v", err)
	}
	return pt
}

func TestPoolHoldsAWorkerAtItsPausePoint(t *testing.T) {
	pool, rec, _, _ := testPool(t, "redis-set-nx-px", 2)
	ctx := context.Background()
	if pt := armAndWait(ctx, t, pool, 0, PointAfterAcquire); pt != PointAfterAcquire {
		t.Fatalf("WaitPoint = %q", pt)
	}
	// At the point, the worker's last op is its acquire ok, and it records
	// nothing more until it is told to go on, while the other worker waits
	// for the lock it holds.
	before := opsOf(rec, 0)
	time.Sleep(200 * time.Millisecond)
	h := rec.History()
	var last history.Op
	for _, o := range h {
		if o.Process == 0 {
			last = o
		}
	}
	if last.F != history.Acquire || last.Type != history.OK {
		t.Fatalf("worker at the pause point last recorded %s %s", last.F, last.Type)
	}
	if n := opsOf(rec, 0); n != before {
		t.Fatalf("worker held at the point recorded %d more ops", n-before)
	}
	if err := pool.Continue(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker to go on", func() bool { return opsOf(rec, 0) > before+4 })
}

func TestPoolSkewsAWorkersWallClock(t *testing.T) {
	pool, rec, _, _ := testPool(t, "redis-setnx-getset", 1)
	if err := pool.SetWallOffset(0, time.Hour); err != nil {
		t.Fatal(err)
	}
	// The getset lock writes its client's wall-clock expiry into the lock
	// value; after the skew it is an hour ahead.
	from := rec.Len()
	waitFor(t, "an acquire with the skewed clock", func() bool {
		for _, o := range rec.History()[from:] {
			if o.F != history.Acquire || o.Type != history.OK {
				continue
			}
			ms, err := strconv.ParseInt(strings.SplitN(o.Value.LockValue, ":", 2)[0], 10, 64)
			if err != nil {
				t.Fatalf("lock value %q", o.Value.LockValue)
			}
			if time.UnixMilli(ms).After(time.Now().Add(50 * time.Minute)) {
				return true
			}
		}
		return false
	})
}

// freezeNode pauses the node of cl, which the test is to resume, and waits
// until worker p has an acquire or a release open that it invoked after
// the node froze: one that cannot have been answered (an op open before
// may have had its answer already, on its way to the recorder; under
// stress-ng, one whose worker then died was rightly recorded ok). It
// returns the node.
func freezeNode(ctx context.Context, t *testing.T, cl *local.Processes, clock history.Clock, rec *history.Recorder, p int) clusters.Node {
	t.Helper()
	node := cl.Nodes()[0]
	if err := cl.Pause(ctx, node); err != nil {
		t.Fatal(err)
	}
	frozen := clock.Now()
	waitFor(t, "worker "+strconv.Itoa(p)+" to wait on the frozen node", func() bool {
		o, open := rec.Open(p)
		return open && time.Duration(o.Time) > frozen && (o.F == history.Acquire || o.F == history.Release)
	})
	return node
}

func TestPoolCompletesADeadWorkersOpenOpAsInfo(t *testing.T) {
	// Ops that wait 4 s: one sent before the node froze ends well within
	// waitFor's 10 s, and one sent after stays open for the kill, also
	// through a stall of a loaded machine.
	pool, rec, cl, clock := testPoolWith(t, "redis-set-nx-px", 2, func(c *PoolConfig) { c.Base.Timeout = Duration(4 * time.Second) })
	ctx := context.Background()
	// Freeze the node, so that every worker soon waits in a lock call, and
	// kill worker 1 there: its open op may have taken effect.
	node := freezeNode(ctx, t, cl, clock, rec, 1)
	inv, _ := rec.Open(1)
	if err := pool.Signal(1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the dead worker to leave the pool", func() bool { return len(pool.Processes()) == 1 })
	if got := pool.Processes(); got[0] != 0 {
		t.Fatalf("live processes %v, want [0]", got)
	}
	if err := pool.Signal(1, syscall.SIGCONT); err == nil {
		t.Error("signalling a dead worker succeeded")
	}
	h := rec.History()
	c := h.Pair()[inv.Index]
	if c < 0 {
		t.Fatalf("the dead worker's %s (op %d) was never completed", inv.F, inv.Index)
	}
	done := h[c]
	if done.Type != history.Info || done.F != inv.F || !strings.Contains(done.Error, "worker exited") {
		t.Errorf("the dead worker's %s was completed as %s %q, want info \"worker exited\"", inv.F, done.Type, done.Error)
	}
	if err := cl.Resume(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := pool.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// Stop lets the live worker finish: nothing is left open.
	h = rec.History()
	pair := h.Pair()
	for i, o := range h {
		if o.Type == history.Invoke && pair[i] < 0 {
			t.Errorf("op %d (%s of p%d) never completed", i, o.F, o.Process)
		}
	}
}

func TestPoolReportsAWorkerThatCannotStart(t *testing.T) {
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	_, err := StartPool(context.Background(), PoolConfig{
		Command: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}, LogDir: dir,
		Recorder: history.NewRecorder(nil), Clock: history.StartClock(),
		Base: WorkerConfig{Impl: "no-such-lock", Locks: []string{"l"}, Timeout: Duration(time.Second)},
	}, 2)
	if err == nil || !strings.Contains(err.Error(), `unknown impl "no-such-lock"`) {
		t.Fatalf("err %v, want the worker's reason", err)
	}
}

func TestPoolCrashReplacesTheWorkerWithANewProcess(t *testing.T) {
	pool, rec, _, _ := testPool(t, "redis-set-nx-px", 2)
	ctx := context.Background()
	// Crash p1 while it holds the lock: arm it after acquire and kill it
	// there.
	armAndWait(ctx, t, pool, 1, PointAfterAcquire)
	oldPid, _ := pool.Pid(1)
	np, err := pool.Crash(ctx, 1)
	if err != nil {
		t.Fatalf("Crash: %v", err)
	}
	if np != 2 {
		t.Errorf("replacement got process %d, want 2 (the next unused id)", np)
	}
	newPid, err := pool.Pid(np)
	if err != nil || newPid == oldPid {
		t.Fatalf("replacement pid %d (err %v), old pid %d: want a new OS process", newPid, err, oldPid)
	}
	if got := pool.Processes(); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("live processes %v, want [0 2]", got)
	}
	if err := pool.Continue(1); err == nil {
		// The dead worker's stdin is closed; a command to it must fail or be
		// ignored, but its process must not come back.
		if slices.Contains(pool.Processes(), 1) {
			t.Fatal("p1 is alive again")
		}
	}
	waitFor(t, "the replacement to record ops", func() bool { return opsOf(rec, 2) > 2 })
	n1 := opsOf(rec, 1)
	time.Sleep(50 * time.Millisecond)
	if opsOf(rec, 1) != n1 {
		t.Error("the crashed process recorded ops after its crash")
	}
	if err := pool.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestPoolDisarm(t *testing.T) {
	pool, rec, _, _ := testPool(t, "redis-set-nx-px", 1)
	ctx := context.Background()
	// Reached: the worker waits at the point; Disarm lets it go on.
	armAndWait(ctx, t, pool, 0, PointAfterAcquire)
	n := opsOf(rec, 0)
	if err := pool.Disarm(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the disarmed worker to go on", func() bool { return opsOf(rec, 0) > n+4 })
	// Not reached: a point the worker never passes is forgotten, and a
	// later arm works as usual.
	if err := pool.Arm(0, "nowhere"); err != nil {
		t.Fatal(err)
	}
	if err := pool.Disarm(0); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if pt := armAndWait(wctx, t, pool, 0, PointBeforeWrite); pt != PointBeforeWrite {
		t.Fatalf("WaitPoint after disarm: %q", pt)
	}
	// It really waits there: no op while held.
	n = opsOf(rec, 0)
	time.Sleep(50 * time.Millisecond)
	if opsOf(rec, 0) != n {
		t.Error("the worker went on past an armed point without continue")
	}
	if err := pool.Continue(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker to go on after continue", func() bool { return opsOf(rec, 0) > n })
}

// TestPoolRecordsOpsThroughTheRing checks that the workers' ops reach the
// history through their event rings, none through stdout, and that the
// ops a worker published before it was killed are recorded before the
// pool completes its open op.
func TestPoolRecordsOpsThroughTheRing(t *testing.T) {
	pool, rec, cl, clock := testPool(t, "redis-set-nx-px", 2)
	ctx := context.Background()
	waitFor(t, "100 ops", func() bool { return rec.Len() >= 100 })
	// Kill worker 1 while it waits on a frozen node, so it has an op open:
	// one it invoked after the node froze, which cannot have been answered
	// (an op open in the recorder may be one whose answer is still in the
	// worker's ring, on a loaded machine).
	node := freezeNode(ctx, t, cl, clock, rec, 1)
	if err := pool.Kill(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := cl.Resume(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := pool.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	ring, stdout := pool.OpPaths()
	if stdout != 0 || ring < 100 {
		t.Errorf("ops by ring %d, by stdout %d: want at least 100 by ring and none by stdout", ring, stdout)
	}
	h := rec.History()
	if ring+1 != len(h) { // the killed worker's open op, completed by the pool
		t.Errorf("history of %d ops, %d came by ring: want one more, the killed worker's info", len(h), ring)
	}
	var last history.Op
	for _, o := range h {
		if o.Process == 1 {
			last = o
		}
	}
	if last.Type != history.Info || !strings.Contains(last.Error, "worker exited") {
		t.Errorf("the killed worker's last op is %s %q, want info \"worker exited\"", last.Type, last.Error)
	}
}

// TestPoolStartsWorkersInTheirCgroups: a worker starts in its client
// host's cgroup (where its source address is given to it), and a
// replacement starts in its predecessor's.
func TestPoolStartsWorkersInTheirCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroups")
	}
	root, err := clientaddr.Root()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(root, "locktest-pool-test-"+strconv.Itoa(os.Getpid()))
	for i := range 2 {
		if err := os.MkdirAll(filepath.Join(base, "c"+strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		os.Remove(filepath.Join(base, "c0"))
		os.Remove(filepath.Join(base, "c1"))
		os.Remove(base)
	})
	pool, _, _, _ := testPoolWith(t, "redis-set-nx-px", 2, func(c *PoolConfig) {
		c.Cgroup = func(i int) string { return filepath.Join(base, "c"+strconv.Itoa(i)) }
	})
	in := func(process int) string {
		t.Helper()
		w, err := pool.worker(process)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(w.cmd.Process.Pid) + "/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(l, "0::"); ok {
				return p
			}
		}
		t.Fatalf("p%d has no cgroup v2 line in %q", process, b)
		return ""
	}
	rel := "/" + filepath.Base(base)
	for i := range 2 {
		if got, want := in(i), rel+"/c"+strconv.Itoa(i); got != want {
			t.Errorf("p%d runs in cgroup %q, want %q", i, got, want)
		}
	}
	np, err := pool.Crash(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := in(np), rel+"/c1"; got != want {
		t.Errorf("p1's replacement p%d runs in cgroup %q, want %q", np, got, want)
	}
}
