// Package testkit is what the end-to-end tests of locktest share (the
// packages under e2e/, one per provider): run configs whose workers are
// the test binary, a run that must succeed and leave nothing behind, the
// verdicts and anomalies of its results, the faults its history shows, and
// the Docker images a test needs. Its functions fail or skip the test they
// are given; the gates (root, servers, Docker) are package gate's.
package testkit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	clusterbackend "github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/images"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
	"github.com/locktest/locktest/workloads"
)

// Config returns a run config whose workers are this test binary.
// A test keeps the tight retry (--backoff uniform) its expectations were
// set with: the fault tests count on a contender taking the lock within
// milliseconds of a paused holder's lease end, so that fencing refuses the
// woken holder's write (under the exponential default that write can come
// first, with nobody holding, and is a stale write). A benchmark measures
// the default. Its store is a temporary folder that a failed test keeps
// (KeepFailedStore). Under -short it skips the test: a run starts
// servers, embedded etcd members too (gate.Servers).
func Config(tb testing.TB, impl string) run.Config {
	tb.Helper()
	gate.Servers(tb, "a run of "+impl)
	cfg := run.DefaultConfig()
	cfg.Impl, cfg.Seed, cfg.StoreDir = impl, 7, tb.TempDir()
	KeepFailedStore(tb, cfg.StoreDir)
	if _, test := tb.(*testing.T); test {
		cfg.Backoff = workloads.BackoffUniform
	}
	cfg.WorkerCommand, cfg.WorkerEnv = testexe.Worker()
	if os.Getenv(ProviderEnv) == docker.Name {
		NeedDocker(tb, impl)
		cfg.Provider = docker.Name
	}
	return cfg
}

// MustRun runs cfg and returns its outcome and its stored history. It fails
// t when the run returns an error, when the stored history and the results
// disagree on the op count, when the run folder lacks a file every run
// writes or its latest link, when the run had problems, and when a docker
// run left a container or network.
func MustRun(t *testing.T, cfg run.Config) (*run.Outcome, history.History) {
	t.Helper()
	out, h := runChecked(t, cfg)
	noProblems(t, out)
	return out, h
}

// noProblems fails t when the run had problems (run.Errors).
func noProblems(t *testing.T, out *run.Outcome) {
	t.Helper()
	if len(out.Results.Run.Errors) > 0 {
		t.Errorf("run problems: %v", out.Results.Run.Errors)
	}
}

// RunHistory runs cfg and returns its outcome and stored history. It
// fails tb at once when the run returns an error or its history cannot be
// read, and checks nothing else: the verdict, the run's problems and what
// it left behind are the caller's to judge (MustRun judges them).
func RunHistory(tb testing.TB, cfg run.Config) (*run.Outcome, history.History) {
	tb.Helper()
	out, err := run.Run(context.Background(), cfg)
	return withHistory(tb, out, err)
}

// withHistory returns the outcome of a run that returned out and err,
// with its stored history; it fails tb at once on err or on a history
// that cannot be read.
func withHistory(tb testing.TB, out *run.Outcome, err error) (*run.Outcome, history.History) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("run: %v", err)
	}
	h, err := out.History()
	if err != nil {
		tb.Fatalf("stored history: %v", err)
	}
	return out, h
}

// runChecked is MustRun but for the run's problems, which it leaves to
// its caller.
func runChecked(t *testing.T, cfg run.Config) (*run.Outcome, history.History) {
	t.Helper()
	out, h := RunHistory(t, cfg)
	return checked(t, cfg, out, h)
}

// ReadyRun runs cfg as MustRun does, but a run whose cluster did not come
// up, a node not ready before its start deadline (run.SetupError: the
// containers of a machine under load can be starved for that long), is
// logged and started again, three starts at most: it recorded nothing and
// tested nothing. Any other error, and a third start that fails so, fail
// t at once.
func ReadyRun(t *testing.T, cfg run.Config) (*run.Outcome, history.History) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		out, err := run.Run(context.Background(), cfg)
		var setup *run.SetupError
		if err != nil && errors.As(err, &setup) && strings.Contains(err.Error(), " not ready") && attempt < 3 {
			t.Logf("start %d: %v; starting it again", attempt, err)
			continue
		}
		out, h := withHistory(t, out, err)
		out, h = checked(t, cfg, out, h)
		noProblems(t, out)
		return out, h
	}
}

// checked checks what every run must leave (the history its results
// count, its files, its latest link, nothing running) and returns out and
// h as they are.
func checked(t *testing.T, cfg run.Config, out *run.Outcome, h history.History) (*run.Outcome, history.History) {
	t.Helper()
	if len(h) != int(out.Results.Stats["ops"]) {
		t.Fatalf("stored history has %d ops, results say %v", len(h), out.Results.Stats["ops"])
	}
	for _, f := range []string{runstore.ResultsFile, runstore.ReportFile, runstore.ResourceFile, runstore.ScheduleFile, "logs/n1.log", "logs/p0.log", "logs/driver.log"} {
		if _, err := os.Stat(filepath.Join(out.Dir, f)); err != nil {
			t.Errorf("run dir lacks %s: %v", f, err)
		}
	}
	if target, err := os.Readlink(filepath.Join(cfg.StoreDir, out.Results.Run.Name, "latest")); err != nil || target != filepath.Base(out.Dir) {
		t.Errorf("latest link: %q %v", target, err)
	}
	AssertNothingLeft(t, out)
	return out, h
}

// SteadyRun runs cfg as MustRun does, until met holds of its results or
// a run misses it on a machine that ran steadily. A run that misses it
// while the machine stalled for tolerance or longer (runstore.Stalls: every
// process of the run stopped, as in a GC pause that no fault planned) is
// logged and run again, three runs at most: the premise of an expectation
// such as "a fault-free run with 5 s leases is valid" did not hold, so the
// run is no evidence either way. A run that misses it with no such stall
// is returned at once, for the test to fail on.
//
// A run with problems (run.Errors: a host lost, a heal that failed) misses
// its expectation too, and is run again on the same terms; the last run's
// problems fail t.
func SteadyRun(t *testing.T, cfg run.Config, tolerance time.Duration, met func(runstore.Results) bool) (*run.Outcome, history.History) {
	t.Helper()
	out, h := AgainOnStall(t, func() (*run.Outcome, history.History) { return runChecked(t, cfg) }, tolerance, func(r runstore.Results) bool {
		return len(r.Run.Errors) == 0 && met(r)
	})
	if len(out.Results.Run.Errors) > 0 {
		t.Errorf("run problems: %v", out.Results.Run.Errors)
	}
	return out, h
}

// AgainOnStall is SteadyRun's rule for a run made by once (a package's
// own run helper): once again while its results miss met and the machine
// stalled for tolerance or longer during it, three runs at most.
func AgainOnStall(t *testing.T, once func() (*run.Outcome, history.History), tolerance time.Duration, met func(runstore.Results) bool) (*run.Outcome, history.History) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		out, h := once()
		r := out.Results
		if met(r) || attempt == 3 || Stalled(r) < tolerance {
			return out, h
		}
		t.Logf("run %d missed its expectation (verdict %s, anomalies %v, problems %v) while the machine stalled: %s; running it again",
			attempt, r.Valid, Kinds(r), r.Problems, reports.StallsText(r.Run))
	}
}

// Stalled is the longest stall of the machine that the run measured, 0
// when none: of the driver's timer (every process waited for a CPU), of
// the disk probe (every service that syncs before it answers waited for
// the disk) or of the ssh provider's hosts (a keepalive answered late),
// whichever was longest (runstore.Stalls).
func Stalled(r runstore.Results) time.Duration {
	return max(r.Run.LongestStall(), r.Run.LongestDiskStall(), r.Run.LongestHostStall())
}

// IsValid is SteadyRun's expectation of a valid verdict.
func IsValid(r runstore.Results) bool { return r.Valid == checker.Valid }

// ValidWithWrites fails t unless r is valid with at least n critical
// sections and n writes the resource accepted.
func ValidWithWrites(t *testing.T, r runstore.Results, n float64) {
	t.Helper()
	if r.Valid != checker.Valid {
		t.Errorf("verdict %s, want valid; anomalies %v", r.Valid, Kinds(r))
	}
	if cs := r.Stats["critical_sections"]; cs < n {
		t.Errorf("%v critical sections, want at least %v", cs, n)
	}
	if acc := Result(t, r, "resource").Stats["writes_accepted"]; acc < n {
		t.Errorf("%v accepted writes, want at least %v", acc, n)
	}
}

// StartLocal starts backend's cluster of local processes with opts
// (Dir defaults to a temporary folder) and stops it when the test ends.
func StartLocal(t *testing.T, backend string, opts local.Options) clusters.Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	cl, err := local.New(backend, opts)
	return testcluster.Started(t, cl, err)
}

// Result returns the result of the checker called name in r, failing t
// when r has none.
func Result(t *testing.T, r runstore.Results, name string) checker.Result {
	t.Helper()
	for _, c := range r.Checkers {
		if c.Checker == name {
			return c
		}
	}
	t.Fatalf("no %s checker in results", name)
	return checker.Result{}
}

// FirstAnomalies returns the explanations of r's first three anomalies,
// for a failure message that says what happened, not only its kind.
func FirstAnomalies(r runstore.Results) []string {
	var out []string
	for _, c := range r.Checkers {
		for _, a := range c.Anomalies {
			if len(out) < 3 {
				out = append(out, c.Checker+": "+a.Explanation)
			}
		}
	}
	return out
}

// Kinds counts r's anomalies by kind, over every checker.
func Kinds(r runstore.Results) map[string]int {
	k := map[string]int{}
	for _, c := range r.Checkers {
		for _, a := range c.Anomalies {
			k[a.Kind]++
		}
	}
	return k
}

// LivenessOnly says whether r is invalid for liveness anomalies alone
// (a stuck lock): no other checker found any. A test about something
// else, on a machine that stalls its servers, takes such a run as a
// liveness figure; any safety anomaly still fails it.
func LivenessOnly(r runstore.Results) bool {
	n := 0
	for _, c := range r.Checkers {
		if c.Checker != "liveness" {
			n += len(c.Anomalies)
		}
	}
	return n == 0 && r.Valid == checker.Invalid
}

// PauseConfig is the GC pause of the debate: a client frozen right after its
// acquire for twice the TTL, while others contend for the lock.
func PauseConfig(t *testing.T, impl string, mode workloads.Mode) run.Config {
	cfg := Config(t, impl)
	cfg.Faults = []string{"pause-client"}
	cfg.Mode = mode
	cfg.TTL = 300 * time.Millisecond
	cfg.Work = 5 * time.Millisecond
	cfg.Interval = 500 * time.Millisecond
	cfg.Duration = 8 * time.Second
	// Four leases long: time enough, on a loaded machine, for another
	// client to take the lock before the paused one wakes.
	nemesis.Pause.Set(&cfg.FaultSettings, 4*cfg.TTL)
	return cfg
}

// Reproduce runs cfg with up to three seeds until shown(outcome, history)
// holds, and returns the last run. A violation that needs the scheduler to
// interleave processes one way (another client acquiring while one is
// paused) is then asserted to be reproducible, not to happen on every seed;
// a broken fault or checker still fails all three.
func Reproduce(t *testing.T, cfg run.Config, shown func(*run.Outcome, history.History) bool) (*run.Outcome, history.History) {
	t.Helper()
	var out *run.Outcome
	var h history.History
	base := cfg.Seed
	for attempt := int64(0); attempt < 3; attempt++ {
		cfg.Seed = base + attempt
		out, h = MustRun(t, cfg)
		if shown(out, h) {
			break
		}
		t.Logf("seed %d did not show it (anomalies %v); trying another", cfg.Seed, Kinds(out.Results))
	}
	return out, h
}

// NemesisOps counts the nemesis ops of h of fault (or heal) f and type typ.
func NemesisOps(h history.History, f string, typ history.Type) int {
	n := 0
	for _, o := range h {
		if o.IsNemesis() && o.F == f && o.Type == typ {
			n++
		}
	}
	return n
}

// ProviderEnv makes every test that takes its config from Config use that
// provider: LOCKTEST_PROVIDER=docker runs the tests of e2e/redis and e2e/quorum against
// containers (the images are built first). Unset, those tests use the
// local provider, and only e2e/docker's use docker.
const ProviderEnv = "LOCKTEST_PROVIDER"

// NeedDocker skips the test when no Docker engine answers, and otherwise
// builds (once per test binary, reusing what an earlier run built)
// locktest's image of the backend of impl, so that a machine whose engine
// has no image and no registry can run the tests. A build that fails (the
// host lacks the server the image is made of: the build's error says
// which) skips the test.
func NeedDocker(tb testing.TB, impl string) {
	tb.Helper()
	e := dockertest.Open(tb)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	im, err := impls.Lookup(impl)
	if err != nil {
		tb.Fatal(err)
	}
	imagesMu.Lock()
	defer imagesMu.Unlock()
	berr, done := imagesFor[im.Backend]
	if !done {
		t0 := time.Now()
		var bs []images.BuiltImage
		bs, berr = images.Build(ctx, e, images.BuildOptions{Backends: []string{im.Backend}})
		if berr == nil {
			tb.Logf("image %s: reused %v, %d MB, %v", bs[0].Ref, bs[0].Reused, bs[0].Size>>20, time.Since(t0).Round(time.Millisecond))
		}
		imagesFor[im.Backend] = berr
	}
	if berr != nil {
		tb.Skipf("docker provider tests: no %s image: %v", im.Backend, berr)
	}
}

// LocalOnly skips a test of the local provider's own mechanisms when
// LOCKTEST_PROVIDER runs the tests under docker, saying why.
func LocalOnly(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(ProviderEnv) == docker.Name {
		t.Skip("local provider only: " + why)
	}
}

// DockerConfig is Config under the docker provider.
func DockerConfig(t *testing.T, impl string) run.Config {
	t.Helper()
	NeedDocker(t, impl)
	cfg := Config(t, impl)
	cfg.Provider = docker.Name
	return cfg
}

// AssertNothingLeft checks that a docker run left no container and no
// network: everything labelled with its run id is gone.
func AssertNothingLeft(t *testing.T, out *run.Outcome) {
	t.Helper()
	if !strings.HasPrefix(out.Results.Run.Network, "docker") {
		return
	}
	e, err := engine.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	all, err := e.Find(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Results.Run.Lab == "" {
		t.Fatal("the docker run recorded no run id")
	}
	for _, l := range engine.OfRun(all, out.Results.Run.Lab) {
		// A network the engine will not let go of (an endpoint of a
		// container that is gone, its fault under load) is logged; any
		// other leftover fails the test.
		if l.Kind == "network" {
			if err := e.RemoveNetwork(context.Background(), l.ID); engine.OnlyStaleEndpoints(err) {
				t.Logf("the engine kept the run's network: %v", err)
				continue
			}
		}
		t.Errorf("the run left %+v", l)
	}
}

// NemesisSeq lists the successful nemesis ops of h as "f targets".
func NemesisSeq(h history.History) []string {
	var out []string
	for _, o := range h {
		if o.IsNemesis() && o.Type == history.OK {
			out = append(out, o.F+" "+strings.Join(o.Value.Targets, ";"))
		}
	}
	return out
}

// AssertLabGone checks that the run's network lab left nothing behind.
func AssertLabGone(t *testing.T, id string) {
	t.Helper()
	if id == "" {
		t.Fatal("the run recorded no network lab")
	}
	f, err := netns.Find(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if left := f.Of(id); !left.Empty() {
		t.Errorf("the run left %+v", left)
	}
}

// TimedOut reports whether an op's error is a timeout, as the go-redis
// client or the context reports it.
func TimedOut(err string) bool {
	return strings.Contains(err, "timeout") || strings.Contains(err, "deadline")
}

// IsolatedAcquires counts the isolates of h that went in, those healed
// after, and the acquires that were invoked after an isolate went in and
// granted before its heal began. Such an acquire must have been granted
// without the isolated node (Redlock's acquire lists the nodes that granted
// it): it reports an error for any that was not. It places the ops by
// their times, not by where the file has them: a worker stamps its ops and
// sends them, so under load an acquire stamped before an isolate's ok can
// be recorded after it (seen under stress-ng, where an isolate took 2.9 s
// to go in and an acquire granted by its node before then was recorded
// after its ok).
func IsolatedAcquires(t *testing.T, h history.History) (isolates, healed, during int) {
	t.Helper()
	type cut struct {
		node     string
		from, to int64 // the isolate's ok, its heal's invocation
	}
	var cuts []cut
	var invoked int64 // when the latest isolate was invoked
	unhealed := false // an isolate went in and no heal ended since
	for _, o := range h {
		switch {
		case o.IsNemesis() && o.F == "partition-isolate" && o.Type == history.Invoke:
			invoked = o.Time
		case o.IsNemesis() && o.F == "partition-isolate" && o.Type == history.OK:
			t.Logf("isolate %v went in in %v, at %v", o.Value.Targets, time.Duration(o.Time-invoked).Round(time.Millisecond),
				time.Duration(o.Time).Round(time.Millisecond))
			node, _, _ := strings.Cut(strings.Join(o.Value.Targets, ""), "|")
			cuts = append(cuts, cut{node, o.Time, math.MaxInt64})
			unhealed = true
		case o.IsNemesis() && o.F == "heal-network" && o.Type == history.Invoke && len(cuts) > 0 && cuts[len(cuts)-1].to == math.MaxInt64:
			cuts[len(cuts)-1].to = o.Time
		case o.IsNemesis() && o.F == "heal-network" && o.Type == history.OK && unhealed:
			healed++
			unhealed = false
		}
	}
	// cutAt is the cut in place at t, or nil.
	cutAt := func(t int64) *cut {
		for i := range cuts {
			if t >= cuts[i].from && t < cuts[i].to {
				return &cuts[i]
			}
		}
		return nil
	}
	invokedIn := map[int]*cut{} // process → the cut its pending acquire was invoked in
	wrong := 0                  // acquires granted by the node cut
	for _, o := range h {
		switch {
		case o.F == history.Acquire && o.Type == history.Invoke:
			invokedIn[o.Process] = cutAt(o.Time)
		case o.F == history.Acquire && o.Type == history.OK && invokedIn[o.Process] != nil && cutAt(o.Time) == invokedIn[o.Process]:
			during++
			if c := invokedIn[o.Process]; slices.Contains(strings.Split(o.Value.Node, ","), c.node) {
				if wrong++; wrong == 1 {
					t.Errorf("acquire %v was granted by %s, which was cut from every host", o, c.node)
				}
			}
		}
	}
	if wrong > 1 {
		t.Errorf("%d acquires in all were granted by an isolated node", wrong)
	}
	return len(cuts), healed, during
}

// RunResult is what run.Run returned.
type RunResult struct {
	Out *run.Outcome
	Err error
}

// StartRun runs cfg in the background; the channel gets what run.Run
// returned.
func StartRun(cfg run.Config) <-chan RunResult {
	done := make(chan RunResult, 1)
	go func() {
		out, err := run.Run(context.Background(), cfg)
		done <- RunResult{out, err}
	}()
	return done
}

var (
	imagesMu  sync.Mutex
	imagesFor = map[string]error{} // backend → its build's outcome
)

// NeedImplBackend skips the test when the server of impl's backend is not
// installed.
func NeedImplBackend(tb testing.TB, impl string) impls.Impl {
	tb.Helper()
	gate.Servers(tb, "the backend of "+impl)
	i, err := impls.Lookup(impl)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := local.New(i.Backend, local.Options{Dir: tb.TempDir()}); err != nil {
		tb.Skipf("%v (make setup)", err)
	}
	return i
}

// EtcdConfig is Config whose etcd members are this test binary too.
func EtcdConfig(t *testing.T, impl string) run.Config {
	cfg := Config(t, impl)
	cfg.NodeCommand, cfg.NodeEnv = testexe.Node()
	return cfg
}

// NeedZooKeeper skips the test when java or the ZooKeeper jars are missing.
func NeedZooKeeper(t *testing.T) {
	t.Helper()
	gate.Servers(t, "ZooKeeper")
	if _, err := local.New(clusterbackend.ZooKeeper, local.Options{Dir: t.TempDir()}); err != nil {
		t.Skipf("%v", err)
	}
}

// KeptStores is the folder, under the system's temporary folder, where a
// failed test's run store is kept (KeepFailedStore).
const KeptStores = "locktest-failed-tests"

// KeepFailedStore makes a test that fails keep the runs it stored in
// store, a temporary folder the test removes otherwise: they are moved to
// $TMPDIR/locktest-failed-tests/<test>-<time>, and the test's log says
// where, so that a failure seen once (on a loaded CI machine) can be read
// afterwards with `locktest check` and its report.
func KeepFailedStore(tb testing.TB, store string) {
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		name := strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name())
		dst := filepath.Join(os.TempDir(), KeptStores, name+"-"+time.Now().Format("20060102T150405"))
		// A test with several stores keeps each beside the others.
		base := dst
		for i := 2; exists(dst); i++ {
			dst = fmt.Sprintf("%s-%d", base, i)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.Rename(store, dst)
			if err == nil {
				err = os.Mkdir(store, 0o700) // for the test's own removal
			}
			if err == nil {
				tb.Logf("the runs of this failed test are kept in %s", dst)
				return
			}
		}
		tb.Logf("the runs of this failed test could not be kept")
	})
}

// exists reports whether path names a file or folder.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// AssertPausedHolderIsTold runs cfg, a run of an impl that sends lost
// notices, with a holder paused right after its acquire for 2.5 leases of
// 1 s, while another client takes the lock, and a critical section of
// 1.5 s, so that the news reaches the woken holder before its write. It
// runs twice. With --on-lost ignore, a paused holder is told after its
// pause (a lost notice whose reason contains reason) and writes all the
// same: the resource checker notes wrote-after-notice. With --on-lost
// stop-writing, it is told and writes nothing after the notice. It
// returns the two outcomes and histories, ignore first.
func AssertPausedHolderIsTold(t *testing.T, cfg run.Config, reason string) (outs [2]*run.Outcome, hs [2]history.History) {
	t.Helper()
	cfg.Faults, cfg.Mode, cfg.Clients, cfg.TTL = []string{"pause-client"}, workloads.ModeNone, 2, time.Second
	cfg.FaultSettings = cfg.FaultSettings.With(nemesis.PausePoint.Is(workloads.PointAfterAcquire), nemesis.Pause.Is(2500*time.Millisecond))
	cfg.WorkMin, cfg.Work, cfg.Think = 1500*time.Millisecond, 1500*time.Millisecond, 0
	cfg.Interval, cfg.Duration, cfg.Quiet = time.Second, 9*time.Second, time.Second
	for i, mode := range []string{workloads.OnLostIgnore, workloads.OnLostStopWriting} {
		cfg.OnLost = mode
		cfg.Name = cfg.Impl + "-told-" + mode
		out, h := MustRun(t, cfg)
		outs[i], hs[i] = out, h
		if n := NemesisOps(h, "pause-client", history.OK); n < 1 {
			t.Fatalf("--on-lost %s: %d client pauses applied", mode, n)
		}
		told := ToldAfterPause(h, reason)
		res := Result(t, out.Results, "resource")
		notes := 0
		for _, n := range res.Notes {
			if n.Kind == checker.KindWroteAfterNotice {
				notes++
			}
		}
		t.Logf("%s --on-lost %s: %d paused holders told (%s); resource stats notices %v, writes_after_notice %v, notice latency p50 %v s max %v s; verdict %s %v",
			cfg.Impl, mode, told, reason, res.Stats["notices"], res.Stats["writes_after_notice"],
			res.Stats["notice_latency_p50_s"], res.Stats["notice_latency_max_s"], out.Results.Valid, Kinds(out.Results))
		if told == 0 {
			t.Errorf("--on-lost %s: no paused holder was told that its lease was lost (want a lost notice naming %q after its pause)", mode, reason)
		}
		switch mode {
		case workloads.OnLostIgnore:
			if notes == 0 || res.Stats["writes_after_notice"] == 0 {
				t.Errorf("--on-lost ignore: no holder wrote after being told (notes %d, stats %v)", notes, res.Stats)
			}
		case workloads.OnLostStopWriting:
			if notes != 0 || res.Stats["writes_after_notice"] != 0 {
				t.Errorf("--on-lost stop-writing: %d holds wrote after being told (stats %v)", notes, res.Stats)
			}
		}
	}
	return outs, hs
}

// ToldAfterPause counts the client pauses of h that were followed by a
// lost notice of the paused process, whose reason contains reason, before
// that process's next pause.
func ToldAfterPause(h history.History, reason string) int {
	told := 0
	for i, o := range h {
		p, ok := pausedProcess(o)
		if !ok {
			continue
		}
		for _, n := range h[i+1:] {
			if q, again := pausedProcess(n); again && q == p {
				break
			}
			if n.Process == p && n.Type == history.Notice && n.F == history.Lost && strings.Contains(n.Error, reason) {
				told++
				break
			}
		}
	}
	return told
}

// pausedProcess returns the process a pause-client injection (its ok)
// paused.
func pausedProcess(o history.Op) (int, bool) {
	if !o.IsNemesis() || o.F != "pause-client" || o.Type != history.OK || len(o.Value.Targets) == 0 {
		return 0, false
	}
	var p int
	_, err := fmt.Sscanf(o.Value.Targets[0], "p%d", &p)
	return p, err == nil
}

// DescribePauses says, for a failed test's message, when each client pause
// of h went in (harness clock), whom it froze and how long it lasted until
// its resume, and what each paused process's next release returned after
// it: "p0 at 2.217s for 2.001s, then release fail: …". A pause that a
// timed window cut short, or a release that timed out, shows there.
func DescribePauses(h history.History) string {
	var out []string
	for i, o := range h {
		p, ok := pausedProcess(o)
		if !ok {
			continue
		}
		s := fmt.Sprintf("p%d at %v", p, time.Duration(o.Time).Round(time.Millisecond))
		resumed, released := false, false
		for _, n := range h[i+1:] {
			if !resumed && n.IsNemesis() && n.F == "resume-client" && n.Type == history.OK && slices.Contains(n.Value.Targets, fmt.Sprintf("p%d", p)) {
				s += fmt.Sprintf(" for %v", time.Duration(n.Time-o.Time).Round(time.Millisecond))
				resumed = true
			}
			if n.Process == p && n.F == history.Release && n.Type != history.Invoke {
				s += fmt.Sprintf(", then release %s at %v", n.Type, time.Duration(n.Time).Round(time.Millisecond))
				if n.Error != "" {
					s += ": " + n.Error
				}
				released = true
				break
			}
		}
		if !resumed {
			s += " (no resume recorded)"
		}
		if !released {
			s += ", no release after it"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "no client pause applied"
	}
	return strings.Join(out, "; ")
}
