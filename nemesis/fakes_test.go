package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

// The fakes every test of the package shares: a cluster, a worker pool, a
// network, clocks and a delayer that record what the faults ask of them,
// and a fault for the schedule's tests.

// callLog is the calls a fake was asked to make, in order, kept safely
// from several goroutines. Its lock also guards the errors a test changes
// between calls.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

// log returns the calls so far.
func (l *callLog) log() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// locked runs f under the log's lock: a test changes a fake's errors so.
func (l *callLog) locked(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// fakeCluster is a cluster that can neither kill nor pause, and whose
// nodes' roles are the ones they started with.
type fakeCluster struct{ nodes []clusters.Node }

var _ clusters.Cluster = (*fakeCluster)(nil)

func (c *fakeCluster) Nodes() []clusters.Node      { return c.nodes }
func (c *fakeCluster) Start(context.Context) error { return nil }
func (c *fakeCluster) Stop(context.Context) error  { return nil }

// liveCluster is a cluster with every ability of a real one: it records
// kills and restarts (failing them with killErr and restartErr), pauses
// and resumes, and tells each node's role now from roles, which a test
// changes as a leader moves; a node missing from roles does not answer.
type liveCluster struct {
	fakeCluster
	callLog
	killErr, restartErr error
	roles               map[string]string
}

var (
	_ clusters.Killer     = (*liveCluster)(nil)
	_ clusters.Pauser     = (*liveCluster)(nil)
	_ clusters.RoleReader = (*liveCluster)(nil)
)

func newLiveCluster(names ...string) *liveCluster {
	return &liveCluster{fakeCluster: fakeCluster{nodes: nodes(names...)}}
}

func (c *liveCluster) Kill(_ context.Context, n clusters.Node) error {
	c.add("kill %s", n.Name)
	return c.killErr
}

func (c *liveCluster) Restart(_ context.Context, n clusters.Node) error {
	c.add("restart %s", n.Name)
	return c.restartErr
}

func (c *liveCluster) Pause(context.Context, clusters.Node) error  { return nil }
func (c *liveCluster) Resume(context.Context, clusters.Node) error { return nil }

// setRoles gives the nodes their roles from now on.
func (c *liveCluster) setRoles(roles map[string]string) { c.locked(func() { c.roles = roles }) }

func (c *liveCluster) Role(_ context.Context, n clusters.Node) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.roles[n.Name]
	if !ok {
		return "", errors.New("not answering")
	}
	return r, nil
}

func (c *liveCluster) Roles(clusters.Node) []string { return []string{"leader", "follower"} }

// targetCluster is a Sentinel-like cluster whose node faults hit its data
// nodes only.
type targetCluster struct{ fakeCluster }

func (c *targetCluster) Targets() []clusters.Node {
	var out []clusters.Node
	for _, n := range c.nodes {
		if n.Role != "sentinel" {
			out = append(out, n)
		}
	}
	return out
}

// nodes returns nodes of the given names.
func nodes(names ...string) []clusters.Node {
	var out []clusters.Node
	for _, n := range names {
		out = append(out, clusters.Node{Name: n, Addr: "127.0.0.1:0"})
	}
	return out
}

// names returns n names with prefix: "n1", "n2", ...
func names(prefix string, n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// reach says whether hosts x and y can talk under cuts.
func reach(cuts []Cut, x, y string) bool {
	for _, c := range cuts {
		if (slices.Contains(c.A, x) && slices.Contains(c.B, y)) || (slices.Contains(c.A, y) && slices.Contains(c.B, x)) {
			return false
		}
	}
	return true
}

// fakeClients is a worker pool that records the calls the nemesis makes,
// and fails them with the errors set.
type fakeClients struct {
	callLog
	procs     []int
	armErr    error
	waitErr   error
	signalErr map[syscall.Signal]error
	// starving workers never reach a pause point: their WaitPoint lasts
	// until its context ends.
	starving map[int]bool
}

var _ Clients = (*fakeClients)(nil)

// sigNames names the signals the nemesis sends, in the calls recorded.
var sigNames = map[syscall.Signal]string{syscall.SIGSTOP: "SIGSTOP", syscall.SIGCONT: "SIGCONT"}

func (c *fakeClients) Processes() []int { return c.procs }

func (c *fakeClients) Arm(p int, point string) error {
	c.add("arm p%d %s", p, point)
	return c.armErr
}

func (c *fakeClients) WaitPoint(ctx context.Context, p int) (string, error) {
	c.add("wait p%d", p)
	if c.starving[p] {
		<-ctx.Done()
		return "", ctx.Err()
	}
	if c.waitErr != nil {
		return "", c.waitErr
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return "after-acquire", nil
}

func (c *fakeClients) Disarm(p int) error {
	c.add("disarm p%d", p)
	return nil
}

func (c *fakeClients) Continue(p int) error {
	c.add("continue p%d", p)
	return nil
}

func (c *fakeClients) Signal(p int, sig syscall.Signal) error {
	c.add("%s p%d", sigNames[sig], p)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signalErr[sig]
}

// fakeNet records the cuts, losses and heals the faults ask for.
type fakeNet struct{ callLog }

func (n *fakeNet) Cut(_ context.Context, a, b []string) error {
	n.add("cut %s|%s", strings.Join(a, ","), strings.Join(b, ","))
	return nil
}

func (n *fakeNet) CutOneWay(_ context.Context, from, to []string) error {
	n.add("cut %s>%s", strings.Join(from, ","), strings.Join(to, ","))
	return nil
}

func (n *fakeNet) Loss(_ context.Context, hosts []string, p float64) error {
	n.add("loss %s %g", strings.Join(hosts, ","), p)
	return nil
}

func (n *fakeNet) Heal(context.Context) error { n.add("heal"); return nil }

// sharedNet is a network whose clients all come from one address, as the
// docker provider's do.
type sharedNet struct{ fakeNet }

func (*sharedNet) SharedClientAddress() string { return "every client is behind one address" }

// fakeClocks keeps the nodes' clock offsets.
type fakeClocks struct {
	mu  sync.Mutex
	off map[string]time.Duration
}

func (c *fakeClocks) Set(n string, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off == nil {
		c.off = map[string]time.Duration{}
	}
	c.off[n] = d
	return nil
}

func (c *fakeClocks) Offset(n string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off[n]
}

// fakeDelayer records the nodes it delays.
type fakeDelayer struct{ nodes []string }

func (d *fakeDelayer) Delay(_ context.Context, nodes []string, _ time.Duration) error {
	d.nodes = nodes
	return nil
}

func (d *fakeDelayer) Mechanism() string { return "test" }

// fakeFault is a Fault that touches nothing: it counts its injections and
// heals, returns the errors it is given, and picks a target from the
// schedule's rng, as real faults do, so that the target sequence depends on
// the seed too.
type fakeFault struct {
	name     string
	duration time.Duration
	// injectErr and healErr are returned by every Inject and Heal.
	injectErr error
	healErr   error
	// onInject and onHeal, if set, run inside Inject and Heal.
	onInject func()
	onHeal   func()

	mu      sync.Mutex
	injects int
	heals   int
	// healCtxErrs holds ctx.Err() of each Heal call.
	healCtxErrs []error
}

var _ Fault = (*fakeFault)(nil)

func (f *fakeFault) Name() string            { return f.name }
func (f *fakeFault) HealName() string        { return "heal-" + f.name }
func (f *fakeFault) Duration() time.Duration { return f.duration }

func (f *fakeFault) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	target := fmt.Sprintf("t%d", rng.IntN(1000))
	f.mu.Lock()
	f.injects++
	f.mu.Unlock()
	if f.onInject != nil {
		f.onInject()
	}
	return history.Value{Targets: []string{target}, Duration: int64(f.duration)}, f.injectErr
}

func (f *fakeFault) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	f.heals++
	f.healCtxErrs = append(f.healCtxErrs, ctx.Err())
	f.mu.Unlock()
	if f.onHeal != nil {
		f.onHeal()
	}
	return history.Value{Targets: []string{"healed"}}, f.healErr
}

func (f *fakeFault) counts() (injects, heals int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injects, f.heals
}

// seeded returns a source of the given seed, as the schedule's is.
func seeded(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

// testRng returns the source of the tests for which any seed does.
func testRng() *rand.Rand { return seeded(1, 2) }

// buildOne builds the fault called name for env, failing the test on an
// error.
// wantKind fails t unless f is the fault name, healed by heal, that lasts
// down (0: any duration).
func wantKind(t *testing.T, f Fault, name, heal string, down time.Duration) {
	t.Helper()
	if f.Name() != name || f.HealName() != heal || down != 0 && f.Duration() != down {
		t.Errorf("fault is %s/%s for %v, want %s/%s for %v", f.Name(), f.HealName(), f.Duration(), name, heal, down)
	}
}

// injectOnce injects f once and fails t unless it went in, with exactly
// targets and with f's duration in its value.
func injectOnce(t *testing.T, f Fault, targets ...string) {
	t.Helper()
	v, err := f.Inject(context.Background(), testRng())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Targets, targets) || v.Duration != int64(f.Duration()) {
		t.Errorf("Inject value %+v, want targets %q and duration %v", v, targets, f.Duration())
	}
}

func buildOne(t *testing.T, name string, env Env) Fault {
	t.Helper()
	fs, err := Build([]string{name}, env)
	if err != nil {
		t.Fatalf("Build(%s): %v", name, err)
	}
	return fs[0]
}

func newSchedule(interval time.Duration, seed int64, faults ...Fault) *Schedule {
	return &Schedule{
		Faults:   faults,
		Interval: interval,
		Seed:     seed,
		Recorder: history.NewRecorder(nil),
		Clock:    history.StartClock(),
	}
}
