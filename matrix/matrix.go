package matrix

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// Result is one job's stored run and what the matrix measured in it.
type Result struct {
	Job Job
	// Dir is the stored run's folder; empty when the run did not start.
	Dir string
	// Err says why the run did not start or could not be read (a missing
	// server, a port in use); the job's cells are then inconclusive.
	Err     string
	Results runstore.Results
	// Elapsed is how long the job took, start-up and checking included.
	Elapsed time.Duration

	// Safety is what the run says about mutual exclusion (ClassifySafety).
	Safety Safety
	// P50 and P99 are the acquire latency percentiles in ms, NaN without
	// an acquire; Acquired counts the acquire oks.
	P50, P99 float64
	Acquired int
	// Throughput is critical sections per second (see Throughput), Tokens
	// the acquires that carried a fencing token.
	Throughput float64
	Tokens     int
	// Recoveries are the holder kills of the run (see Recoveries) and
	// Stuck the liveness checker's stuck locks.
	Recoveries []Recovery
	Stuck      int
	// Avail compares acquires while kill-node kept a node down with the
	// rest of the run.
	Avail Availability
	// Restart is, for a kill/restart safety run, which restarts came while
	// a holder still worked, and the lengths of the holds it tested (see
	// MeasureRestarts); nil for other runs.
	Restart *RestartExposure
	// Takeovers are the holds of the run that another process's hold began
	// inside (checker.HoldNotices), with their dual-holder windows.
	Takeovers []Takeover
	// Fenced is, for a run of ClassClientPauseFenced, whether the lock
	// broke in it and what the fenced store rejected (its Safety is the
	// resource's: ClassifyFenced); nil for other runs.
	Fenced *FencedRun
	// Reentrancy is the reentrancy probe's finding (ProbeReentrant jobs
	// only), and ProbeDir the folder of its cluster's files.
	Reentrancy *Reentrancy
	ProbeDir   string
}

// Report is the path of the run's report.html, or "" without a run.
func (r Result) Report() string {
	if r.Dir == "" {
		return ""
	}
	return filepath.Join(r.Dir, runstore.ReportFile)
}

// Measure computes what the matrix needs of one stored run.
func Measure(job Job, dir string, res runstore.Results, h history.History) Result {
	r := Result{Job: job, Dir: dir, Results: res, Safety: ClassifySafety(res).SurvivalTimes(res, h)}
	r.P50, r.P99, r.Acquired = Latency(h)
	r.Throughput = Throughput(h)
	r.Tokens = Tokens(h)
	r.Recoveries = Recoveries(h)
	r.Stuck = StuckLocks(res)
	if job.Probe == ProbeSafety && job.Class == ClassClientPauseFenced {
		s, f := ClassifyFenced(res)
		r.Safety, r.Fenced = s.SurvivalTimes(res, h), &f
	} else if job.Probe == ProbeSafety {
		// Only the mutex runs make the dual-holder column.
		r.Takeovers = Takeovers(h)
	}
	if k, ok := history.FaultNamed(killRestartFault); ok {
		r.Avail = MeasureAvailability(h, k.InjectOp(), k.Heal)
	}
	if job.Probe == ProbeSafety && job.Class == ClassKillRestart && h != nil {
		x := MeasureRestarts(h)
		r.Restart = &x
		r.Safety = r.Safety.needsHolderAcrossRestart(res.Run.Nodes, x)
	}
	r.Safety = r.Safety.unlessTheMachineStalled(res.Run)
	return r
}

// unlessTheMachineStalled returns s for a run whose stall watch saw what
// run: a violation whose first op came within a lease of a machine stall
// of half a lease or more (the stall the run itself warns of: its lease
// may break with no fault) is inconclusive, not a violation, since the
// run cannot tell the lock's fault from the machine's. A stall counts
// when it overlaps the lease before the first op and the lease after
// (from TTL + its length before the op to TTL after). A 5-seed matrix at
// 11 runs at once once broke a Redis Cluster lease in the fault-free
// column: its holder wrote 24 ms after its lease ended, 524 ms after its
// grant with at most 10 ms of work, and a 419 ms stall began 270 ms
// before the grant. Other runs, and runs whose times are unknown, are
// left as they are. The anomalies stay in Kinds.
func (s Safety) unlessTheMachineStalled(run runstore.RunInfo) Safety {
	ttl, _ := time.ParseDuration(run.TTL)
	if !s.Violated || s.FirstViolation < 0 || ttl <= 0 || run.Stalls == nil {
		return s
	}
	first := time.Duration(s.FirstViolation * float64(time.Second))
	for _, st := range run.Stalls.Top {
		at, err1 := time.ParseDuration(st.At)
		length, err2 := time.ParseDuration(st.Length)
		if err1 != nil || err2 != nil || !runstore.StallMayBreakLease(length, ttl) {
			continue
		}
		if at+length >= first-ttl && at <= first+ttl {
			s.Violated, s.Conclusive = false, false
			s.Reason = fmt.Sprintf("the machine stalled %s at %s, within a lease (%s) of the violation's first op at %s: "+
				"a lease may break with no fault when its holder is not run for half of it, so the run cannot tell the lock's fault from the machine's (%s)",
				length, st.At, ttl, first.Round(time.Millisecond), reports.KindsText(s.Kinds))
			return s
		}
	}
	return s
}

// NoHolderAcrossRestart is why a kill/restart run of a one-node backend
// without a violation is inconclusive when no restart came while a holder
// still worked.
const NoHolderAcrossRestart = "no restart of the node came while a client still held the lock it was granted before the kill: " +
	"the one node is the lock service, so only such a holder can meet the next one, and the run could not show a violation"

// needsHolderAcrossRestart returns s for a kill/restart run of a backend of
// nodes nodes whose restarts x measured: a run of a one-node backend that
// showed no violation is conclusive only when a holder lived through one
// of its restarts (a holder done before the node was back had nothing to
// lose). A violation, and a run of several nodes, are left as they are.
func (s Safety) needsHolderAcrossRestart(nodes int, x RestartExposure) Safety {
	if nodes == 1 && s.Conclusive && !s.Violated && x.Across == 0 {
		s.Conclusive, s.Reason = false, NoHolderAcrossRestart
	}
	return s
}

// Execute runs the jobs, as many at a time as pace allows, and measures
// each as it finishes; done, if not nil, is called after each job, one
// call at a time, with how many have finished. The jobs whose figures are
// timings (Timed) run alone, as runs side by side would share the cores
// and distort each other's timing. The seeds of a cell are sampled
// sequentially (see Decided): a job runs only once the earlier seeds of
// its cell have finished, and not at all when they decided the cell; the
// jobs left out so are counted in skipped, and in the count done is
// given, so that it reaches len(jobs). A run that fails to start is
// tried once more; if it fails again its job gives a Result with Err, and
// the matrix goes on. Once the timed jobs have run, the others start row
// by row, the rows whose timed runs took longest first
// (slowestRowsFirst). The results are in the order of jobs. Execute stops
// starting jobs when ctx is done and returns the results so far with
// ctx's error.
func Execute(ctx context.Context, jobs []Job, pace Pace, done func(i int, r Result)) (results []Result, skipped int, err error) {
	return execute(ctx, jobs, pace, runJob, done)
}

// execute is Execute with the function that runs one job.
func execute(ctx context.Context, jobs []Job, pace Pace, runOne func(context.Context, Job) Result, done func(i int, r Result)) (results []Result, skipped int, err error) {
	type finished struct {
		i int
		r Result
	}
	fin := make(chan finished)
	got := make([]*Result, len(jobs))
	state := make([]int, len(jobs)) // 0 pending, 1 running, 2 finished, 3 skipped
	const pending, running, over, left = 0, 1, 2, 3
	// earlier returns, for job i, the results of the earlier seeds of its
	// cell, and whether all of them have finished.
	earlier := func(i int) ([]Result, bool) {
		var rs []Result
		k := keyOf(jobs[i])
		for j := range jobs[:i] {
			if keyOf(jobs[j]) != k || jobs[j].Seed >= jobs[i].Seed {
				continue
			}
			switch state[j] {
			case pending, running:
				return nil, false
			case over:
				rs = append(rs, *got[j])
			}
		}
		return rs, true
	}
	// The untimed jobs are dispatched row by row, the rows whose timed
	// runs took longest first (see slowestRowsFirst); until every timed
	// job has run, in plan order.
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	timedLeft := 0
	for _, j := range jobs {
		if j.Timed() {
			timedLeft++
		}
	}
	rowTime := map[string]time.Duration{}
	inFlight, alone, n := 0, false, 0
	start := func(i int) {
		state[i] = running
		inFlight++
		alone = jobs[i].Timed()
		go func() {
			t := time.Now()
			r := runOne(ctx, jobs[i])
			r.Elapsed = time.Since(t)
			fin <- finished{i, r}
		}()
	}
	// dispatch starts what may start now, in plan order: a job whose cell
	// is decided is left out, one whose cell still runs an earlier seed
	// waits, and a timed job waits for the runs in flight to end and
	// holds back the jobs after it until it has run.
	dispatch := func() {
		if ctx.Err() != nil || alone {
			return
		}
		for _, i := range order {
			if state[i] != pending || inFlight >= pace.Limit() {
				continue
			}
			j := jobs[i]
			if Sequential(j.Probe) {
				rs, ready := earlier(i)
				if !ready {
					continue
				}
				if ok, _ := Decided(j.Probe, rs); ok {
					state[i] = left
					skipped++
					n++
					continue
				}
			}
			if j.Timed() {
				if inFlight == 0 {
					start(i)
				}
				return
			}
			start(i)
		}
	}
	for {
		dispatch()
		if inFlight == 0 {
			break
		}
		f := <-fin
		inFlight--
		alone = false
		state[f.i], got[f.i] = over, &f.r
		if jobs[f.i].Timed() {
			rowTime[jobs[f.i].Impl] += f.r.Elapsed
			if timedLeft--; timedLeft == 0 {
				slowestRowsFirst(jobs, order, rowTime)
			}
		}
		pace.Finished(f.r, inFlight)
		n++
		if done != nil {
			done(n, f.r)
		}
	}
	out := make([]Result, 0, n)
	for _, r := range got {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, skipped, ctx.Err()
}

// slowestRowsFirst reorders order, the indices of jobs in the order
// Execute dispatches them, so that the untimed jobs of the rows whose
// timed runs took longest (rowTime, by impl) come first, each row's in
// its plan order, and rows of equal time in theirs. A row's timed runs
// are its cluster's start from nothing and its slowest acquires, the
// best measure the matrix has of how long its other runs take; and the
// row dispatched last makes the matrix's end, when its cells' seeds run
// one after the other with little beside them (ZooKeeper's, the last row
// in name order, whose runs took 16 to 24 s, made the last 90 s of a
// 5-seed matrix at 7 runs at once). It is called once every timed job
// has run, so where the timed jobs go does not matter: they sort with
// their rows. The results stay in plan order.
func slowestRowsFirst(jobs []Job, order []int, rowTime map[string]time.Duration) {
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(rowTime[jobs[b].Impl], rowTime[jobs[a].Impl])
	})
}

// Timed reports whether the job's figures are timings, which a run beside
// it would distort, so that it runs alone: the fault-free runs with 1 and
// with 8 clients (ProbePerf1, ProbePerf8), whose rates and latencies the
// matrix shows. The fault-free safety runs test mutual exclusion only and
// run beside others.
func (j Job) Timed() bool {
	return j.Seed == 1 && (j.Probe == ProbePerf1 || j.Probe == ProbePerf8)
}

func runJob(ctx context.Context, j Job) Result {
	if j.Probe == ProbeReentrant {
		dir := filepath.Join(j.Config.StoreDir, j.Config.Name, time.Now().Format("20060102T150405.000"))
		re := ProbeReentrancy(ctx, j.Config, dir)
		if err := writeProbe(dir, re); err != nil && j.Config.Logger != nil {
			j.Config.Logger.Warn("reentrancy probe: keep its finding", "impl", j.Impl, "err", err)
		}
		return Result{Job: j, Reentrancy: &re, ProbeDir: dir}
	}
	o, err := run.Run(ctx, j.Config)
	var se *run.SetupError
	if errors.As(err, &se) && ctx.Err() == nil {
		// A server that failed to start once (a port taken in the
		// meantime, a slow disk) gets one more chance; a missing binary
		// fails again at once.
		if j.Config.Logger != nil {
			j.Config.Logger.Warn("run did not start; trying once more", "job", j.Label(), "err", err)
		}
		o, err = run.Run(ctx, j.Config)
	}
	if err != nil {
		return Result{Job: j, Err: err.Error()}
	}
	h, err := o.History()
	if err != nil {
		return Result{Job: j, Dir: o.Dir, Results: o.Results, Err: "stored history: " + err.Error()}
	}
	return Measure(j, o.Dir, o.Results, h)
}

// Column keys of the matrix.
const (
	ColDeadlock   = "deadlock"
	ColDualHolder = "dual-holder"
	ColNodeLoss   = "node-loss"
	ColFencing    = "fencing"
	ColReentrant  = "reentrant"
	ColBlocking   = "blocking"
	ColLatency1   = "latency-1"
	ColRate1      = "rate-1"
	ColLatency8   = "latency-8"
	ColRate8      = "rate-8"
)

// SafetyColumn is the column key of mutual exclusion under class c.
func SafetyColumn(c Class) string { return "mutex-" + string(c) }

var classTitles = map[Class]string{
	ClassNone: "no fault", ClassClientPause: "client pause", ClassNodePause: "node pause",
	ClassKillRestart: "kill/restart", ClassPartition: "partition", ClassClock: "clock jump",
	ClassClientClock: "client clock",
}

var classDocs = map[Class]string{
	ClassNone:        "no fault, 8 clients",
	ClassClientPause: "pause-client: a holder frozen (SIGSTOP) right after its acquire for 4 TTLs",
	ClassNodePause:   "pause-node: one node frozen (SIGSTOP) for the fault window",
	ClassKillRestart: "kill-node: one node killed (SIGKILL) and restarted with its data dir after 1 s",
	ClassPartition:   "a partition: isolate (one node cut off) for 2–4 nodes, halves for 5 or more, client-isolate (one client cut from the node) for one node",
	ClassClock:       "clock-bump (one node's wall clock jumps by 2·TTL, forward or back) and clock-strobe (it flips between its time and 2·TTL ahead every 10ms), through the LD_PRELOAD clock shim",
	ClassClientClock: "clock-skew-client: one worker's wall clock, as the impls that compute expiry or a token from it read it, skewed by 2·TTL, forward or back, for the fault window",
}

// ClassTitle and ClassDoc are a fault class's column title and what it
// injects, in words; "" for a name that is no class of Classes.
func ClassTitle(c Class) string { return classTitles[c] }

// ClassDoc is what class c injects, naming its faults.
func ClassDoc(c Class) string { return classDocs[c] }

// ClassFaults are every fault class c may inject, whatever the impl (the
// partition class picks one of its faults by the cluster's size).
func ClassFaults(c Class) []string {
	if c == ClassPartition {
		return []string{PartitionFault(2), PartitionFault(5), PartitionFault(1)}
	}
	return Faults(c, impls.Impl{})
}

// Columns returns the matrix's columns for the fault classes given.
func Columns(classes []Class) []reports.MatrixColumn {
	var cols []reports.MatrixColumn
	if !slices.Contains(classes, ClassNone) {
		classes = append([]Class{ClassNone}, classes...)
	}
	for _, c := range classes {
		if c == ClassClientPauseFenced {
			continue // not a mutex column: the saved-by-fencing one, after the mutex columns
		}
		title, doc := classTitles[c], classDocs[c]
		if s, ok := nemesis.Lookup(string(c)); ok && title == "" {
			title, doc = s.Name, s.Name+": "+s.Doc
		}
		stop := " Each run stops 1s + the TTL after its first violation (--stop-on-violation)."
		switch c {
		case ClassKillRestart:
			stop = " The runs of a one-node backend stop 1s + the TTL after their first violation (--stop-on-violation); those of several nodes run their whole time, as they also measure the availability with a node down."
		}
		cols = append(cols, reports.MatrixColumn{Key: SafetyColumn(c), Title: "mutex: " + title,
			Doc: "mutual exclusion under " + doc + ", resource mode none: the share of runs with a violation (" +
				strings.Join(checker.SafetyKinds, ", ") + "), with its 95% Wilson interval." + stop})
	}
	if slices.Contains(classes, ClassClientPauseFenced) {
		cols = append(cols, fencedColumn)
	}
	return append(cols,
		reports.MatrixColumn{Key: ColDeadlock, Title: "deadlock freedom",
			Doc: "kill-client with --kill-holder: a worker is SIGKILLed right after its acquire; the time from its death until another process's next acquire ok of the lock (median and max over the kills), or stuck when no one got it again."},
		reports.MatrixColumn{Key: ColDualHolder, Title: "dual-holder window",
			Doc: "over the mutex runs of every class, for each hold that another client was granted the lock inside: the time from that grant (its acquire ok) to the moment the first holder stopped believing it held the lock, its lost-lock notice or the end of its hold, whichever came first; the median and the longest, and how many holders were told before their hold ended. n/a for an impl that sends no notices: its holder learns of a loss only when a call fails."},
		reports.MatrixColumn{Key: ColNodeLoss, Title: "one node lost",
			Doc: "availability while kill-node keeps one node down (multi-node backends only): critical sections per second and the share of acquires that succeeded during the fault, against the rest of the run; tolerant (yes) when the rate during the fault is at least half the rate without."},
		reports.MatrixColumn{Key: ColFencing, Title: "fencing token",
			Doc: "whether a lease carries a fencing token and where it comes from (the impl's registration), with the tokens seen in the fault-free run and any token that went back under a fault."},
		reports.MatrixColumn{Key: ColReentrant, Title: "reentrant",
			Doc: "whether the holder can take the lock again with the same client, measured against a real server: client A acquires twice; a second client B then tries while A holds both leases, and again after A released the second one (so a second acquire that silently dropped the first, or a nesting that one release undoes, shows). Marked documented where the probe could not run."},
		reports.MatrixColumn{Key: ColBlocking, Title: "blocking wait",
			Doc: "whether an acquire of a held lock waits for it to be freed, and how (the impl's registration)."},
		reports.MatrixColumn{Key: ColLatency1, Title: "acquire p50/p99, 1 client",
			Doc: "acquire latency, invoke to ok, from the history of a fault-free run with one client."},
		reports.MatrixColumn{Key: ColRate1, Title: "cs/s, 1 client",
			Doc: "critical sections (acquire, read, write, release) per second over the workload of that run."},
		reports.MatrixColumn{Key: ColLatency8, Title: "acquire p50/p99, 8 clients",
			Doc: "acquire latency, invoke to ok, in the fault-free run with 8 contending clients (a blocking acquire's wait for the lock is part of it)."},
		reports.MatrixColumn{Key: ColRate8, Title: "cs/s, 8 clients",
			Doc: "critical sections per second in that run."},
	)
}

// Aggregate builds the matrix of the results: one row per impl, in the
// order the impls first appear, with the columns of classes, and what the
// columns caught of the bugs of the seeded impls among them (Detect). It
// reads only the results and the impls' registrations.
func Aggregate(header reports.MatrixHeader, classes []Class, results []Result) reports.Matrix {
	planned := header.Seeds
	if len(classes) == 0 {
		classes = Classes
	}
	m := reports.Matrix{SchemaVersion: reports.MatrixSchemaVersion, Header: header, Columns: Columns(classes)}
	for _, r := range results {
		m.Header.Versions = m.Header.Versions.Merge(r.Results.Run.Versions)
	}
	var order []string
	by := map[string][]Result{}
	for _, r := range results {
		if _, ok := by[r.Job.Impl]; !ok {
			order = append(order, r.Job.Impl)
		}
		by[r.Job.Impl] = append(by[r.Job.Impl], r)
	}
	for _, name := range order {
		impl, err := impls.Lookup(name)
		if err != nil {
			// An external client: what its runs recorded of it.
			impl = impls.Impl{Name: name}
			client := false
			for _, r := range by[name] {
				if ri := r.Results.Run; ri.Client != nil {
					impl.Backend, impl.Nodes, impl.Doc = ri.Backend, ri.Nodes, ri.ImplDoc
					impl.Fenced, impl.Blocking, client = ri.Client.Fenced, ri.Client.Blocking, true
					impl.Wait = fmt.Sprintf("as %s %s said of itself in the client protocol", ri.Client.Library, ri.Client.Version)
					break
				}
			}
			rw := row(impl, classes, by[name], planned)
			if client {
				rw.Cells[ColReentrant] = reports.MatrixCell{Status: reports.StatusNA,
					Reason: "an external client: the reentrancy probe drives a Go impl's client directly"}
			}
			m.Rows = append(m.Rows, rw)
			continue
		}
		m.Rows = append(m.Rows, row(impl, classes, by[name], planned))
	}
	m.Seeded = Detect(slices.DeleteFunc(slices.Clone(classes), func(c Class) bool { return c == ClassClientPauseFenced }), results)
	return m
}

// row builds impl's row from its results rs, of a matrix that planned
// the seeds planned for each cell (0: unknown, nothing said of stops).
func row(impl impls.Impl, classes []Class, rs []Result, planned int) reports.MatrixRow {
	r := reports.MatrixRow{Impl: impl.Name, Backend: impl.Backend, Nodes: impl.Nodes, Doc: impl.Doc, Cells: map[string]reports.MatrixCell{}}
	for _, x := range rs {
		r.Versions = r.Versions.Merge(x.Results.Run.Versions)
	}
	pick := func(p Probe, c Class) []Result {
		var out []Result
		for _, x := range rs {
			if x.Job.Probe == p && x.Job.Class == c {
				out = append(out, x)
			}
		}
		return out
	}
	for _, c := range Classes {
		if !slices.Contains(classes, c) && c != ClassNone {
			continue
		}
		r.Cells[SafetyColumn(c)] = stopped(safetyCell(pick(ProbeSafety, c)), ProbeSafety, pick(ProbeSafety, c), planned)
	}
	if slices.Contains(classes, ClassClientPauseFenced) {
		f := pick(ProbeSafety, ClassClientPauseFenced)
		r.Cells[ColFenced] = stopped(fencedCell(impl.Fenced, f), ProbeSafety, f, planned)
	}
	r.Cells[ColDeadlock] = stopped(deadlockCell(pick(ProbeDeadlock, ClassNone)), ProbeDeadlock, pick(ProbeDeadlock, ClassNone), planned)
	var safety []Result
	for _, x := range rs {
		if x.Job.Probe == ProbeSafety && x.Job.Class != ClassClientPauseFenced {
			safety = append(safety, x)
		}
	}
	r.Cells[ColDualHolder] = dualHolderCell(impl, safety)
	r.Cells[ColNodeLoss] = nodeLossCell(impl, slices.Contains(classes, ClassKillRestart), pick(ProbeSafety, ClassKillRestart))
	r.Cells[ColFencing] = fencingCell(impl, pick(ProbeSafety, ClassNone), rs)
	r.Cells[ColReentrant] = reentrantCell(impl, pick(ProbeReentrant, ClassNone))
	r.Cells[ColBlocking] = blockingCell(impl)
	r.Cells[ColLatency1], r.Cells[ColRate1] = perfCells(timed(pick(ProbePerf1, ClassNone)))
	perf8 := timed(pick(ProbePerf8, ClassNone))
	if len(perf8) == 0 {
		// A matrix stored before the 8-client timing had a run of its own
		// took it from seed 1 of the fault-free safety run, which ran
		// alone and its whole time.
		perf8 = slices.DeleteFunc(pick(ProbeSafety, ClassNone), func(r Result) bool { return r.Job.Seed != 1 })
	}
	r.Cells[ColLatency8], r.Cells[ColRate8] = perfCells(perf8)
	return r
}

// timed returns the runs of rs whose figures are timings (Job.Timed).
func timed(rs []Result) []Result {
	return slices.DeleteFunc(slices.Clone(rs), func(r Result) bool { return !r.Job.Timed() })
}

// stopped returns cell c of the runs rs of probe p, with what the
// sequential rule said when it stopped the cell before the planned seeds.
func stopped(c reports.MatrixCell, p Probe, rs []Result, planned int) reports.MatrixCell {
	if t := stoppedText(p, rs, planned); t != "" {
		c.Stopped = t
		c.Reason += "; " + t
	}
	return c
}

func links(rs []Result) []reports.MatrixLink {
	var out []reports.MatrixLink
	for _, r := range rs {
		if p := r.Report(); p != "" {
			out = append(out, reports.MatrixLink{Label: fmt.Sprintf("seed %d", r.Job.Seed), Report: p})
		}
	}
	return out
}

// whyNot collects the distinct reasons of results that showed nothing.
func whyNot(rs []Result, reason func(Result) string) string {
	var out []string
	for _, r := range rs {
		why := r.Err
		if why == "" {
			why = reason(r)
		}
		if why != "" && !slices.Contains(out, why) {
			out = append(out, why)
		}
	}
	return strings.Join(out, "; ")
}

// safetyTally sorts the runs of a safety cell (or the saved-by-fencing
// one): the conclusive runs (n of them), the k of those that showed a
// violation with the count of each anomaly kind, the n/a runs and those
// that could not tell (a run that did not start among them), each list in
// the runs' order.
type safetyTally struct {
	n, k                         int
	kinds                        map[string]int
	conclusive, na, inconclusive []Result
}

func tallySafety(rs []Result) safetyTally {
	t := safetyTally{kinds: map[string]int{}}
	for _, r := range rs {
		switch {
		case r.Err != "":
			t.inconclusive = append(t.inconclusive, r)
		case r.Safety.Conclusive:
			t.n++
			t.conclusive = append(t.conclusive, r)
			if r.Safety.Violated {
				t.k++
				for kind, c := range r.Safety.Kinds {
					t.kinds[kind] += c
				}
			}
		case r.Safety.NA:
			t.na = append(t.na, r)
		default:
			t.inconclusive = append(t.inconclusive, r)
		}
	}
	return t
}

// safetyCell aggregates the mutual-exclusion runs of one class over its
// seeds: violated in k of the n conclusive runs, held in none of them, or
// n/a or inconclusive with the reasons when no run was conclusive.
func safetyCell(rs []Result) reports.MatrixCell {
	cell := reports.MatrixCell{Links: links(rs)}
	if len(rs) == 0 {
		cell.Status, cell.Reason = reports.StatusNotRun, "the class was not in this matrix"
		return cell
	}
	t := tallySafety(rs)
	k, n, kinds, na, inconclusive := t.k, t.n, t.kinds, t.na, t.inconclusive
	faults, same, effective, unknownEffective := 0, 0, 0, false
	for _, r := range t.conclusive {
		faults += r.Safety.Faults
		effective += max(r.Safety.Effective, 0)
		unknownEffective = unknownEffective || r.Safety.Effective < 0
		same += r.Safety.SameHolderTokens
	}
	reason := func(r Result) string { return r.Safety.Reason }
	switch {
	case n == 0 && len(na) > 0 && len(inconclusive) == 0:
		cell.Status, cell.Reason = reports.StatusNA, whyNot(na, reason)
		return cell
	case n == 0:
		cell.Status, cell.Reason = reports.StatusInconclusive, whyNot(append(inconclusive, na...), reason)+restartText(rs)
		return cell
	}
	ci := stats.Wilson(k, n)
	cell.Runs, cell.Conclusive, cell.Violations, cell.Lo, cell.Hi = len(rs), n, k, ci.Lo, ci.Hi
	cell.Survival = reports.NewSurvival(survivalSample(rs))
	cell.Value = fmt.Sprintf("%d/%d runs", k, n)
	if k > 0 {
		cell.Status = reports.StatusViolated
		cell.Reason = fmt.Sprintf("violation rate %d/%d runs (95%% interval %s–%s), %d faults applied: %s",
			k, n, reports.Percent(ci.Lo), reports.Percent(ci.Hi), faults, reports.KindsText(kinds))
	} else {
		cell.Status = reports.StatusHeld
		applied := fmt.Sprintf("%d faults applied", faults)
		if faults > 0 && !unknownEffective {
			applied += fmt.Sprintf(", %d of them in force while a client held the lock", effective)
		}
		cell.Reason = fmt.Sprintf("no violation in %d run(s) with %s; the violation rate is at most %s at 95%% confidence, not zero",
			n, applied, reports.Percent(ci.Hi))
	}
	if same > 0 {
		cell.Reason += fmt.Sprintf("; not counted: %d duplicate token(s) granted to one process only (see the fencing token column)", same)
	}
	if len(inconclusive)+len(na) > 0 {
		cell.Reason += fmt.Sprintf("; %d more run(s) inconclusive: %s", len(inconclusive)+len(na), whyNot(append(inconclusive, na...), reason))
	}
	cell.Reason += restartText(rs)
	if t := cell.Survival.Text(); t != "" {
		cell.Reason += "; " + t
	}
	return cell
}

// survivalSample returns the runs of rs as survival observations, by
// reports.RunObservation's rule: a violated run fails at its first
// violation (at the end of its workload where that time is unknown), a
// clean one is censored at the end of its workload. Runs that failed to
// run, are inconclusive or kept no workload time (measured without their
// history) are left out.
func survivalSample(rs []Result) []stats.Observation {
	var out []stats.Observation
	for _, r := range rs {
		s := r.Safety
		if o, ok := reports.RunObservation(r.Err == "" && s.Conclusive, s.Violated, s.FirstViolation, s.Workload); ok {
			out = append(out, o)
		}
	}
	return out
}

// restartText says, for the kill/restart runs among rs, how many of their
// restarts came while a holder still worked and what holds they tested
// ("; 4 of the 9 restarts came while a holder was still working; holds of
// 2.0–3.1 s (median 2.5 s)"); "" when none of rs was measured so.
func restartText(rs []Result) string {
	restarts, across, measured := 0, 0, false
	var holds []time.Duration
	for _, r := range rs {
		if r.Restart == nil {
			continue
		}
		measured = true
		restarts += r.Restart.Restarts
		across += r.Restart.Across
		holds = append(holds, r.Restart.Holds...)
	}
	if !measured {
		return ""
	}
	slices.Sort(holds)
	out := fmt.Sprintf("; %d of the %d restarts came while a holder was still working", across, restarts)
	if t := HoldsText(holds); t != "" {
		out += "; " + t
	}
	return out
}

// stuckAfter is how long a lock must stay unacquired after its holder's
// death, until the run ended, for the deadlock cell to call it stuck: four
// leases, and at least 2 s.
func stuckAfter(ttl time.Duration) time.Duration { return max(2*time.Second, 4*ttl) }

func ms(d time.Duration) string { return fmtMS(float64(d)/1e6) + " ms" }

// deadlockCell aggregates the holder kills of the deadlock runs.
func deadlockCell(rs []Result) reports.MatrixCell {
	cell := reports.MatrixCell{Links: links(rs)}
	if len(rs) == 0 {
		cell.Status, cell.Reason = reports.StatusNotRun, "no deadlock run"
		return cell
	}
	var after []float64
	stuckKills, stuckLocks, unsure, kills := 0, 0, 0, 0
	var stuckWhy []string
	for _, r := range rs {
		if r.Err != "" {
			continue
		}
		stuckLocks += r.Stuck
		for _, c := range r.Results.Checkers {
			for _, a := range c.Anomalies {
				if a.Kind == checker.KindStuckLock {
					stuckWhy = append(stuckWhy, a.Explanation)
				}
			}
		}
		for _, rec := range r.Recoveries {
			kills++
			switch {
			case rec.Recovered():
				after = append(after, float64(rec.After))
			case rec.Observed >= stuckAfter(r.Job.Config.TTL):
				stuckKills++
				stuckWhy = append(stuckWhy, fmt.Sprintf("p%d died holding %q and no other process acquired it in the %s until the run ended (seed %d)",
					rec.Process, rec.Lock, rec.Observed.Round(time.Millisecond), r.Job.Seed))
			default:
				unsure++
			}
		}
	}
	switch {
	case stuckKills > 0 || stuckLocks > 0:
		cell.Status, cell.Value = reports.StatusStuck, fmt.Sprintf("%d of %d kills", stuckKills, kills)
		if stuckKills == 0 {
			cell.Value = fmt.Sprintf("%d stuck lock(s)", stuckLocks)
		}
		cell.Reason = strings.Join(stuckWhy, "; ")
		return cell
	case len(after) == 0:
		cell.Status = reports.StatusInconclusive
		cell.Reason = whyNot(rs, func(r Result) string {
			if len(r.Recoveries) > 0 {
				return fmt.Sprintf("the run ended less than %s after each holder's death, too soon to tell", stuckAfter(r.Job.Config.TTL))
			}
			if len(r.Results.Problems) > 0 {
				return strings.Join(r.Results.Problems, "; ")
			}
			return "no lock holder was killed"
		})
		return cell
	}
	med, worst := time.Duration(stats.Percentile(after, 50)), time.Duration(slices.Max(after))
	cell.Status, cell.Value = reports.StatusRecovers, "max "+ms(worst)
	cell.Reason = fmt.Sprintf("after %d kill(s) of a holder, another process acquired the lock after %s (median), %s (max)", len(after), ms(med), ms(worst))
	if unsure > 0 {
		cell.Reason += fmt.Sprintf("; %d more kill(s) came too close to the end of the run to tell", unsure)
	}
	return cell
}

// dualHolderCell aggregates the dual-holder windows of the takeovers in
// the safety runs rs of impl: n/a when impl sends no lost-lock notices
// (an external client's runs say whether it does), "no takeover" when no
// hold was taken over, else the longest window with the median and how
// many holders were told before their hold ended.
func dualHolderCell(impl impls.Impl, rs []Result) reports.MatrixCell {
	cell := reports.MatrixCell{}
	notices := impl.Notices != ""
	var ran []Result
	for _, r := range rs {
		notices = notices || r.Results.Run.Notices != ""
		if r.Err == "" {
			ran = append(ran, r)
		}
	}
	switch {
	case !notices:
		cell.Status = reports.StatusNA
		cell.Reason = "the client sends no lost-lock notices: a holder learns of a loss only when a call fails, so a window lasts to the end of its hold (the mutex columns count those overlaps)"
		return cell
	case len(ran) == 0:
		cell.Status, cell.Reason = reports.StatusNotRun, "no mutex run"
		return cell
	}
	var windows []float64
	told := 0
	for _, r := range ran {
		if len(r.Takeovers) > 0 {
			cell.Links = append(cell.Links, reports.MatrixLink{Label: fmt.Sprintf("%s seed %d", r.Job.Class, r.Job.Seed), Report: r.Report()})
		}
		for _, t := range r.Takeovers {
			windows = append(windows, float64(t.Window))
			if t.Told {
				told++
			}
		}
	}
	if len(windows) == 0 {
		cell.Status, cell.Value = reports.StatusMeasured, "no takeover"
		cell.Reason = fmt.Sprintf("no hold was taken over in the %d mutex run(s): no window to measure", len(ran))
		return cell
	}
	med, worst := time.Duration(stats.Percentile(windows, 50)), time.Duration(slices.Max(windows))
	cell.Status, cell.Value = reports.StatusMeasured, "max "+ms(worst)
	cell.Reason = fmt.Sprintf("%d hold(s) taken over in the mutex runs: two clients acted as holders for %s (median), %s (max) after the grant; %d of the holders were told before their hold ended",
		len(windows), ms(med), ms(worst), told)
	return cell
}

// nodeLossCell is availability during kill-node, for multi-node backends.
func nodeLossCell(impl impls.Impl, planned bool, rs []Result) reports.MatrixCell {
	cell := reports.MatrixCell{Links: links(rs)}
	switch {
	case impl.Nodes <= 1:
		cell.Status, cell.Links = reports.StatusNA, nil
		cell.Reason = "a one-node backend: losing its node loses the lock service, there is no tolerance to show"
		return cell
	case !planned || len(rs) == 0:
		cell.Status, cell.Reason = reports.StatusNotRun, "needs the kill-restart class"
		return cell
	}
	var a Availability
	for _, r := range rs {
		if r.Err != "" {
			continue
		}
		x := r.Avail
		a.Windows += x.Windows
		a.DuringAttempts, a.DuringOK, a.DuringSeconds = a.DuringAttempts+x.DuringAttempts, a.DuringOK+x.DuringOK, a.DuringSeconds+x.DuringSeconds
		a.OutsideAttempts, a.OutsideOK, a.OutsideSeconds = a.OutsideAttempts+x.OutsideAttempts, a.OutsideOK+x.OutsideOK, a.OutsideSeconds+x.OutsideSeconds
	}
	if a.Windows == 0 || a.DuringSeconds <= 0 || a.OutsideSeconds <= 0 {
		cell.Status = reports.StatusInconclusive
		cell.Reason = whyNot(rs, func(r Result) string {
			if len(r.Results.Problems) > 0 {
				return strings.Join(r.Results.Problems, "; ")
			}
			return "no node was down during the workload"
		})
		return cell
	}
	during, outside := a.RateDuring(), a.RateOutside()
	cell.Status = reports.StatusNo
	if during >= outside/2 && a.DuringOK > 0 {
		cell.Status = reports.StatusYes
	}
	cell.Value = fmt.Sprintf("%s: %.0f vs %.0f cs/s", cell.Status, during, outside)
	cell.Reason = fmt.Sprintf("with one node down (%d window(s), %.1f s in all) %.0f critical sections/s and %s of %d acquires ok; without, %.0f/s and %s of %d",
		a.Windows, a.DuringSeconds, during, pctOrNone(a.SuccessDuring()), a.DuringAttempts, outside, pctOrNone(a.SuccessOutside()), a.OutsideAttempts)
	return cell
}

func pctOrNone(x float64) string {
	if math.IsNaN(x) {
		return "none"
	}
	return reports.Percent(x)
}

// fencingCell states the impl's token and what the runs showed of it.
func fencingCell(impl impls.Impl, none []Result, all []Result) reports.MatrixCell {
	if !impl.Fenced {
		return reports.MatrixCell{Status: reports.StatusNo, Value: "no",
			Reason: "the leases carry no fencing token; a resource can only check the holder's unique value (check-and-set)"}
	}
	cell := reports.MatrixCell{Status: reports.StatusYes, Value: "yes: " + impl.TokenSource, Links: links(none)}
	seen := 0
	for _, r := range none {
		seen += r.Tokens
	}
	cell.Reason = fmt.Sprintf("%d acquires of the fault-free run carried a token", seen)
	var back, same []string
	for _, r := range all {
		if r.Job.Probe != ProbeSafety {
			continue
		}
		w := string(r.Job.Class)
		if n := r.Safety.Kinds[checker.KindTokenRegression] + r.Safety.Kinds[checker.KindDuplicateToken]; n > 0 && !slices.Contains(back, w) {
			back = append(back, w)
		}
		if r.Safety.SameHolderTokens > 0 && !slices.Contains(same, w) {
			same = append(same, w)
		}
	}
	if len(back) > 0 {
		sort.Strings(back)
		cell.Reason += "; tokens went back or were granted twice under " + strings.Join(back, ", ")
	}
	if len(same) > 0 {
		sort.Strings(same)
		cell.Reason += "; one process was granted the same token again (it acquired anew the lock it still had, after a release that did not complete) under " + strings.Join(same, ", ")
	}
	return cell
}

// reentrantCell gives the probe's measurement, checked against the impl's
// registration, or the registration alone when the probe did not run or
// could not tell.
func reentrantCell(impl impls.Impl, probes []Result) reports.MatrixCell {
	doc := "no"
	if impl.Reentrant {
		doc = "yes"
	}
	for _, p := range probes {
		if p.Reentrancy == nil || p.Reentrancy.Status == reports.StatusInconclusive {
			continue
		}
		c := reports.MatrixCell{Status: p.Reentrancy.Status, Value: p.Reentrancy.Value, Reason: p.Reentrancy.Reason}
		if (p.Reentrancy.Status == reports.StatusYes) != impl.Reentrant {
			c.Reason += "; the impl's registration says " + doc
		}
		return c
	}
	c := reports.MatrixCell{Status: reports.StatusNo, Value: "no (documented)",
		Reason: "as documented by the impl, not measured; " + impl.Wait}
	if impl.Reentrant {
		c.Status, c.Value = reports.StatusYes, "yes (documented)"
	}
	for _, p := range probes {
		if p.Reentrancy != nil {
			c.Reason += "; " + p.Reentrancy.Reason
		}
	}
	return c
}

func blockingCell(impl impls.Impl) reports.MatrixCell {
	c := reports.MatrixCell{Status: reports.StatusNo, Value: "no", Reason: impl.Wait}
	if impl.Blocking {
		c.Status, c.Value = reports.StatusYes, "yes"
	}
	return c
}

func fmtMS(x float64) string {
	switch {
	case x < 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x < 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

// perfCells gives the latency and throughput cells of fault-free runs:
// the mean over the seeds of each run's percentiles and rate.
func perfCells(rs []Result) (lat, rate reports.MatrixCell) {
	lat.Links, rate.Links = links(rs), links(rs)
	var p50, p99, cps []float64
	acquired := 0
	for _, r := range rs {
		if r.Err != "" || r.Acquired == 0 {
			continue
		}
		p50, p99, cps = append(p50, r.P50), append(p99, r.P99), append(cps, r.Throughput)
		acquired += r.Acquired
	}
	if len(p50) == 0 {
		why := whyNot(rs, func(r Result) string { return "no acquire succeeded" })
		if len(rs) == 0 {
			why = "no fault-free run"
		}
		lat.Status, lat.Reason = reports.StatusInconclusive, why
		rate.Status, rate.Reason = reports.StatusInconclusive, why
		return lat, rate
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	lat.Status, rate.Status = reports.StatusMeasured, reports.StatusMeasured
	lat.Value = fmt.Sprintf("%s / %s ms", fmtMS(mean(p50)), fmtMS(mean(p99)))
	lat.Reason = fmt.Sprintf("p50 and p99 of %d successful acquires, invoke to ok, mean over %d run(s)", acquired, len(p50))
	rate.Value = fmt.Sprintf("%.0f/s", mean(cps))
	rate.Reason = fmt.Sprintf("%d critical sections over the workload's span, mean over %d run(s)", acquired, len(cps))
	return lat, rate
}
