// Package matrix is the backend matrix: it runs every impl
// against each fault class and measures, per impl, the properties the
// lock-selection articles list — mutual exclusion under each fault,
// deadlock freedom after the holder dies, tolerance of one node lost,
// fencing token, reentrancy, blocking wait, acquire latency and critical
// sections per second — then aggregates the stored runs into a
// reports.Matrix.
//
// The package has three stages: Plan turns Options into jobs (each a
// run.Config), Execute runs them, as many at once as a Pace allows
// (pace.go), leaving out the seeds of a cell its earlier seeds decided
// (sequential.go), and measures each stored run as it finishes (see
// measure.go), and Aggregate turns the measured jobs into the matrix.
// Aggregate and Decided are pure functions of the jobs' results, so tests
// build their input by hand.
package matrix

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/workloads"
)

// Class is a fault class of the matrix.
type Class string

// The fault classes, and the locktest faults each maps to.
const (
	// ClassNone injects nothing; its run (8 clients) is also the 8-client
	// performance run.
	ClassNone Class = "none"
	// ClassClientPause is pause-client at after-acquire, for 4 TTLs: the
	// GC pause of the debate.
	ClassClientPause Class = "client-pause"
	// ClassNodePause is pause-node (SIGSTOP of one node for the window).
	ClassNodePause Class = "node-pause"
	// ClassKillRestart is kill-node with a restart after NodeDown; its run
	// also measures availability with one node lost.
	ClassKillRestart Class = "kill-restart"
	// ClassPartition is isolate (one node cut from everything) for 2 to 4
	// nodes, halves for 5 or more, and client-isolate (one client cut from
	// the node) for a single node.
	ClassPartition Class = "partition"
	// ClassClock is clock-bump (one node's wall clock jumps by 2·TTL,
	// forward or back) and clock-strobe (it flips between its time and
	// 2·TTL ahead every 10ms), one at a time.
	ClassClock Class = "clock"
	// ClassClientClock is clock-skew-client: one worker's wall clock, the
	// one the impls that compute expiry or a token from the client's clock
	// read, skewed by 2·TTL, forward or back, for the window. Where
	// ClassClock moves a node's clock, this moves a client's.
	ClassClientClock Class = "client-clock"
)

// PerfTime is the longest workload of the timed runs (ProbePerf1,
// ProbePerf8): hundreds of acquires for the slowest locks, and each second
// of it a second the machine runs nothing else.
const PerfTime = 4 * time.Second

// PerfSections ends a timed run early once that many acquires succeeded
// (run.Config.MaxCriticalSections): its p99 is then the 20th slowest of
// 2,000, which more acquires would not move, and the fast locks (Redis,
// one SQL server), which make 2,000 in under a second or two, leave the
// machine to the other runs sooner. The rates are over the workload's
// span (Throughput), so a run that ended early measures the same rate.
const PerfSections = 2000

// The workload of the matrix's untimed runs (the fault classes, the
// fault-free column and the deadlock probe): a holder works a random time
// up to Work between its read and its write, and a waiter tries again
// after a random wait up to Retry, every time (the uniform backoff). The
// lock is so held most of the time and taken within milliseconds of its
// release or its lease's end, as a fault needs to matter; and each run's
// workers make about a tenth of the operations of the tight retry with no
// work (Retry 5 ms, Work 0), which took every core it was given, so that
// several times more runs go at once before they wait for the CPU long
// enough to lose a lease (docs/matrix-howto.md, docs/performance.md).
const (
	Work  = 10 * time.Millisecond
	Retry = 10 * time.Millisecond
)

// PerfRetry is the retry of the timed runs and the reentrancy probe: the
// tight retry (uniform, up to 5 ms, no work), at contention's highest, as
// their latencies and rates have always been measured.
const PerfRetry = 5 * time.Millisecond

// killRestartFault is the fault of ClassKillRestart, whose runs also
// measure availability with one node lost.
const killRestartFault = "kill-node"

// OneNodeKillRestartTime is the shortest workload of a kill/restart run of
// a one-node backend, whose critical sections last seconds (OneNodeWork).
const OneNodeKillRestartTime = 12 * time.Second

// OneNodeWork returns the shortest and longest critical section (the work
// between the read and the write) of a kill/restart run of a one-node
// backend whose node stays down for down: two and three times down, so that
// a holder granted the lock before a kill is, most of the time, still
// working when the node is back (down, then a start that takes a fraction
// of a second).
func OneNodeWork(down time.Duration) (lo, hi time.Duration) { return 2 * down, 3 * down }

// Classes are the fault classes in the order of the matrix's columns.
var Classes = []Class{ClassNone, ClassClientPause, ClassNodePause, ClassKillRestart, ClassPartition, ClassClock, ClassClientClock}

// ParseClasses reads a list of class names; "all" or an empty list means
// Classes. ClassNone is always included: its run is the 8-client
// performance run as well. The name of any fault of the nemesis's registry
// is a class too, that fault alone, with a column after the classes above.
func ParseClasses(names []string) ([]Class, error) {
	if len(names) == 0 || len(names) == 1 && names[0] == "all" {
		return slices.Clone(Classes), nil
	}
	want := map[Class]bool{ClassNone: true}
	var extra []Class // faults named as classes, in order
	for _, n := range names {
		c := Class(strings.TrimSpace(n))
		if _, fault := nemesis.Lookup(string(c)); !slices.Contains(Classes, c) && !fault {
			var known []string
			for _, k := range Classes {
				known = append(known, string(k))
			}
			return nil, fmt.Errorf("unknown fault class %q (known: %s, or a fault: %s)", n, strings.Join(known, ", "), strings.Join(nemesis.Names(), ", "))
		}
		if !want[c] {
			extra = append(extra, c)
		}
		want[c] = true
	}
	var out []Class
	for _, c := range Classes {
		if want[c] {
			out = append(out, c)
		}
	}
	for _, c := range extra {
		if !slices.Contains(Classes, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Probe is what a job measures.
type Probe string

// The probes.
const (
	// ProbeSafety is a fault class's mutual-exclusion run (resource mode
	// none, so that a violation shows in what the store accepted).
	ProbeSafety Probe = "safety"
	// ProbeDeadlock kills lock holders (kill-client with KillHolder).
	ProbeDeadlock Probe = "deadlock"
	// ProbePerf1 is the fault-free run with one client, whose latency and
	// rate the matrix shows; it is timed, so it runs alone.
	ProbePerf1 Probe = "perf-1"
	// ProbePerf8 is the fault-free run with 8 clients, whose latency and
	// rate the matrix shows; it is timed, so it runs alone. (A matrix
	// stored before it existed took these figures from seed 1 of the
	// fault-free safety run, which then ran alone.)
	ProbePerf8 Probe = "perf-8"
	// ProbeReentrant is the reentrancy probe (see ProbeReentrancy); it is
	// not a run, and it runs once per impl, not once per seed.
	ProbeReentrant Probe = "reentrancy"
)

// Options are the settings of a matrix.
type Options struct {
	// Impls are the impls to measure; empty means every registered one
	// (unless ExternalClients are given: then only those).
	Impls []string
	// ExternalClients are external lock clients (run.Config.Client: the
	// names of manifests in run.ClientsDir) measured in rows of their own,
	// after the impls. Their rows have no reentrancy probe, which needs a
	// Go impl.
	ExternalClients []string
	// Classes are the fault classes; empty means all (see ParseClasses).
	Classes []Class
	// Seeds is how many seeds each job runs with (seeds 1..Seeds).
	Seeds int
	// Duration is each run's workload time; the one-client performance
	// run lasts at most 4 s of it.
	Duration time.Duration
	// TTL is the lock lease of every run.
	TTL time.Duration
	// Clients is the number of clients of the fault runs; the fault-free
	// runs use 8 and 1.
	Clients int
	// Resource is the resource mode of the saved-by-fencing column (one of
	// ResourceModes): fenced (the default) runs the client-pause class
	// again with a fenced store for every impl whose leases carry a
	// fencing token (ClassClientPauseFenced); none leaves the column out.
	// The mutex columns run with resource mode none whatever it says.
	Resource workloads.Mode
	// Base is the run.Config every job starts from: store folder, worker
	// and node commands, logger, and the settings of a deployment that
	// every job whose backend or impl reads them gets (--image,
	// --cluster-opt, --impl-opt, --persistence; see DeploymentFor). Its
	// workload and fault settings are replaced by the job's.
	Base run.Config
}

// fencedColumn reports whether o's matrix has the saved-by-fencing
// column: its resource mode is fenced and its classes have client-pause.
func (o Options) fencedColumn() bool {
	return o.Resource == workloads.ModeFenced && (len(o.Classes) == 0 || slices.Contains(o.Classes, ClassClientPause))
}

// ColumnClasses are the classes Aggregate makes o's columns of: o's
// classes (all when none), and ClassClientPauseFenced when o has the
// saved-by-fencing column.
func (o Options) ColumnClasses() []Class {
	cs := slices.Clone(o.Classes)
	if len(cs) == 0 {
		cs = slices.Clone(Classes)
	}
	if o.fencedColumn() {
		cs = append(cs, ClassClientPauseFenced)
	}
	return cs
}

// DefaultOptions returns the settings `locktest matrix` uses when no flag
// says otherwise: every impl and class, one seed, 8 s runs, 500ms leases
// and 5 clients, so that the whole matrix of 21 impls takes about 12
// minutes on two cores (docs/performance.md).
func DefaultOptions() Options {
	return Options{Seeds: 1, Duration: 8 * time.Second, TTL: 500 * time.Millisecond, Clients: 5, Resource: workloads.ModeFenced, Base: run.DefaultConfig()}
}

// Validate checks o, naming the bad setting as its flag.
func (o *Options) Validate() error {
	for _, n := range o.Impls {
		if _, err := impls.Lookup(n); err != nil {
			return fmt.Errorf("--impl: %v", err)
		}
	}
	for _, n := range o.ExternalClients {
		c := run.Config{Client: n}
		if _, err := c.ImplInfo(); err != nil {
			return err // it names --client
		}
	}
	switch {
	case o.Seeds < 1:
		return fmt.Errorf("--seeds must be at least 1, got %d", o.Seeds)
	case o.Duration < 2*time.Second:
		return fmt.Errorf("--time must be at least 2s (a run needs time for a fault and its recovery), got %v", o.Duration)
	case o.TTL < time.Millisecond:
		return fmt.Errorf("--ttl must be at least 1ms, got %v", o.TTL)
	case o.Clients < 2:
		return fmt.Errorf("--clients must be at least 2 (mutual exclusion needs contenders), got %d", o.Clients)
	case o.Base.Persistence != "" && !slices.Contains(run.Persistences, o.Base.Persistence):
		return fmt.Errorf("--persistence must be %s, got %q", strings.Join(run.Persistences, ", "), o.Base.Persistence)
	case o.Base.Provider != "" && !slices.Contains(run.Providers, o.Base.Provider):
		return fmt.Errorf("--provider must be %s, got %q", strings.Join(run.Providers, " or "), o.Base.Provider)
	case o.Resource != "" && !slices.Contains(ResourceModes, o.Resource):
		return fmt.Errorf("--resource must be %s in a matrix, got %q (its mutex columns always run with none, so that violations show; fenced adds the saved-by-fencing column, none leaves it out)",
			run.Join(ResourceModes), o.Resource)
	}
	return o.checkDeployment()
}

// Job is one planned run.
type Job struct {
	Impl  string
	Probe Probe
	// Class is the fault class of a safety job; ClassNone for the others.
	Class  Class
	Seed   int64
	Config run.Config
}

// Label names the job in progress lines: "redis-set-nx-px client-pause seed 1".
func (j Job) Label() string {
	what := string(j.Class)
	if j.Probe != ProbeSafety {
		what = string(j.Probe)
	}
	return fmt.Sprintf("%s %s seed %d", j.Impl, what, j.Seed)
}

// PartitionFault is the partition shape the matrix uses for a backend of
// n nodes: client-isolate for one node (there is no node to cut from
// another), isolate for 2 to 4, halves for 5 or more (a minority and a
// majority side, which is what splits Redlock's votes).
func PartitionFault(n int) string {
	switch {
	case n <= 1:
		return "client-isolate"
	case n < 5:
		return "isolate"
	}
	return "halves"
}

// Faults returns the locktest faults of class c for impl.
func Faults(c Class, impl impls.Impl) []string {
	switch c {
	case ClassClientPause:
		return []string{"pause-client"}
	case ClassNodePause:
		return []string{"pause-node"}
	case ClassKillRestart:
		return []string{killRestartFault}
	case ClassPartition:
		return []string{PartitionFault(impl.Nodes)}
	case ClassClock:
		return []string{"clock-bump", "clock-strobe"}
	case ClassClientClock:
		return []string{"clock-skew-client"}
	case ClassNone:
		return nil
	}
	if _, ok := nemesis.Lookup(string(c)); ok {
		return []string{string(c)} // a fault named as a class
	}
	return nil
}

// LeftOut says why a matrix of every impl leaves the impl called name out
// on this host: its backend's server is one that locktest builds itself,
// and this host has not built it (backend.BuiltReason, which names the
// make target); "" when it can run. An impl named in Options.Impls is
// never left out: its runs then say what is missing.
func LeftOut(name string) string {
	i, err := impls.Lookup(name)
	if err != nil {
		return ""
	}
	return backend.BuiltReason(i.Backend)
}

// SayLeftOut writes to w one line for each impl that Plan leaves out of
// o, with LeftOut's reason: none when o names its impls or clients.
func SayLeftOut(w io.Writer, o Options) {
	if len(o.Impls) > 0 || len(o.ExternalClients) > 0 {
		return
	}
	for _, n := range impls.Names() {
		if why := LeftOut(n); why != "" {
			fmt.Fprintf(w, "matrix: leaving out %s: %s\n", n, why)
		}
	}
}

// Plan returns the jobs of o over its impls (in name order when o.Impls is
// empty, leaving out those LeftOut names) and then its external clients.
// First the timed runs of every row, once each (their latency and rate
// are timings of thousands of acquires, not a rate over seeds): the
// fault-free run with 1 client and the one with 8. Then row by row, seed
// by seed, one safety run per class (the fault-free one with 8 clients
// too), the saved-by-fencing run where the row has that column, the
// deadlock run, and after seed 1 the reentrancy probe, once. Execute
// leaves out the seeds of a cell that its earlier seeds decided.
func Plan(o Options) ([]Job, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	names := o.Impls
	if len(names) == 0 && len(o.ExternalClients) == 0 {
		names = slices.DeleteFunc(impls.Names(), func(n string) bool { return LeftOut(n) != "" })
	}
	classes := o.Classes
	if len(classes) == 0 {
		classes = Classes
	}
	if !slices.Contains(classes, ClassNone) {
		classes = append([]Class{ClassNone}, classes...)
	}
	// The timed runs come first, one after the other (Execute runs a
	// timed job alone): together, they need the machine to themselves
	// once, not once per impl. Then a row's seeds, one after the other,
	// before the next row's. Execute starts the first job in this order
	// that may start (with the rows whose timed runs took longest
	// first: slowestRowsFirst), so a row's next seeds take the clusters its
	// earlier seeds left healthy within seconds, and once a row is done
	// its idle clusters are stopped (run.Clusters.MaxIdle); the next
	// rows' jobs fill the places its cells' seeds leave while they wait
	// for each other. In the order of seeds over every row, a kept
	// cluster waited a whole round of the other rows, minutes, for its
	// next run: most were stopped idle and started again (459 starts
	// against 408 runs on a kept one in a 5-seed matrix of 23 impls).
	type row struct {
		impl   impls.Impl
		client bool
	}
	var rows []row
	for _, name := range names {
		impl, _ := impls.Lookup(name)
		rows = append(rows, row{impl: impl})
	}
	for _, name := range o.ExternalClients {
		c := run.Config{Client: name}
		impl, _ := c.ImplInfo()
		impl.Name = name
		rows = append(rows, row{impl: impl, client: true})
	}
	job := func(r row, p Probe, c Class, seed int64) Job {
		if r.client {
			return o.clientJob(r.impl, p, c, seed)
		}
		return o.job(r.impl, p, c, seed)
	}
	var jobs []Job
	for _, r := range rows {
		jobs = append(jobs, job(r, ProbePerf1, ClassNone, 1), job(r, ProbePerf8, ClassNone, 1))
	}
	for _, r := range rows {
		for seed := int64(1); seed <= int64(o.Seeds); seed++ {
			for _, c := range classes {
				jobs = append(jobs, job(r, ProbeSafety, c, seed))
				// Whether an external client gives fencing tokens is known
				// once it is probed: a run without them is n/a.
				if c == ClassClientPause && o.fencedColumn() && (r.impl.Fenced || r.client) {
					jobs = append(jobs, job(r, ProbeSafety, ClassClientPauseFenced, seed))
				}
			}
			jobs = append(jobs, job(r, ProbeDeadlock, ClassNone, seed))
			if seed == 1 && !r.client {
				jobs = append(jobs, job(r, ProbeReentrant, ClassNone, 1))
			}
		}
	}
	return jobs, nil
}

// clientJob is job for the external client impl.Name, whose manifest
// names its backend.
func (o Options) clientJob(impl impls.Impl, p Probe, c Class, seed int64) Job {
	j := o.job(impl, p, c, seed)
	j.Config.Impl, j.Config.Client = "", impl.Name
	j.Config.Command = strings.Replace(j.Config.Command, "locktest run --impl ", "locktest run --client ", 1)
	return j
}

// StopsAtFirstViolation reports whether the runs of probe p and class c
// of an impl of nodes nodes stop a grace after their first
// violation (--stop-on-violation): those whose only product is whether
// they saw one. That is every safety run but these: a kill/restart run of a backend
// of several nodes, which also measures the availability while a node is
// down (a one-node backend has no such column); and the fenced
// client-pause runs (ClassClientPauseFenced), whose first violation is
// the lock's, while what they show is whether the fenced store then
// refused the paused holder's write, which comes later, when it wakes. A
// stopped run is a run with a violation: the rates are the same, and the
// runs end sooner.
func StopsAtFirstViolation(p Probe, c Class, nodes int) bool {
	switch {
	case p != ProbeSafety || c == ClassClientPauseFenced:
		return false
	case c == ClassKillRestart:
		return nodes <= 1
	}
	return true
}

// job builds one job's run config.
func (o Options) job(impl impls.Impl, p Probe, c Class, seed int64) Job {
	cfg := o.Base
	cfg.Impl, cfg.Seed, cfg.Mode, cfg.Expect = impl.Name, seed, workloads.ModeNone, "valid"
	cfg.TTL, cfg.Duration, cfg.Clients, cfg.Locks = o.TTL, o.Duration, o.Clients, 1
	// The contended workload of the fault runs (Work, Retry); the timed
	// runs and the reentrancy probe below keep the tight retry.
	cfg.Think, cfg.Work, cfg.WorkMin, cfg.Retry, cfg.Backoff = 0, Work, 0, Retry, workloads.BackoffUniform
	cfg.Interval, cfg.Quiet, cfg.MaxCriticalSections, cfg.Faults = time.Second, time.Second, 0, nil
	cfg.FaultSettings = cfg.FaultSettings.With(nemesis.Window.Is(2*time.Second), nemesis.Down.Is(time.Second),
		nemesis.Pause.Is(4*o.TTL), nemesis.ClockBump.Is(0), nemesis.PausePoint.Is(workloads.PointAfterAcquire),
		nemesis.KillHolder.Is(false), nemesis.Partition.Is(nil))
	name := string(c)
	switch p {
	case ProbePerf1:
		cfg.Clients, cfg.Duration, cfg.MaxCriticalSections = 1, min(o.Duration, PerfTime), PerfSections
		cfg.Work, cfg.Retry = 0, PerfRetry
		name = string(ProbePerf1)
	case ProbePerf8:
		cfg.Clients, cfg.Duration, cfg.MaxCriticalSections = 8, min(o.Duration, PerfTime), PerfSections
		cfg.Work, cfg.Retry = 0, PerfRetry
		name = string(ProbePerf8)
	case ProbeDeadlock:
		cfg.Faults = []string{"kill-client"}
		nemesis.KillHolder.Set(&cfg.FaultSettings, true)
		name = "deadlock"
	case ProbeReentrant:
		cfg.Clients, cfg.Work, cfg.Retry, name = 2, 0, PerfRetry, "reentrancy"
	default:
		cfg.Faults = Faults(c, impl)
		switch c {
		case ClassClientPauseFenced:
			cfg.Faults, cfg.Mode = Faults(ClassClientPause, impl), workloads.ModeFenced
		case ClassNone:
			cfg.Clients = 8
		case ClassKillRestart:
			// A fault must have a chance to matter: a holder's critical
			// section outlasts the node's restart, so that a lock the
			// restart lost is granted again while its holder still works,
			// and the lease outlasts the section, so that only the fault
			// can end it early.
			down := nemesis.Down.Of(cfg.FaultSettings)
			cfg.Work = down * 3 / 2
			if impl.Nodes == 1 {
				// The one node is the lock service: nothing is granted
				// while it is down, so only a holder still working when it
				// is back can meet the next holder. Every section lasts
				// longer than the restart (the node down, then its start),
				// and the run is long enough for a few of them.
				cfg.WorkMin, cfg.Work = OneNodeWork(down)
				cfg.Duration = max(cfg.Duration, OneNodeKillRestartTime)
			}
			cfg.TTL = max(cfg.TTL, 2*cfg.Work)
		}
	}
	if !backend.HasPersistence(impl.Backend) {
		// --persistence is the durability of the backends that have it;
		// the others have one way to keep data.
		cfg.Persistence = ""
	}
	cfg.Name = fmt.Sprintf("matrix-%s-%s", impl.Name, name)
	cmd := []string{"locktest run --impl " + impl.Name}
	if cfg.Persistence != "" {
		cmd = append(cmd, "--persistence "+cfg.Persistence)
	}
	if len(cfg.Faults) > 0 {
		cmd = append(cmd, "--faults "+strings.Join(cfg.Faults, ","))
	}
	cfg.ClusterParams, cfg.ImplParams = o.DeploymentFor(impl)
	cmd = append(cmd, deploymentArgs(cfg)...)
	cmd = append(cmd, fmt.Sprintf("--clients %d --ttl %s --time %s --seed %d --resource %s --retry %s --backoff uniform",
		cfg.Clients, cfg.TTL, cfg.Duration, seed, cfg.Mode, cfg.Retry))
	// The fault settings the matrix sets, on the line only where the
	// run's faults read them: `locktest run` refuses the others.
	for _, fl := range [][2]string{{"interval", "1s"}, {"window", "2s"}, {"down", "1s"}, {"quiet-time", "1s"}, {"pause", nemesis.Pause.Of(cfg.FaultSettings).String()}} {
		if run.ChangesSomething(cfg, fl[0]) {
			cmd = append(cmd, "--"+fl[0]+" "+fl[1])
		}
	}
	if cfg.MaxCriticalSections > 0 {
		cmd = append(cmd, fmt.Sprintf("--max-sections %d", cfg.MaxCriticalSections))
	}
	if cfg.Work > 0 {
		cmd = append(cmd, "--work "+cfg.Work.String())
	}
	if cfg.WorkMin > 0 {
		cmd = append(cmd, "--work-min "+cfg.WorkMin.String())
	}
	if nemesis.KillHolder.Of(cfg.FaultSettings) {
		cmd = append(cmd, "--kill-holder")
	}
	if StopsAtFirstViolation(p, c, impl.Nodes) {
		cfg.StopOnViolation = true
		cmd = append(cmd, "--stop-on-violation")
	}
	cfg.Command = strings.Join(cmd, " ")
	return Job{Impl: impl.Name, Probe: p, Class: c, Seed: seed, Config: cfg}
}

// measured returns the impls of o's matrix, as Plan picks them, and its
// external clients, as their manifests describe them.
func (o Options) measured() []impls.Impl {
	names := o.Impls
	if len(names) == 0 && len(o.ExternalClients) == 0 {
		names = slices.DeleteFunc(impls.Names(), func(n string) bool { return LeftOut(n) != "" })
	}
	var out []impls.Impl
	for _, n := range names {
		if i, err := impls.Lookup(n); err == nil {
			out = append(out, i)
		}
	}
	for _, n := range o.ExternalClients {
		c := run.Config{Client: n}
		if i, err := c.ImplInfo(); err == nil {
			i.Name = n
			out = append(out, i)
		}
	}
	return out
}

// DeploymentFor returns the params of a deployment (Options.Base) that a
// job of impl gets: the cluster params (--cluster-opt) that impl's backend
// reads, and no other; the impl params (--impl-opt), which checkDeployment
// allows only in a matrix of one impl or client. The provider's settings
// (the docker provider's --image) reach every job as Base has them.
func (o Options) DeploymentFor(impl impls.Impl) (cluster, implParams map[string]string) {
	reads, _ := backend.Params(impl.Backend)
	for k, v := range o.Base.ClusterParams {
		if slices.Contains(reads, k) {
			if cluster == nil {
				cluster = map[string]string{}
			}
			cluster[k] = v
		}
	}
	return cluster, maps.Clone(o.Base.ImplParams)
}

// checkDeployment refuses a setting of a deployment that no job of o's
// matrix reads, as `locktest run` refuses a flag that changes nothing: a
// cluster param that no backend of the matrix reads (or a value the
// backend refuses), an image of a backend the matrix does not run, and
// impl params in a matrix of several impls, since locktest keeps no list
// of the params each impl reads (give one --impl, or run each impl with
// its params on its own).
func (o Options) checkDeployment() error {
	ms := o.measured()
	var backends []string
	for _, i := range ms {
		if !slices.Contains(backends, i.Backend) {
			backends = append(backends, i.Backend)
		}
	}
	slices.Sort(backends)
	for _, k := range slices.Sorted(maps.Keys(o.Base.ClusterParams)) {
		var readers []string
		for _, b := range backends {
			if reads, _ := backend.Params(b); slices.Contains(reads, k) {
				readers = append(readers, b)
			}
		}
		if len(readers) == 0 {
			return fmt.Errorf("--cluster-opt %s changes nothing in this matrix: no backend of its impls (%s) reads it (see docs/backends.md)", k, strings.Join(backends, ", "))
		}
	}
	for _, i := range ms {
		cluster, _ := o.DeploymentFor(i)
		if _, err := backend.NewLayout(i.Backend, i.Nodes, cluster); err != nil {
			return fmt.Errorf("--cluster-opt: %v", err)
		}
	}
	for _, b := range slices.Sorted(maps.Keys(o.Base.ProviderSettings.Pairs("image"))) {
		if !slices.Contains(backends, b) && slices.Contains(backend.All(), b) {
			return fmt.Errorf("--image %s changes nothing in this matrix: none of its impls runs %s (they run %s)", b, b, strings.Join(backends, ", "))
		}
	}
	if len(o.Base.ImplParams) > 0 && len(ms) != 1 {
		return fmt.Errorf("--impl-opt needs a matrix of one impl or client (--impl NAME): it would reach %d impls, and locktest keeps no list of the params each impl reads, so it cannot tell which of them it changes", len(ms))
	}
	return nil
}

// deploymentArgs are the flags of `locktest run` that give a job's run
// the settings of its deployment: its provider and the provider's
// settings, its cluster params and its impl params, in that order.
func deploymentArgs(cfg run.Config) []string {
	var out []string
	a := cfg.ProviderArgs()
	for i := 0; i < len(a); i++ {
		if i+1 < len(a) && !strings.HasPrefix(a[i+1], "--") {
			out = append(out, a[i]+" "+a[i+1])
			i++
			continue
		}
		out = append(out, a[i])
	}
	for _, m := range []struct {
		flag string
		kv   map[string]string
	}{{"--cluster-opt", cfg.ClusterParams}, {"--impl-opt", cfg.ImplParams}} {
		for _, k := range slices.Sorted(maps.Keys(m.kv)) {
			out = append(out, m.flag+" "+k+"="+m.kv[k])
		}
	}
	return out
}
