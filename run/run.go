// Package run is the driver: it wires a cluster, the resource store, the
// worker pool, the nemesis, the recorder and the checkers into one stored
// run, and tears all of it down again, also when its context is cancelled.
package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/external"
	"github.com/locktest/locktest/internal/tick"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/workloads"
)

// Config is one run's settings; start from DefaultConfig.
type Config struct {
	// Name names the run's folder in the store; "" means impl[-faults]-mode.
	Name string
	// Impl names the Go impl under test; with Client it is the client's
	// name, which the run learns from the client program.
	Impl string
	// Client, when set, is an external lock client that takes the place
	// of a Go impl: the name of a manifest in ClientsDir, a manifest's
	// path, or a command line whose program speaks the client protocol
	// (docs/clients.md).
	Client string
	// Backend is the lock service an external client runs against, any
	// backend (clusters/backend) on its default number of nodes; a
	// manifest may give it.
	Backend string
	// ClientParams are passed to the client program in its hello.
	ClientParams map[string]string
	// Libs pins Go modules of the impl at other versions (--lib,
	// module@version, each one of the impl's Libraries): Run builds an
	// adapter of the impl with them (impls/golib), which serves it
	// through the client protocol, and runs it as an external client.
	Libs []string
	// adapter is the program of that adapter, once Run built it.
	adapter string
	// clientCaps are the capabilities the client program reported, once
	// Run probed it.
	clientCaps *external.Caps
	// rateClock and skewClock say why the workers' clocks cannot run at
	// a rate, and why their wall clock cannot be moved as the impl reads
	// it ("" where they can): what clockWorker made of the run's faults.
	rateClock, skewClock string
	Faults               []string
	Clients              int
	Locks                int
	TTL                  time.Duration
	// Duration is how long the workload runs.
	Duration time.Duration
	Seed     int64
	Mode     workloads.Mode
	// StoreDir is the root of stored runs.
	StoreDir string
	Think    time.Duration
	// Retry, RetryMax and Backoff are the wait after a failed acquire
	// (workloads.Backoff).
	Retry    time.Duration
	RetryMax time.Duration
	Backoff  string
	Work     time.Duration
	// WorkMin is the shortest time between the read and the write; the
	// work time is uniform in [WorkMin, Work].
	WorkMin time.Duration
	// OnLost is what a holder does when its client tells it that its
	// lease is lost: workloads.OnLostIgnore or workloads.OnLostStopWriting.
	OnLost string
	// RetryRelease, when positive, is how often a worker tries again a
	// release of unknown outcome, with the same lease, after its later
	// acquires (workloads.WorkerConfig.RetryRelease); 0 never.
	RetryRelease time.Duration
	// RetryAcquire is how many times a worker tries again at once an
	// acquire of unknown outcome (workloads.WorkerConfig.RetryAcquire).
	RetryAcquire int
	// Timeout bounds every single lock or store operation of a worker.
	Timeout time.Duration
	// Interval is the mean quiet time between faults.
	Interval time.Duration
	// FaultSettings are the values of the settings the faults read, each
	// declared beside its fault (nemesis.Setting): nemesis.Pause.Of(
	// c.FaultSettings) reads one, nemesis.Pause.Set(&c.FaultSettings, d)
	// sets it. A pause or a clock bump of 0 means 2·TTL (Prepared).
	FaultSettings nemesis.Values
	// Quiet is how long the workload runs on after the last heal, before
	// the run ends: the time the system has to recover.
	Quiet time.Duration
	// Net is NetAuto, NetNamespaces or NetLoopback.
	Net string
	// Subnet is the /24 of the network namespaces; "" picks a free one.
	Subnet string
	// Targets pins what faults hit: for a fault name, the nodes (by name or
	// role) or processes ("p0") it chooses among (nemesis.Env.Targets).
	Targets map[string][]string
	// Stagger is the wait between the parts of a combined fault
	// ("partition+kill-node").
	Stagger time.Duration
	// Persistence is the durability of nodes that have a setting for it
	// (Redis: off, everysec, always); "" is the backend's default.
	Persistence string
	// ImplParams are passed to every worker's impl (impls.Config.Params).
	ImplParams map[string]string
	// ClusterParams are the backend's params (--cluster-opt), which the
	// provider passes to the backend's layout (backend.NewLayout).
	ClusterParams map[string]string
	// Expect is "valid" or "invalid".
	Expect string
	// ProfileDir, when set, receives CPU profiles of the driver
	// (driver.cpu.pprof) and of each worker (worker-pN.cpu.pprof), and the
	// driver's heap at the end of the workload (driver.heap.pprof).
	ProfileDir string
	// Schedule is a schedule file (a stored run's schedule.json, or one
	// written by hand) whose faults the run injects exactly, at their
	// offsets, in place of a seeded schedule; Plan is that schedule, read
	// by Run from Schedule when it is nil. The run's Faults are then the
	// plan's, and --faults, --target and the fault settings must not be
	// given: every planned fault carries its own.
	Schedule string
	Plan     *nemesis.Plan
	// StopOnViolation ends the workload a grace (1 s and the TTL) after
	// the first violation that the checks run on the ops as they are
	// recorded confirm (checker.StreamMutex, checker.StreamResource,
	// checker.StreamFencing); the
	// faults are healed, everything is stopped and the whole history is
	// checked as in any run, so the verdict is a full run's.
	StopOnViolation bool
	// NoIndex leaves the store's index.html as it is when the run ends.
	// Each write of it reads every run the store holds, so that a series
	// of hundreds of runs (the matrix) writes it once, at its end, rather
	// than after every run.
	NoIndex bool
	// StopOnly, with StopOnViolation, names the one violation that stops
	// the run: an anomaly of kind StopOnly.Kind found by the checker called
	// StopOnly.Checker (either "" for any). A shrink's replay stops at the
	// violation it is judged by, not at another that came first.
	StopOnly StopTarget
	// MaxCriticalSections (--max-sections), if positive, ends the
	// workload early once that many acquires succeeded: benchmarks and the
	// matrix's timed runs, which need a number of acquires, not a time.
	MaxCriticalSections int
	// WorkerCommand is the worker program; default: this executable with
	// the argument "worker".
	WorkerCommand []string
	WorkerEnv     []string
	// NodeCommand runs locktest's own node programs (the embedded etcd
	// member), with "node <kind> ..." appended; default: this executable.
	NodeCommand []string
	NodeEnv     []string
	// Command is the command line that reproduces the run, for the report.
	Command string
	// Logger receives the driver's log; it is also written to logs/driver.log.
	Logger *slog.Logger
	// Provider runs the nodes: one of Providers (processes on this host,
	// the default when empty; containers; an inventory's hosts).
	Provider string
	// ProviderSettings are the values of the settings only a provider
	// reads (the docker provider's --image, the ssh provider's
	// --inventory, ...), by name: each provider declares its own
	// (provider.Def.Settings), and refuses those of another.
	ProviderSettings provider.Values
	// Clusters, when set, keeps started clusters across the runs of a
	// series that share it (the matrix): the run takes a kept cluster
	// like its own, reset and checked, and gives its cluster back at its
	// end when it left it healthy (see Clusters). Nil: the run starts
	// and stops a cluster of its own.
	Clusters *Clusters
}

// SetupError is a run that could not start or was misconfigured: bad
// settings, a missing server binary, a port in use. The CLI exits 2 on it.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

func setupErr(format string, a ...any) error { return &SetupError{fmt.Errorf(format, a...)} }

// DefaultConfig returns the settings `locktest run` uses when no flag says
// otherwise. Run does not fill zero values in: a zero count or duration is
// an error, so a caller starts from DefaultConfig and changes what it needs.
func DefaultConfig() Config {
	return Config{
		Impl: "redis-set-nx-px", Clients: 5, Locks: 1, TTL: time.Second, Duration: 10 * time.Second, Seed: 1,
		Mode: workloads.ModeNone, StoreDir: "store", Retry: 5 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		Backoff: workloads.BackoffExponential, Timeout: time.Second, OnLost: workloads.OnLostIgnore,
		Interval: 2 * time.Second, Expect: "valid", Quiet: time.Second, Net: NetAuto, Provider: Providers[0],
		FaultSettings: nemesis.Defaults(),
	}
}

// fillAuto computes the settings whose zero value means "derived": the
// run's name and the client pause.
func (c *Config) fillAuto() {
	for _, s := range []*nemesis.Setting[time.Duration]{nemesis.Pause, nemesis.ClockBump} {
		if s.Of(c.FaultSettings) == 0 {
			s.Set(&c.FaultSettings, 2*c.TTL)
		}
	}
	if c.Name == "" {
		parts := []string{c.Impl}
		if c.Client != "" {
			parts[0] = clientLabel(c.Client)
		}
		parts = append(parts, c.Faults...)
		parts = append(parts, string(c.Mode))
		c.Name = strings.Join(parts, "-")
	}
}

// Prepared returns c as Run prepares it: its derived settings filled in
// (a client pause and a clock jump of twice the TTL, the run's name) and
// checked by Validate. A command that makes runs of its own from a
// run's flags (locktest margin) checks them so before it starts any.
func (c Config) Prepared() (Config, error) {
	c.fillAuto()
	return c, c.Validate()
}

// Validate checks c, naming the bad setting as its flag.
func (c *Config) Validate() error {
	if len(c.Libs) > 0 && c.Client != "" {
		return setupErr("--lib pins the libraries of a Go impl (--impl), and --client runs an external client: give one of them")
	}
	impl, err := c.ImplInfo()
	if err != nil {
		return err
	}
	for _, f := range c.Faults {
		if !nemesis.Known(f) {
			return setupErr("--faults: unknown fault %q (known: %s; join faults with + to combine them)", f, strings.Join(nemesis.Names(), ", "))
		}
	}
	if _, err := workloads.ParseMode(string(c.Mode)); err != nil {
		return setupErr("--resource: %v", err)
	}
	if err := c.checkBounds(); err != nil {
		return err
	}
	switch {
	case c.Mode == workloads.ModeEtcdGuarded && !impl.Guarded:
		return setupErr("--resource etcd-guarded needs an impl that guards writes inside its lock service, and %s does not (etcd-mutex and etcd-lease-txn do)", c.Impl)
	case c.Mode == workloads.ModeFenced && !impl.Fenced && c.Client == "":
		return setupErr("--resource fenced needs fencing tokens, and %s grants none (use none or check-and-set)", c.Impl)
	case c.WorkMin < 0 || (c.WorkMin > 0 && c.WorkMin > c.Work):
		return setupErr("--work-min must be between 0 and --work (%v), got %v", c.Work, c.WorkMin)
	case c.Quiet < 0 || (len(c.Faults) > 0 && c.Quiet >= c.Duration):
		return setupErr("--quiet-time must be at least 0 and shorter than --time (%v), got %v", c.Duration, c.Quiet)
	case !slices.Contains(NetModes, c.Net):
		return setupErr("--net must be %s, got %q", strings.Join(NetModes, ", "), c.Net)
	case !slices.Contains(workloads.OnLostModes, c.OnLost):
		return setupErr("--on-lost must be %s, got %q", strings.Join(workloads.OnLostModes, " or "), c.OnLost)
	case !slices.Contains(workloads.Backoffs, c.Backoff):
		return setupErr("--backoff must be %s, got %q", strings.Join(workloads.Backoffs, " or "), c.Backoff)
	case slices.Contains(c.faultParts(), "partition") && len(nemesis.Partition.Of(c.FaultSettings)) < 2 && c.Plan == nil:
		return setupErr("--faults partition needs --partition with two or more groups, e.g. n1,n2/n3,c0")
	case !slices.Contains(Expectations, c.Expect):
		return setupErr("--expect must be %s, got %q", strings.Join(Expectations, " or "), c.Expect)
	case !c.knownPausePoint(impl) && (c.Client == "" || c.clientCaps != nil): // a client's points are known once it was probed
		return setupErr("--pause-point must be one of %s for %s, got %q",
			strings.Join(append([]string{workloads.PointAfterAcquire, workloads.PointBeforeWrite}, impl.Points...), ", "), c.Impl, nemesis.PausePoint.Of(c.FaultSettings))
	case strings.ContainsAny(c.Name, `/\`) || c.Name == "." || c.Name == "..":
		return setupErr("--name %q must be a plain folder name", c.Name)
	}
	if c.Client == "" && c.Backend != "" {
		return setupErr("--backend changes nothing in this run: it needs --client")
	}
	if c.Client == "" && len(c.ClientParams) > 0 {
		return setupErr("--client-opt changes nothing in this run: it needs --client")
	}
	if err := c.validateLibs(impl); err != nil {
		return err
	}
	// A client's notices are known once it was probed.
	if c.OnLost == workloads.OnLostStopWriting && impl.Notices == "" && (c.Client == "" || c.clientCaps != nil) {
		return setupErr("--on-lost %s changes nothing in this run: %s sends no lost notices (etcd-mutex, etcd-lease-txn, zk-recipe, zk-lock, the Redlock impls with their keep-alive on and the clients curator, curator-semaphore and kazoo do)", c.OnLost, c.Impl)
	}
	if c.Plan != nil && len(c.Targets) > 0 {
		return setupErr("--target changes nothing with --schedule: each planned fault names its own targets")
	}
	for f := range c.Targets {
		if !slices.Contains(c.faultParts(), f) {
			return setupErr("--target names fault %q, which the run does not have (faults: %s)", f, strings.Join(c.Faults, ","))
		}
	}
	if err := c.validateSettings(impl); err != nil {
		return err
	}
	return c.validateProvider(impl)
}

// knownPausePoint reports whether c's pause point is random, one of the
// worker's own or one of impl's.
func (c *Config) knownPausePoint(impl impls.Impl) bool {
	p := nemesis.PausePoint.Of(c.FaultSettings)
	return p == "" || p == workloads.PointAfterAcquire || p == workloads.PointBeforeWrite || slices.Contains(impl.Points, p)
}

// faultParts returns the run's faults with combined ones split into their
// parts: "partition+kill-node" gives partition and kill-node.
func (c *Config) faultParts() []string { return checker.FaultParts(c.Faults) }

// Outcome is what a finished run left.
type Outcome struct {
	Dir     string
	Results runstore.Results
}

// Throughput runs cfg until it has made sections critical sections (or its
// time is up) and returns the critical sections per second of its
// workload: from its first client op to its last, without the start-up of
// servers and workers. A run that is not valid is an error. Benchmarks
// measure the driver with it.
func Throughput(ctx context.Context, cfg Config, sections int) (float64, error) {
	cfg.MaxCriticalSections = sections
	out, err := Run(ctx, cfg)
	if err != nil {
		return 0, err
	}
	if out.Results.Valid != checker.Valid {
		return 0, fmt.Errorf("verdict %s: %v", out.Results.Valid, out.Results.Run.Errors)
	}
	h, err := out.History()
	if err != nil {
		return 0, err
	}
	return out.Results.Stats["critical_sections"] / h.ClientSpan().Seconds(), nil
}

// History reads the history the run stored.
func (o *Outcome) History() (history.History, error) {
	return history.ReadFile(filepath.Join(o.Dir, runstore.HistoryFile))
}

// Run performs one run and stores it under cfg.StoreDir/cfg.Name/<timestamp>.
// A run whose context is cancelled (Ctrl-C) stops early but still stops
// every process it started and writes what it recorded, checked. Errors
// before the workload started are *SetupError, with a nil Outcome. A run
// whose results.json or report cannot be written (a full disk) returns its
// Outcome, whose Results say so among their problems and so are at best
// unknown, together with the error.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	if err := cfg.loadPlan(); err != nil {
		return nil, err
	}
	cfg.fillAuto()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	impl, _ := cfg.ImplInfo()
	restrictUmask()
	if cfg.ProfileDir != "" {
		stop, err := Profile(cfg.ProfileDir, "driver")
		if err != nil {
			return nil, setupErr("--profile: %v", err)
		}
		defer stop()
	}
	started := time.Now()
	dir, err := runstore.MakeRunDir(cfg.StoreDir, cfg.Name, started)
	if err != nil {
		return nil, setupErr("store: %v", err)
	}
	begun := false // the workload began: from here on the run folder is kept
	var info runstore.RunInfo
	var setupFailure error // the error of a run that could not start
	defer func() {
		switch {
		case begun:
		case setupFailure != nil && strings.Contains(setupFailure.Error(), dir+string(filepath.Separator)):
			// The error names a file of the run's folder (a node's log):
			// keep the folder, saying why the run did not start.
			_ = runstore.WriteResults(dir, runstore.Results{Run: info, Valid: checker.Unknown,
				Problems: []string{"the run could not start: " + setupFailure.Error()}})
		default:
			// A run that could not start recorded nothing; its error says
			// why, and a half-made folder would only confuse the store.
			os.RemoveAll(dir)
			os.Remove(filepath.Dir(dir)) // only if no other run is there
		}
	}()
	logDir := filepath.Join(dir, runstore.LogsDir)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, setupErr("store: %v", err)
	}
	driverLog, err := os.Create(filepath.Join(logDir, "driver.log"))
	if err != nil {
		return nil, setupErr("store: %v", err)
	}
	defer driverLog.Close()
	lg := slog.New(teeHandler{slog.NewTextHandler(driverLog, nil), cfg.Logger})
	if len(cfg.Libs) > 0 {
		if err := cfg.buildAdapter(ctx, logDir, lg); err != nil {
			setupFailure = err
			return nil, err
		}
	}
	if cfg.external() {
		if impl, err = cfg.probe(ctx, logDir); err != nil {
			setupFailure = err
			return nil, err
		}
	}
	cfg.rateClock, cfg.skewClock = cfg.clockWorker(ctx, impl, logDir, lg)
	lg.Info("run starting", "dir", dir, "impl", cfg.Impl, "faults", strings.Join(cfg.Faults, ","), "seed", cfg.Seed)

	info = runstore.RunInfo{
		Name: cfg.Name, Impl: cfg.Impl, ImplDoc: impl.Doc, Notices: impl.Notices, Backend: impl.Backend, Nodes: impl.Nodes,
		Faults: append([]string{}, cfg.Faults...), Clients: cfg.Clients, Locks: cfg.Locks,
		TTL: cfg.TTL.String(), Duration: cfg.Duration.String(), Seed: cfg.Seed, Mode: string(cfg.Mode),
		Command: cfg.Command, Version: runstore.Version(), Started: started.Format(time.RFC3339), Expect: cfg.Expect,
		Provider: cfg.Provider, Settings: cfg.Values(),
	}
	info.Targets, info.ClockDirection, info.Partition = cfg.Targets, nemesis.ClockDirection.Of(cfg.FaultSettings), nemesis.Partition.Of(cfg.FaultSettings)
	if c := cfg.clientCaps; c != nil {
		spec, _ := cfg.clientSpec()
		info.Client = &runstore.ClientInfo{Command: strings.Join(spec.Command, " "), Library: c.Library, Version: c.Version,
			Fenced: c.Fenced, Expires: c.Expires, Blocking: c.Blocking}
	}
	// The servers' versions follow once the nodes are up (start).
	info.Versions = runstore.Versions{Locktest: runstore.Version(), Clients: clientVersions(impl, info.Client, cfg.adapter)}
	if strings.Contains(strings.Join(cfg.Faults, ","), "+") {
		info.Stagger = cfg.Stagger.String()
	}
	if nemesis.Reads(cfg.faultParts(), "pause") {
		info.PausePoint, info.ClientPause = nemesis.PausePoint.Of(cfg.FaultSettings), nemesis.Pause.Of(cfg.FaultSettings).String()
	}
	// Until the run ends, results.json says how it was made and that it is
	// unfinished, so `locktest check` of a run whose driver was killed
	// still knows its resource mode and expectation.
	if err := runstore.WriteResults(dir, runstore.Results{Run: info, Valid: checker.Unknown,
		Problems: []string{runstore.Unfinished}}); err != nil {
		return nil, setupErr("store: %v", err)
	}

	clock := history.StartClock()
	hw, err := history.Create(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		return nil, setupErr("history: %v", err)
	}
	var acquired atomic.Int64
	enough := make(chan struct{})
	var watch *violationWatch
	var watchStop <-chan struct{} // nil: never
	if cfg.StopOnViolation {
		watch = newViolationWatch(string(cfg.Mode), time.Second+cfg.TTL, cfg.StopOnly, clock, lg)
		watchStop = watch.stop
		defer watch.close()
	}
	sink := countingSink{Sink: hw, watch: watch, onAcquire: func() {
		if n := acquired.Add(1); cfg.MaxCriticalSections > 0 && n == int64(cfg.MaxCriticalSections) {
			close(enough)
		}
	}}
	rec := history.NewRecorder(sink)

	var runErrs []string
	if cfg.Client != "" && cfg.Mode == workloads.ModeFenced && !impl.Fenced {
		runErrs = append(runErrs, noTokenProblem(cfg.Impl))
	}
	prov, provErr := setupProvider(ctx, cfg, impl, dir, lg)
	var cl clusters.Cluster
	var pool *workloads.Pool
	var resStore *workloads.Store
	defer func() {
		// Whatever happened, nothing the run started outlives it. The
		// stop of its processes and the removal of its provider each
		// have a budget of their own: a run that failed to start on a
		// starved machine (stress-ng beside the suite) spent the shared
		// 30 s in the stop, and every command of the network lab's
		// removal then failed at once, leaving its namespaces, bridge
		// and FORWARD rule behind.
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if pool != nil && cfg.Clusters != nil {
			// The workers go first, as in stopAll, before the cluster
			// is given back.
			if err := pool.Stop(stopCtx); err != nil {
				lg.Warn("stop workers", "err", err)
			}
		}
		cl = cfg.Clusters.finish(stopCtx, cl, logDir, lg)
		stopAll(stopCtx, cl, pool, resStore, logDir, lg)
		closeCtx, cancelClose := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancelClose()
		prov.close(closeCtx, lg)
		hw.Close() // idempotent; closed already when the run got to its end
	}()
	if provErr != nil {
		return nil, provErr
	}
	info.Network, info.Lab, info.Image, info.Clock = prov.describe()
	if info.Lab != "" {
		// A driver killed from here on leaves a lab behind: say which, so
		// the folder tells what `locktest cleanup` will remove.
		if err := runstore.WriteResults(dir, runstore.Results{Run: info, Valid: checker.Unknown,
			Problems: []string{runstore.Unfinished}}); err != nil {
			return nil, setupErr("store: %v", err)
		}
	}
	var startErr error
	var starting func(int)
	if watch != nil {
		starting = watch.starting
	}
	cl, pool, resStore, startErr = start(ctx, cfg, impl, dir, logDir, clock, rec, prov, &info, starting, lg)
	if startErr != nil {
		setupFailure = startErr
		return nil, startErr
	}
	// results.json, written before the nodes were up, learns their
	// versions. The workers run already: a disk they filled meanwhile
	// leaves the first results.json, which says as much (unknown,
	// unfinished), and the run goes on to end with its store problem.
	if err := runstore.WriteResults(dir, runstore.Results{Run: info, Valid: checker.Unknown,
		Problems: []string{runstore.Unfinished}}); err != nil {
		lg.Warn("results.json keeps no versions until the run ends", "err", err)
	}
	network := prov.network(cl)
	var clients nemesis.Clients = pool
	if cfg.external() {
		clients = externalPool{pool}
	}
	env := nemesis.Env{
		Cluster: cl, Clients: clients, PowerReason: prov.powerWhy,
		Net: network, NetReason: prov.netReason, ClientHosts: prov.clientHosts(cfg.Clients), Delayer: prov.delayer(network),
		Clocks: clockControl(prov), ClockReason: prov.clockWhy,
		Targets: cfg.Targets, Stagger: cfg.Stagger, Settings: cfg.FaultSettings,
	}
	env.Disks, env.DiskReason = diskControl(prov)
	faults, steps, unavailable, err := buildFaults(prov, cfg, env)
	if err != nil {
		return nil, err
	}
	for _, u := range unavailable {
		lg.Warn("fault left out", "reason", u)
		runErrs = append(runErrs, u)
	}
	begun = true
	sched := &nemesis.Schedule{Faults: faults, Interval: cfg.Interval, Seed: cfg.Seed, Recorder: rec, Clock: clock, Logger: lg, Steps: steps}

	// The workload runs until its time is up, enough critical sections were
	// done, or the user interrupts.
	// The nemesis stops Quiet before the end and heals everything, so the
	// last stretch of the run shows whether the system recovered.
	wctx, wcancel := context.WithTimeout(ctx, cfg.Duration)
	nctx, ncancel := context.WithTimeout(wctx, cfg.Duration-cfg.Quiet)
	defer ncancel()
	stalls := startStallWatch(clock.Now, nil)
	prov.p.Watch()
	disk, derr := startDiskWatch(filepath.Join(dir, ".disk-probe"), clock.Now, nil)
	if derr != nil {
		lg.Warn("the disk is not measured: no probe file", "err", derr)
	}
	nemDone := make(chan error, 1)
	go func() { nemDone <- sched.Run(nctx) }()
	go progress(wctx, cfg.Logger, cfg.Duration, rec, &acquired, sched)
	stoppedEarly := false
	select {
	case <-wctx.Done():
	case <-enough:
	case <-watchStop:
		stoppedEarly = true
	}
	info.Interrupted = ctx.Err() != nil
	wcancel()
	info.Stalls = stalls.finish()
	info.Stalls.Disk = disk.finish()
	if info.Stalls.Hosts = prov.p.HostStalls(clock.Now()); info.Stalls.Hosts != nil {
		if d := info.LongestHostStall(); runstore.StallMayBreakLease(d, cfg.TTL) {
			lg.Warn("a host answered its keepalive late: a node there may have let a lease this short expire with no fault", "longest", d,
				"host", info.Stalls.Hosts.Host, "at", info.Stalls.Hosts.LongestAt, "ttl", cfg.TTL)
		}
	}
	if d := info.LongestStall(); runstore.StallMayBreakLease(d, cfg.TTL) {
		lg.Warn("the machine stalled: a lease this short may break with no fault", "longest", d,
			"at", info.Stalls.LongestAt, "stalls", info.Stalls.Count, "ttl", cfg.TTL)
	}
	if d := info.LongestDiskStall(); runstore.StallMayBreakLease(d, cfg.TTL) {
		lg.Warn("the disk stalled: a service that syncs before it answers may have let a lease this short expire with no fault", "longest", d,
			"at", info.Stalls.Disk.LongestAt, "slow_syncs", info.Stalls.Disk.Count, "ttl", cfg.TTL)
	}
	healErr := <-nemDone
	if healErr != nil {
		runErrs = append(runErrs, healErr.Error())
		lg.Error("nemesis", "err", healErr)
	}
	if err := writeSchedule(dir, cfg, sched); err != nil {
		runErrs = append(runErrs, "schedule: "+err.Error())
	}
	// A host whose SSH connection was lost during the run may have run its
	// node on without the faults meant for it, or been healed of none: the
	// run did not test what it meant to, even with nothing left to apply.
	lost := prov.p.Lost()
	if lost != "" {
		runErrs = append(runErrs, cmp.Or(cfg.Provider, Providers[0])+": "+lost)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+cfg.TTL+5*time.Second)
	if err := pool.Stop(stopCtx); err != nil {
		runErrs = append(runErrs, err.Error())
	}
	cancel()
	info.Cluster = cfg.Clusters.judge(context.WithoutCancel(ctx), cl, cfg.faultParts(), healErr, info.Interrupted, lost, lg)
	if err := hw.Close(); err != nil {
		runErrs = append(runErrs, "history: "+err.Error())
	}
	if watch != nil {
		watch.close()
		info.StoppedEarly = watch.stopped(stoppedEarly)
	}
	info.Elapsed = time.Since(started).Round(time.Millisecond).String()
	info.Errors = runErrs

	d, h := decideRecorded(dir, rec, &info, lg)
	res := runstore.New(info, d)
	if err := storeResults(dir, &res, h, d.Visual); err != nil {
		lg.Error("store results", "err", err)
		return &Outcome{Dir: dir, Results: res}, err
	}
	if err := runstore.LinkLatest(dir); err != nil {
		lg.Warn("latest link", "err", err)
	}
	if !cfg.NoIndex {
		if err := reports.WriteIndex(cfg.StoreDir); err != nil {
			lg.Warn("store index", "err", err)
		}
	}
	lg.Info("run done", "valid", res.Valid, "ops", int(res.Stats["ops"]), "critical_sections", acquired.Load())
	return &Outcome{Dir: dir, Results: res}, nil
}

// FactsOf returns what the checkers need to know of the run info
// describes besides its history, its backend's facts asked of the
// backend's registry (backend.ServerSessionsOf).
func FactsOf(info runstore.RunInfo) checker.RunFacts {
	return info.Facts(backend.ServerSessionsOf(info.Backend, info.Nodes))
}

// decideRecorded decides the run from what it recorded, adding to
// info's errors what kept the check from reading all of it: a large
// history as a stream (StreamFile, DecideStream), which returns its first
// ops for the report, any other held whole (recorded, checker.Decide).
func decideRecorded(dir string, rec *history.Recorder, info *runstore.RunInfo, lg *slog.Logger) (checker.Decision, *history.Table) {
	ctx := context.Background()
	path := filepath.Join(dir, runstore.HistoryFile)
	if stream, ff, err := StreamFile(ctx, path, false); stream && err == nil {
		tail := rec.History()
		if err := tailFits(ff.Ops, tail); err != nil {
			info.Errors = append(info.Errors, err.Error())
			tail = nil
		}
		d, h, err := DecideStream(ctx, path, FactsOf(*info), ff, tail)
		if err == nil {
			lg.Info("history checked as a stream", "ops", ff.Ops+len(tail), "slack", time.Duration(ff.Slack))
			return d, h
		}
		lg.Warn("history: streaming check failed; holding it", "err", err)
	}
	h, err := recorded(dir, rec)
	if err != nil {
		info.Errors = append(info.Errors, err.Error())
	}
	return checker.Decide(ctx, h, FactsOf(*info), reports.MaxVisualizedOps), h
}

// recorded reads back what the run recorded: the history file, which the
// recorder wrote as it went and keeps no copy of, followed by the ops the
// recorder kept after the file failed (a full disk). A file that cannot be
// read whole gives the error and the ops up to its bad line.
//
// A history too large for the memory the machine has free is not read
// (FitMemory): the error says so, and the run is left unchecked.
func recorded(dir string, rec *history.Recorder) (*history.Table, error) {
	path := filepath.Join(dir, runstore.HistoryFile)
	if err := FitMemory(path); err != nil {
		return &history.Table{}, fmt.Errorf("history: not checked: %w", err)
	}
	h, err := history.ReadTable(path)
	tail := rec.History()
	if err != nil {
		return h, fmt.Errorf("history: reading it back: %v; the check sees its first %d ops of %d", err, h.Len(), rec.Len())
	}
	if err := tailFits(h.Len(), tail); err != nil {
		return h, err
	}
	for _, op := range tail {
		h.Append(op)
	}
	return h, nil
}

// tailFits says why the ops a recorder kept after its file failed (tail)
// cannot follow the file's n ops, or returns nil.
func tailFits(n int, tail []history.Op) error {
	if len(tail) > 0 && tail[0].Index != n {
		return fmt.Errorf("history: the file has %d ops but the ops kept in memory start at %d; the check sees the file's", n, tail[0].Index)
	}
	return nil
}

// WorkerBackoff is the workers' wait after a failed acquire, as the
// config sets it.
func (c *Config) WorkerBackoff() workloads.Backoff {
	return workloads.Backoff{Policy: c.Backoff, Retry: workloads.Duration(c.Retry), Max: workloads.Duration(c.RetryMax)}
}

// Profile makes dir and starts a CPU profile of this process in it,
// name.cpu.pprof; stop ends it and writes the heap profile beside it,
// name.heap.pprof.
func Profile(dir, name string) (stop func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name+".cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if h, err := os.Create(filepath.Join(dir, name+".heap.pprof")); err == nil {
			_ = pprof.WriteHeapProfile(h)
			h.Close()
		}
	}, nil
}

// restrictUmask keeps other users from writing what the run creates — its
// folder, history, logs, the servers' data — whatever umask the caller
// has: it adds group and other write to this process's umask, which the
// servers and workers inherit. It only ever narrows the umask.
func restrictUmask() {
	old := syscall.Umask(0o077) // the umask can only be read by setting it
	syscall.Umask(old | 0o022)
}

// progress logs, every few seconds until ctx is done, how far the run got.
// It logs only to the user's logger (a terminal), not to driver.log.
func progress(ctx context.Context, lg *slog.Logger, total time.Duration, rec *history.Recorder, acquired *atomic.Int64, sched *nemesis.Schedule) {
	if lg == nil {
		return
	}
	start := time.Now()
	tick.Every(5*time.Second, ctx.Done(), func() {
		lg.Info("progress", "elapsed", time.Since(start).Round(time.Second), "of", total,
			"ops", rec.Len(), "critical_sections", acquired.Load(), "faults", sched.Applied())
	})
}

// start brings up the cluster, the store and the workers. Once the
// cluster's nodes are up, before the workers start, it records the
// servers' versions in info (or, when they did not come up, why there are
// none). What it started is returned even on error, so the caller can stop
// it.
func start(ctx context.Context, cfg Config, impl impls.Impl, dir, logDir string, clock history.Clock,
	rec *history.Recorder, prov *providerSetup, info *runstore.RunInfo, starting func(int), lg *slog.Logger) (clusters.Cluster, *workloads.Pool, *workloads.Store, error) {
	cl, err := cfg.Clusters.startCluster(ctx, cfg, impl, dir, prov, lg)
	info.Versions.Servers = serverVersions(ctx, cfg, impl.Backend, cl, err, lg)
	if err != nil {
		return cl, nil, nil, err
	}
	resStore, err := workloads.StartStoreOn(prov.storeAddr, cfg.Mode, clock, filepath.Join(dir, runstore.ResourceFile), lg)
	if err != nil {
		return cl, nil, nil, &SetupError{err}
	}
	nodes, err := prov.proxied(cl.Nodes())
	if err != nil {
		return cl, nil, resStore, &SetupError{err}
	}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	locks := make([]string, cfg.Locks)
	for i := range locks {
		locks[i] = fmt.Sprintf("lock-%d", i)
	}
	var client *external.Spec
	if cfg.external() {
		spec, err := cfg.clientSpec()
		if err != nil {
			return cl, nil, resStore, err
		}
		client = &spec
	}
	pool, err := workloads.StartPool(ctx, workloads.PoolConfig{
		Command: cfg.WorkerCommand, Env: cfg.WorkerEnv, LogDir: logDir, Recorder: rec, Clock: clock, Logger: lg,
		NetNS: prov.netNS(), Cgroup: prov.cgroup(), ReplaceDead: client != nil, Starting: starting,
		RateClock: cfg.rateClock, SkewClock: cfg.skewClock,
		Base: workloads.WorkerConfig{
			Impl: cfg.Impl, Client: client, Addrs: addrs, Nodes: ClientNodes(nodes), Params: cfg.ImplParams, Locks: locks, TTL: workloads.Duration(cfg.TTL),
			Think: workloads.Duration(cfg.Think), Backoff: cfg.WorkerBackoff(),
			Work: workloads.Duration(cfg.Work), WorkMin: workloads.Duration(cfg.WorkMin), Timeout: workloads.Duration(cfg.Timeout),
			StoreAddr: resStore.Addr(), Mode: cfg.Mode, OnLost: cfg.OnLost, ClockOrigin: clock.Origin(), Seed: cfg.Seed,
			RetryRelease: workloads.Duration(cfg.RetryRelease), RetryAcquire: cfg.RetryAcquire,
			ProfileDir: cfg.ProfileDir,
		},
	}, cfg.Clients)
	if err != nil {
		return cl, nil, resStore, &SetupError{fmt.Errorf("start workers: %w", err)}
	}
	return cl, pool, resStore, nil
}

// stopAll stops, in order, the workers, the cluster (after copying its
// logs) and the store. Each may be nil; each Stop is idempotent.
func stopAll(ctx context.Context, cl clusters.Cluster, pool *workloads.Pool, resStore *workloads.Store, logDir string, lg *slog.Logger) {
	if pool != nil {
		if err := pool.Stop(ctx); err != nil {
			lg.Warn("stop workers", "err", err)
		}
	}
	if cl != nil {
		if rc, ok := cl.(clusters.Reconnector); ok {
			if err := rc.Reconnect(ctx); err != nil {
				lg.Warn("reconnect to the hosts lost during the run", "err", err)
			}
		}
		if lc, ok := cl.(clusters.LogCollector); ok {
			if err := lc.CollectLogs(logDir); err != nil {
				lg.Warn("collect node logs", "err", err)
			}
		}
		if err := cl.Stop(ctx); err != nil {
			lg.Error("stop cluster", "err", err)
		}
	}
	if resStore != nil {
		if err := resStore.Close(ctx); err != nil {
			lg.Warn("close store", "err", err)
		}
	}
}

// countingSink passes ops on, counts successful acquires and shows each
// op to the violation watch of a --stop-on-violation run.
type countingSink struct {
	history.Sink
	onAcquire func()
	watch     *violationWatch
}

func (s countingSink) Append(op history.Op) error {
	if op.F == history.Acquire && op.Type == history.OK {
		s.onAcquire()
	}
	if s.watch != nil {
		s.watch.add(op)
	}
	return s.Sink.Append(op)
}

// teeHandler sends records to two slog handlers; the second may be nil.
type teeHandler struct {
	a slog.Handler
	b *slog.Logger
}

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || (t.b != nil && t.b.Enabled(ctx, l))
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if t.a.Enabled(ctx, r.Level) {
		err = t.a.Handle(ctx, r)
	}
	if t.b != nil && t.b.Handler().Enabled(ctx, r.Level) {
		err = errors.Join(err, t.b.Handler().Handle(ctx, r.Clone()))
	}
	return err
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b *slog.Logger
	if t.b != nil {
		b = slog.New(t.b.Handler().WithAttrs(as))
	}
	return teeHandler{t.a.WithAttrs(as), b}
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	var b *slog.Logger
	if t.b != nil {
		b = slog.New(t.b.Handler().WithGroup(name))
	}
	return teeHandler{t.a.WithGroup(name), b}
}

// storeResults writes the report and results.json of a finished run. A
// file that cannot be written (a full disk) goes into res's problems, so res
// is at best unknown, and the error is returned. The report is written
// first, so results.json can say that it is missing; if results.json itself
// cannot be written, it still holds what the run wrote at its start
// (unknown, unfinished), and a report that says otherwise is removed.
func storeResults(dir string, res *runstore.Results, h *history.Table, vis *checker.Visualization) error {
	fail := func(err error) error {
		err = fmt.Errorf("store: %w", err)
		res.Problems = append(res.Problems, err.Error())
		res.Valid = checker.Merge(res.Valid, checker.Unknown)
		return err
	}
	var errs []error
	if err := reports.WriteHTMLVisual(dir, *res, h, vis); err != nil {
		errs = append(errs, fail(fmt.Errorf("report not written: %w", err)))
	}
	if err := runstore.WriteResults(dir, *res); err != nil {
		errs = append(errs, fail(fmt.Errorf("results not written: %w", err)))
		_ = os.Remove(filepath.Join(dir, runstore.ReportFile))
	}
	return errors.Join(errs...)
}
