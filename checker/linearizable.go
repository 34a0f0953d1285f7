package checker

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/history"
)

// Model names a sequential specification that Linearizability checks a
// history against with porcupine.
type Model string

// The models.
const (
	// MutexModel is a non-reentrant lock per lock name: an acquire that
	// completed ok needs the lock free and makes its process the holder; a
	// release that completed ok needs its process to be the holder and
	// frees the lock. It fits locks that are not leases (database session
	// locks), whose holders lose them only by releasing.
	MutexModel Model = "mutex"
	// RegisterModel is the resource's counter per lock name, starting at 0:
	// a read ok returns the current value; a write ok sets it.
	RegisterModel Model = "register"
)

// DefaultLinearizableTimeout is the timeout of the Linearizability checker
// that For adds.
const DefaultLinearizableTimeout = time.Minute

// DefaultWindowOps is the default Linearizability.WindowOps.
const DefaultWindowOps = 2000

// DefaultMaxWindowOps is the default Linearizability.MaxWindowOps: porcupine
// keeps a bitset of the window's ops for every state it caches, so its
// memory grows with the square of a window's length; 20,000 ops cost it
// about 50 MB.
const DefaultMaxWindowOps = 20_000

// Linearizability checks, with porcupine, that the client ops of each lock
// are linearizable against Model.
//
// The ops of each lock name are checked separately. An op's interval runs
// from its invocation's Time to its completion's. An op that completed
// fail certainly had no effect and is left out. An op that completed info,
// or never completed, may have taken effect at any time after its
// invocation, or never: its interval never ends and its outcome is
// unknown, as porcupine requires. Mutex: acquire and release ops. Register:
// read oks that carry n, and write oks and write ops of unknown outcome that
// carry n; claims are left out. Nemesis ops are ignored.
//
// To keep porcupine's memory bounded, each lock's ops are cut into windows
// of about WindowOps ops where that loses nothing: at a time where the
// model's state is certain — mutex: a process certainly holds the lock, or
// every op completed and the counts of acquire oks and release oks say who
// holds it; register: the last write ok certainly followed every other
// write and no write of unknown outcome is seen after it — and where every
// op pending then can be given to one side (see windows.go). Each window
// starts from that state, and the windows are checked in parallel, four at
// a time. A window that cannot be cut below MaxWindowOps ops is not
// checked, and the verdict is then unknown, never true, with a reason
// naming the ops that prevented the cuts.
//
// The verdict is valid when porcupine finds every window linearizable,
// invalid when it finds one that is not — one "not-linearizable" anomaly
// per such lock, naming the last op of the longest linearizable prefix
// porcupine found and the first op that cannot follow it (invocation and
// completion each) — and unknown when the Timeout (0: none) expires or ctx
// is done first. Stats: "ops" (ops given to porcupine), "windows",
// "unknown_ops" (ops of unknown outcome) and "largest_window".
type Linearizability struct {
	Model   Model
	Timeout time.Duration
	// ServerSessions says that the locks are session locks of one server
	// (a single MariaDB or PostgreSQL server): a crash of its node (an ok
	// kill-node or power-loss) ends every session, so the restart that
	// follows it ends what the ops of those sessions did (see
	// linearizable_restart.go). Mutex model only.
	ServerSessions bool
	// WindowOps is the length windows are cut at, when they can be; 0 means
	// DefaultWindowOps.
	WindowOps int
	// MaxWindowOps is the longest window that is checked; 0 means
	// DefaultMaxWindowOps.
	MaxWindowOps int
}

// Linearizable returns the porcupine checker of model, bounded by timeout.
func Linearizable(model Model, timeout time.Duration) Checker {
	return Linearizability{Model: model, Timeout: timeout}
}

var _ Checker = Linearizability{}

// Name returns "linearizable-mutex" or "linearizable-register".
func (c Linearizability) Name() string { return "linearizable-" + string(c.Model) }

// linOp is one op given to porcupine.
type linOp struct {
	call, ret int64 // ret is math.MaxInt64 for an unknown outcome
	in        linInput
	out       linOutput
	inv, done int32 // history positions; done is -1 when there is none
}

// linInput is what an op asked. kind: 'a' acquire, 'r' release, 'R' read,
// 'W' write, 'I' the synthetic op that sets a window's initial state (to
// state).
type linInput struct {
	kind  byte
	proc  int
	n     int64
	state int64
	lock  string
}

// linOutput is what an op returned: unknown, or for a read the n.
type linOutput struct {
	unknown bool
	n       int64
}

// free is the mutex state of a lock nobody holds.
const free = -1

// step returns the states op may lead to from state under m.
func (m Model) step(state int64, in linInput, out linOutput) []int64 {
	switch in.kind {
	case 'I':
		return []int64{in.state}
	case 'a':
		switch {
		case state == free && out.unknown:
			return []int64{state, int64(in.proc)}
		case state == free:
			return []int64{int64(in.proc)}
		case out.unknown:
			return []int64{state}
		}
	case 'r':
		switch {
		case state == int64(in.proc) && out.unknown:
			return []int64{state, free}
		case state == int64(in.proc):
			return []int64{free}
		case out.unknown:
			return []int64{state}
		}
	case 'd':
		// The process died: the lock service frees what it held (a
		// session ends, a lease runs out); a lock it did not hold stays.
		if state == int64(in.proc) {
			return []int64{free}
		}
		return []int64{state}
	case 'R':
		if state == out.n {
			return []int64{state}
		}
	case 'W':
		if out.unknown && state != in.n {
			return []int64{state, in.n}
		}
		return []int64{in.n}
	}
	return nil
}

// porcupineModel is m as porcupine wants it — the one porcupine model of
// locktest, which both checks and draws — with ops partitioned by their
// window (linMeta.win; the ops of a window are consecutive) and described
// for people. abort makes every step fail, so that a check stops at once
// (its result is then discarded); a model that draws a visualization must
// not be aborted.
func (m Model) porcupineModel(abort *atomic.Bool) porcupine.Model {
	start := init0(m)
	nm := porcupine.NondeterministicModel{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			var out [][]porcupine.Operation
			for i := 0; i < len(ops); {
				j := i + 1
				for j < len(ops) && ops[j].Metadata.(linMeta).win == ops[i].Metadata.(linMeta).win {
					j++
				}
				out = append(out, ops[i:j])
				i = j
			}
			return out
		},
		Init: func() []any { return []any{start} },
		Step: func(state, input, output any) []any {
			if abort.Load() {
				return nil
			}
			next := m.step(state.(int64), input.(linInput), output.(linOutput))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Hash: func(state any) uint64 { return uint64(state.(int64)) * 0x9e3779b97f4a7c15 },
		DescribeOperation: func(input, output any) string {
			return m.describe(input.(linInput), output.(linOutput))
		},
		DescribeState: func(state any) string { return m.describeState(state.(int64)) },
		DescribeOperationMetadata: func(meta any) string {
			if i := meta.(linMeta).index; i >= 0 {
				return fmt.Sprintf("history op %d", i)
			}
			return "the state the ops before this window leave"
		},
	}
	return nm.ToModel()
}

// describe renders an op for porcupine's visualization, e.g.
// "p2 acquire(x) -> ok".
func (m Model) describe(in linInput, out linOutput) string {
	res := "ok"
	if out.unknown {
		res = "unknown"
	}
	switch in.kind {
	case 'I':
		return "start: " + m.describeState(in.state)
	case 'a':
		return fmt.Sprintf("p%d acquire(%s) -> %s", in.proc, in.lock, res)
	case 'r':
		return fmt.Sprintf("p%d release(%s) -> %s", in.proc, in.lock, res)
	case 'd':
		if in.n == endedRelease {
			return fmt.Sprintf("p%d release(%s) -> unknown, over by the server's restart: freed if p%d holds it", in.proc, in.lock, in.proc)
		}
		return fmt.Sprintf("p%d died: %s is freed if p%d holds it", in.proc, in.lock, in.proc)
	case 'R':
		return fmt.Sprintf("p%d read(%s) -> %d", in.proc, in.lock, out.n)
	case 'W':
		return fmt.Sprintf("p%d write(%s, %d) -> %s", in.proc, in.lock, in.n, res)
	}
	return fmt.Sprintf("%+v -> %+v", in, out)
}

// describeState renders a state for porcupine's visualization.
func (m Model) describeState(s int64) string {
	switch {
	case m == RegisterModel:
		return fmt.Sprintf("%d", s)
	case s == free:
		return "free"
	}
	return fmt.Sprintf("held by p%d", s)
}

// ops returns, per lock name, the ops of h that m looks at, in call order.
func (m Model) ops(ctx context.Context, h *history.Table) (map[string][]linOp, error) {
	return m.allOps(ctx, h, false)
}

// ops returns, per lock name, the ops of h that c's model looks at, in
// call order, after what the restarts prove when c.ServerSessions.
func (c Linearizability) ops(ctx context.Context, h *history.Table) (map[string][]linOp, error) {
	return c.Model.collectOps(ctx, h, false, c.ServerSessions)
}

// allOps is ops, with the mutex model's unknown acquires that cannot
// matter kept when keepIdle.
func (m Model) allOps(ctx context.Context, h *history.Table, keepIdle bool) (map[string][]linOp, error) {
	return m.collectOps(ctx, h, keepIdle, false)
}

// collectOps is allOps, after what the server's restarts prove (see
// endAtRestarts) when serverSessions and m is the mutex model.
func (m Model) collectOps(ctx context.Context, h *history.Table, keepIdle, serverSessions bool) (map[string][]linOp, error) {
	pair := h.Pair()
	out := make(map[string][]linOp)
	for i := range h.Len() {
		if err := stopped(ctx, i); err != nil {
			return nil, err
		}
		if h.Process(i) < 0 || h.Type(i) != history.Invoke {
			continue
		}
		o := h.At(i)
		op := linOp{call: o.Time, ret: math.MaxInt64, inv: int32(i), done: pair[i]}
		var c *history.Op
		if op.done >= 0 {
			done := h.At(int(op.done))
			c = &done
			if c.Type == history.Fail {
				continue // certainly no effect
			}
			if c.Type == history.OK {
				op.ret = max(c.Time, o.Time)
			}
		}
		op.out.unknown = op.ret == math.MaxInt64
		switch {
		case m == MutexModel && o.F == history.Acquire:
			op.in = linInput{kind: 'a', proc: o.Process, lock: o.Value.Lock}
		case m == MutexModel && o.F == history.Release:
			op.in = linInput{kind: 'r', proc: o.Process, lock: o.Value.Lock}
		case m == RegisterModel && o.F == history.Read:
			if op.out.unknown || c.Value.N == nil {
				continue // a read that returned nothing constrains nothing
			}
			op.in, op.out.n = linInput{kind: 'R', proc: o.Process, lock: o.Value.Lock}, *c.Value.N
		case m == RegisterModel && o.F == history.Write:
			n := o.Value.N
			if c != nil && c.Value.N != nil && !op.out.unknown {
				n = c.Value.N
			}
			if n == nil {
				continue
			}
			op.in = linInput{kind: 'W', proc: o.Process, n: *n, lock: o.Value.Lock}
		default:
			continue
		}
		lock := o.Value.Lock
		out[lock] = append(out[lock], op)
	}
	var times []int64
	var valid []bool
	if m == MutexModel {
		addDeaths(h, out)
		if serverSessions {
			times, valid = restarts(h)
		}
	}
	for l, ops := range out {
		slices.SortFunc(ops, func(a, b linOp) int {
			if c := cmp.Compare(a.call, b.call); c != 0 {
				return c
			}
			return cmp.Compare(a.inv, b.inv)
		})
		if m != MutexModel {
			continue
		}
		var ended []int64
		if serverSessions {
			ended = endAtRestarts(h, ops, times, valid)
		}
		if !keepIdle {
			out[l] = dropIdleAcquires(ops, ended)
		}
	}
	return out, nil
}

// addDeaths adds to the mutex ops of each lock a death op for every
// process the history shows dead (see deaths) that had ops on the lock: the
// lock service frees whatever the process held at some moment after the
// death. The op is invoked at the death; it has certainly taken effect by
// the first acquire ok of another process of the lock that returned after
// the death (that acquire needed the lock free), and is of unknown return
// when there is none.
func addDeaths(h *history.Table, byLock map[string][]linOp) {
	dead := deathOps(h)
	if len(dead) == 0 {
		return
	}
	pair := h.Pair()
	for lock, ops := range byLock {
		procs := map[int]bool{}
		for _, op := range ops {
			procs[op.in.proc] = true
		}
		for p := range procs {
			for _, pos := range dead[p] {
				d := deathTime(h, pair, pos, p)
				ret := int64(math.MaxInt64)
				for _, op := range ops {
					if op.in.kind == 'a' && op.in.proc != p && !op.out.unknown && op.ret > d {
						ret = min(ret, op.ret)
					}
				}
				byLock[lock] = append(byLock[lock], linOp{call: d, ret: ret, inv: pos, done: -1,
					in: linInput{kind: 'd', proc: p, lock: lock}, out: linOutput{unknown: ret == math.MaxInt64}})
			}
		}
	}
}

// dropIdleAcquires leaves out of the call-ordered mutex ops of one lock the
// acquires of unknown outcome that cannot matter. An unknown acquire A of
// process p may always be taken as having had no effect; and when it had
// one, that effect can be removed unless it lasted until a release ok of p
// (the first release or death of p after it): every op taken while the
// lock was p's is as legal with it free, and a release of unknown outcome
// or a death then finds it free and changes nothing either. A release ok R
// of p cannot end A's effect when R is clean: an acquire ok B of p returned
// before R's call, and no other release or death of p can be taken in
// [B's call, R's return]. For if A took effect before R with nothing of p
// in between, B could not be taken between them (the lock was not free),
// so it was taken before A, and something of p freed the lock between B
// and A — in that interval. So A is left out when every release ok of p
// that can be taken after A (returning at or after A's call) is clean.
// This is what lets the windows be cut after the usual unknown acquires: a
// timed-out try whose process then carried on, or died.
//
// ended, when not nil, gives per op the time by which a server restart
// ended what the op did (math.MaxInt64: none; see endAtRestarts): a release
// ok invoked at or after it cannot end the op's effect, and only the
// release oks invoked before it need to be clean.
func dropIdleAcquires(ops []linOp, ended []int64) []linOp {
	type procOps struct {
		acqs, frees []int   // its acquire oks; its releases and deaths
		unclean     int64   // latest return of a release ok that is not clean
		uncleanOps  []int32 // the release oks that are not clean, by call
	}
	procs := map[int]*procOps{}
	for i := range ops {
		op := &ops[i]
		pr := procs[op.in.proc]
		if pr == nil {
			pr = &procOps{unclean: math.MinInt64}
			procs[op.in.proc] = pr
		}
		switch {
		case op.in.kind == 'a' && !op.out.unknown:
			pr.acqs = append(pr.acqs, i)
		case op.in.kind == 'r', op.in.kind == 'd':
			pr.frees = append(pr.frees, i)
		}
	}
	for _, pr := range procs {
		a := -1                        // acqs[:a+1] were invoked before the free at hand
		before := int64(math.MinInt64) // latest return of the frees before it
		for k, i := range pr.frees {
			r := &ops[i]
			for a+1 < len(pr.acqs) && ops[pr.acqs[a+1]].call < r.call {
				a++
			}
			if r.in.kind == 'r' && !r.out.unknown {
				clean := a >= 0 && ops[pr.acqs[a]].ret < r.call &&
					before < ops[pr.acqs[a]].call &&
					(k+1 == len(pr.frees) || ops[pr.frees[k+1]].call > r.ret)
				if !clean {
					pr.unclean = max(pr.unclean, r.ret)
					pr.uncleanOps = append(pr.uncleanOps, int32(i))
				}
			}
			before = max(before, r.ret)
		}
	}
	// idle reports whether the unknown acquire ops[i] cannot matter.
	idle := func(i int) bool {
		op, pr := &ops[i], procs[ops[i].in.proc]
		if pr.unclean < op.call {
			return true
		}
		if ended == nil || ended[i] == math.MaxInt64 {
			return false
		}
		for _, j := range pr.uncleanOps {
			if r := &ops[j]; r.ret >= op.call && r.call < ended[i] {
				return false
			}
		}
		return true
	}
	out := ops[:0]
	for i, op := range ops {
		if op.in.kind == 'a' && op.out.unknown && idle(i) {
			continue
		}
		out = append(out, op)
	}
	return out
}

// init0 is m's state before any op.
func init0(m Model) int64 {
	if m == RegisterModel {
		return 0
	}
	return free
}

// Check checks h as the type's comment describes.
func (c Linearizability) Check(ctx context.Context, h *history.Table) Result {
	r, _ := c.CheckVisual(ctx, h, 0)
	return r
}

// CheckVisual checks h as Check does and also returns porcupine's
// visualization of what this check found, drawn from the check's own
// search, not a second one: the windows that come first in time, up to
// maxOps ops in all, are checked with porcupine's verbose search, and the
// picture shows them; when porcupine finds a window with no linearization
// elsewhere, the picture shows that window instead (explaining it needs
// porcupine's verbose search of it anyway). The Visualization is nil when
// maxOps ≤ 0 or when the check did not run (an unknown model, a cancelled
// check); its Ops is 0 when it shows nothing, and its Note then says why.
func (c Linearizability) CheckVisual(ctx context.Context, h *history.Table, maxOps int) (Result, *Visualization) {
	if c.Model != MutexModel && c.Model != RegisterModel {
		return Result{Checker: c.Name(), Valid: Unknown, Anomalies: []Anomaly{}, Error: fmt.Sprintf("unknown model %q", c.Model)}, nil
	}
	byLock, err := c.ops(ctx, h)
	if err != nil {
		return cancelled(c.Name(), err), nil
	}
	size, maxSize := c.WindowOps, c.MaxWindowOps
	if size <= 0 {
		size = DefaultWindowOps
	}
	if maxSize <= 0 {
		maxSize = DefaultMaxWindowOps
	}
	r := newResult(c.Name())
	locks := make([]string, 0, len(byLock))
	for l := range byLock {
		locks = append(locks, l)
	}
	slices.Sort(locks)
	var ws []window
	nOps, unknownOps, largest := 0, 0, 0
	for _, l := range locks {
		ops := byLock[l]
		nOps += len(ops)
		for i := range ops {
			if ops[i].out.unknown {
				unknownOps++
			}
		}
		ws = append(ws, c.Model.windows(l, ops, size)...)
	}
	var tooBig []int
	for i, w := range ws {
		largest = max(largest, len(w.ops))
		if len(w.ops) > maxSize {
			tooBig = append(tooBig, i)
		}
	}
	r.Stats["ops"] = float64(nOps)
	r.Stats["windows"] = float64(len(ws))
	r.Stats["unknown_ops"] = float64(unknownOps)
	r.Stats["largest_window"] = float64(largest)

	// One abort for the whole check: ctx done or the Timeout passed makes
	// every step of the model fail, and a result found after it is
	// discarded.
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if c.Timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, c.Timeout)
	}
	defer cancel()
	var abort atomic.Bool
	stop := context.AfterFunc(cctx, func() { abort.Store(true) })
	defer stop()
	model := c.Model.porcupineModel(&abort)

	status := make([]porcupine.CheckResult, len(ws)) // "": not checked
	shown := c.firstWindows(ws, maxSize, maxOps)
	var shownInfo porcupine.LinearizationInfo
	if len(shown) > 0 {
		shownInfo = verbose(h, model, ws, shown, &abort, status)
	}
	var next atomic.Int64
	var failed atomic.Bool
	for _, s := range status {
		if s == porcupine.Illegal {
			failed.Store(true)
		}
	}
	var wg sync.WaitGroup
	for range min(len(ws), runtime.GOMAXPROCS(0), 4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ws) || abort.Load() || failed.Load() {
					return
				}
				if status[i] != "" || len(ws[i].ops) > maxSize {
					continue
				}
				res := porcupine.CheckOperationsTimeout(model, ws[i].porcupineOps(h, 0), 0)
				if abort.Load() {
					res = porcupine.Unknown // a step may have failed for the abort
				}
				status[i] = res
				if res == porcupine.Illegal {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return cancelled(c.Name(), err), nil
	}
	timedOut := cctx.Err() != nil

	// One anomaly per lock: its first window with no linearization.
	var bad []int
	reported := map[string]bool{}
	for i, s := range status {
		if s == porcupine.Illegal && !reported[ws[i].lock] {
			reported[ws[i].lock] = true
			bad = append(bad, i)
		}
	}
	if len(bad) > 0 {
		var vis *Visualization
		if slices.ContainsFunc(bad, func(i int) bool { return slices.Contains(shown, i) }) {
			vis = c.picture(shownInfo, ws, shown, nOps, maxOps, "")
		}
		for _, i := range bad {
			var partials [][]int
			if n := slices.Index(shown, i); n >= 0 {
				partials = shownInfo.PartialLinearizations()[n]
			} else {
				st := make([]porcupine.CheckResult, len(ws))
				info := verbose(h, model, ws, []int{i}, &abort, st)
				if st[i] == porcupine.Illegal {
					partials = info.PartialLinearizations()[0]
				}
				if vis == nil && maxOps > 0 && len(ws[i].ops) <= maxOps {
					first, last := opSpan(ws[i].ops)
					vis = c.picture(info, ws, []int{i}, nOps, maxOps, fmt.Sprintf("it shows the %s of lock %q from %s to %s, in which porcupine found no linearization",
						plural(int64(len(ws[i].ops)), "op"), ws[i].lock, secs(first), secs(last)))
				}
			}
			r.Anomalies = append(r.Anomalies, c.explain(h, ws[i], partials))
		}
		if vis == nil && maxOps > 0 {
			vis = c.picture(shownInfo, ws, shown, nOps, maxOps, "")
		}
		return settle(r), vis
	}
	var vis *Visualization
	if maxOps > 0 {
		vis = c.picture(shownInfo, ws, shown, nOps, maxOps, "")
	}
	switch {
	case timedOut:
		r.Valid, r.Error = Unknown, fmt.Sprintf("porcupine did not finish within %s", c.Timeout)
	case len(tooBig) > 0:
		r.Valid, r.Error = Unknown, c.tooBig(h, ws[tooBig[0]], maxSize)
	}
	return r, vis
}

// opSource is what the porcupine checker reads of the ops behind its
// linOps, by position: a Table, or what a streaming check kept of them
// (linSource).
type opSource interface {
	Index(pos int) int
	Time(pos int) int64
	Process(pos int) int
	F(pos int) string
	Type(pos int) history.Type
}

var _ opSource = (*history.Table)(nil)

// indexesOf returns the history indexes of the ops at positions ps of h
// in time order (then index, then position), leaving out negative
// positions and repeats, as view.indexes does. It may reorder ps.
func indexesOf(h opSource, ps ...int32) []int {
	ps = slices.DeleteFunc(ps, func(p int32) bool { return p < 0 })
	slices.SortFunc(ps, func(a, b int32) int {
		if c := cmp.Compare(h.Time(int(a)), h.Time(int(b))); c != 0 {
			return c
		}
		if c := cmp.Compare(h.Index(int(a)), h.Index(int(b))); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	ps = slices.Compact(ps)
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = h.Index(int(p))
	}
	return out
}

// tooBig says why window w, longer than maxSize ops, was not checked,
// naming the ops that kept it from being cut.
func (c Linearizability) tooBig(h opSource, w window, maxSize int) string {
	what := "who holds the lock"
	if c.Model == RegisterModel {
		what = "the register's value"
	}
	msg := fmt.Sprintf("%d ops of lock %q from %s on could not be cut into windows of at most %d ops (no moment in them at which %s is certain)",
		len(w.ops), w.lock, secs(w.ops[0].call), maxSize, what)
	if len(w.blockers) > 0 {
		var parts []string
		for i := range w.blockers {
			b := &w.blockers[i]
			parts = append(parts, fmt.Sprintf("op %d (%s)", h.Index(int(b.inv)), describeLinOp(h, b)))
		}
		msg += ": every cut tried was prevented by " + strings.Join(parts, ", or by ")
	}
	return msg + "; they were not checked"
}

// firstWindows returns the indexes of the windows of ws that come first in
// time (by their first op's call), as many as fit in maxOps ops in all; a
// window too long to check ends them.
func (c Linearizability) firstWindows(ws []window, maxSize, maxOps int) []int {
	if maxOps <= 0 {
		return nil
	}
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ws[a].ops[0].call, ws[b].ops[0].call) })
	var out []int
	n := 0
	for _, i := range order {
		if len(ws[i].ops) > maxSize || n+len(ws[i].ops) > maxOps {
			break
		}
		n += len(ws[i].ops)
		out = append(out, i)
	}
	return out
}

// verbose checks the windows idx of ws in one verbose porcupine search, a
// partition each, sets their status and returns porcupine's information:
// a window whose partition porcupine linearized whole is ok; one it did
// not is illegal, or unknown when the check was aborted.
func verbose(h opSource, model porcupine.Model, ws []window, idx []int, abort *atomic.Bool, status []porcupine.CheckResult) porcupine.LinearizationInfo {
	var ops []porcupine.Operation
	for n, i := range idx {
		ops = append(ops, ws[i].porcupineOps(h, n)...)
	}
	_, info := porcupine.CheckOperationsVerbose(model, ops, 0)
	aborted := abort.Load()
	parts := info.PartialLinearizations()
	for n, i := range idx {
		status[i] = porcupine.Illegal
		if aborted {
			status[i] = porcupine.Unknown
		}
		for _, seq := range parts[n] {
			if len(seq) == len(ws[i].ops)+1 {
				status[i] = porcupine.Ok
			}
		}
	}
	return info
}

// opSpan returns the first call and the last return (of those that
// returned) of ops.
func opSpan(ops []linOp) (first, last int64) {
	first = ops[0].call
	for _, op := range ops {
		if op.ret != math.MaxInt64 {
			last = max(last, op.ret)
		}
	}
	return first, last
}

// porcupineOps returns w's ops for porcupine, after a synthetic op that
// sets w's initial state and precedes them all; win is the window's
// partition in a verbose search of several.
func (w window) porcupineOps(h opSource, win int) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(w.ops)+1)
	first := w.ops[0].call
	out = append(out, porcupine.Operation{ClientId: 0, Call: first - 2, Return: first - 1,
		Input: linInput{kind: 'I', state: w.init}, Output: linOutput{}, Metadata: linMeta{win: win, index: -1}})
	if w.init >= 0 {
		out[0].ClientId = int(w.init)
	}
	for _, op := range w.ops {
		out = append(out, porcupine.Operation{ClientId: max(op.in.proc, 0), Call: op.call, Return: op.ret,
			Input: op.in, Output: op.out, Metadata: linMeta{win: win, index: h.Index(int(op.inv))}})
	}
	return out
}

// linMeta is a porcupine op's metadata: its window's partition in a
// verbose search, and its history index (-1 for a window's start).
type linMeta struct {
	win, index int
}

// explain names, for a window with no linearization, the op that cannot
// be linearized after the longest linearizable prefix porcupine found
// (partials: porcupine's partial linearizations of the window).
func (c Linearizability) explain(h opSource, w window, partials [][]int) Anomaly {
	first, last := opSpan(w.ops)
	a := Anomaly{Kind: KindNotLinearizable, Ops: []int{},
		Explanation: fmt.Sprintf("the %d ops of lock %q from %s to %s have no linearization as a %s",
			len(w.ops), w.lock, secs(first), secs(last), c.Model)}
	var longest []int
	for _, seq := range partials {
		if len(seq) > len(longest) {
			longest = seq
		}
	}
	in := make([]bool, len(w.ops)+1)
	for _, id := range longest {
		in[id] = true
	}
	// The first op by return that is not in the prefix could not follow
	// it; ids are positions in porcupineOps, 0 being the synthetic op.
	blocked := -1
	for id := 1; id <= len(w.ops); id++ {
		if !in[id] && (blocked < 0 || w.ops[id-1].ret < w.ops[blocked-1].ret) {
			blocked = id
		}
	}
	if blocked < 0 || partials == nil {
		return a
	}
	b := &w.ops[blocked-1]
	ps := []int32{b.inv, b.done}
	prefix := "its start"
	if w.init != init0(c.Model) {
		prefix = fmt.Sprintf("its start, where the ops before it leave the %s at %d", c.Model, w.init)
		if c.Model == MutexModel {
			prefix = fmt.Sprintf("its start, where the ops before it leave the lock held by process %d", w.init)
		}
	}
	if n := len(longest); n > 0 && longest[n-1] > 0 {
		p := &w.ops[longest[n-1]-1]
		ps = append(ps, p.inv, p.done)
		prefix = describeLinOp(h, p)
	}
	a.Ops = indexesOf(h, ps...)
	a.Explanation += fmt.Sprintf(": after %s, %s cannot take effect", prefix, describeLinOp(h, b))
	return a
}

// describeLinOp renders "process 2's acquire (invoked at 1.000s, ok at
// 1.200s)".
func describeLinOp(h opSource, op *linOp) string {
	pos := int(op.inv)
	oF, oTime, oProc := h.F(pos), h.Time(pos), h.Process(pos)
	if op.in.kind == 'd' && oF == history.Release {
		return fmt.Sprintf("process %d's release (invoked at %s, of unknown outcome, over by the server's restart at %s)", op.in.proc, secs(oTime), secs(op.ret))
	}
	if op.in.kind == 'd' {
		return fmt.Sprintf("process %d's death (shown at %s)", op.in.proc, secs(oTime))
	}
	what := oF
	switch op.in.kind {
	case 'R':
		what = fmt.Sprintf("read of %d", op.out.n)
	case 'W':
		what = fmt.Sprintf("write of %d", op.in.n)
	}
	end := "of unknown outcome"
	if op.done >= 0 && h.Type(int(op.done)) == history.OK {
		end = "ok at " + secs(h.Time(int(op.done)))
	}
	return fmt.Sprintf("process %d's %s (invoked at %s, %s)", oProc, what, secs(oTime), end)
}

// Leases reports whether any acquire ok of h carries a valid_until: the
// locks are leases, not session locks.
func Leases(h *history.Table) bool {
	for i := range h.Len() {
		if h.ValidUntil(i) != 0 && h.Type(i) == history.OK && h.F(i) == history.Acquire {
			return true
		}
	}
	return false
}
