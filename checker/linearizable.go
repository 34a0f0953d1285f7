package checker

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
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
// are linearizable against Model (DESIGN.md §6, item 4).
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
// of about WindowOps ops where that loses nothing: at a time before which
// every op completed (so no op of unknown outcome was invoked before it)
// and where the model's state is determined by the ops before it (mutex:
// the processes' counts of acquire oks and release oks say who holds the
// lock; register: the last write is after every other write). Each window
// starts from that state, and the windows are checked in parallel. A window
// that cannot be cut below MaxWindowOps ops is not checked, and the verdict
// is then unknown, never true.
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

// porcupineModel is m as porcupine wants it; abort makes every step fail,
// so that a check stops at once (its result is then discarded).
func (m Model) porcupineModel(abort *atomic.Bool) porcupine.Model {
	start := init0(m)
	nm := porcupine.NondeterministicModel{
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
			return fmt.Sprintf("%+v -> %+v", input, output)
		},
	}
	return nm.ToModel()
}

// ops returns, per lock name, the ops of h that m looks at, in call order.
func (m Model) ops(ctx context.Context, h history.History) (map[string][]linOp, error) {
	pair := h.Pair()
	out := make(map[string][]linOp)
	for i := range h {
		if err := stopped(ctx, i); err != nil {
			return nil, err
		}
		o := &h[i]
		if o.Process < 0 || o.Type != history.Invoke {
			continue
		}
		op := linOp{call: o.Time, ret: math.MaxInt64, inv: int32(i), done: int32(pair[i])}
		var c *history.Op
		if op.done >= 0 {
			c = &h[op.done]
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
			op.in = linInput{kind: 'a', proc: o.Process}
		case m == MutexModel && o.F == history.Release:
			op.in = linInput{kind: 'r', proc: o.Process}
		case m == RegisterModel && o.F == history.Read:
			if op.out.unknown || c.Value.N == nil {
				continue // a read that returned nothing constrains nothing
			}
			op.in, op.out.n = linInput{kind: 'R', proc: o.Process}, *c.Value.N
		case m == RegisterModel && o.F == history.Write:
			n := o.Value.N
			if c != nil && c.Value.N != nil && !op.out.unknown {
				n = c.Value.N
			}
			if n == nil {
				continue
			}
			op.in = linInput{kind: 'W', proc: o.Process, n: *n}
		default:
			continue
		}
		lock := o.Value.Lock
		out[lock] = append(out[lock], op)
	}
	if m == MutexModel {
		addDeaths(h, out)
	}
	for l, ops := range out {
		slices.SortFunc(ops, func(a, b linOp) int {
			if c := cmp.Compare(a.call, b.call); c != 0 {
				return c
			}
			return cmp.Compare(a.inv, b.inv)
		})
		if m == MutexModel {
			out[l] = dropIdleAcquires(ops)
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
func addDeaths(h history.History, byLock map[string][]linOp) {
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
					in: linInput{kind: 'd', proc: p}, out: linOutput{unknown: ret == math.MaxInt64}})
			}
		}
	}
}

// dropIdleAcquires leaves out of the call-ordered mutex ops of one lock the
// acquires of unknown outcome that cannot matter: an unknown acquire A of
// process p is left out when each later release of p (of any outcome but
// fail) has an acquire ok of p after A and after p's previous release. If A
// took effect, p would hold the lock until a release of p; a release whose
// acquire ok came after A cannot be it (that acquire ok needed the lock
// free, so A's effect came after it, and the release follows it at once in
// p's program order), so A's effect would last to the end and only forbid
// ops: choosing that A had no effect loses no linearization. This is what
// lets the windows be cut after the usual unknown acquires (a timed-out try
// whose process then carried on).
func dropIdleAcquires(ops []linOp) []linOp {
	type procState struct {
		// seen are p's unknown acquires followed by an acquire ok since
		// p's last release; unseen are those not followed by one yet.
		seen, unseen []int
	}
	procs := map[int]*procState{}
	needed := make([]bool, len(ops))
	for i := range ops {
		op := &ops[i]
		st := procs[op.in.proc]
		if st == nil {
			st = &procState{}
			procs[op.in.proc] = st
		}
		switch {
		case op.in.kind == 'a' && op.out.unknown:
			st.unseen = append(st.unseen, i)
		case op.in.kind == 'a':
			st.seen = append(st.seen, st.unseen...)
			st.unseen = nil
		case op.in.kind == 'r', op.in.kind == 'd':
			for _, j := range st.unseen {
				needed[j] = true
			}
			st.unseen, st.seen = st.seen, nil
		}
	}
	out := ops[:0]
	for i, op := range ops {
		if op.in.kind == 'a' && op.out.unknown && !needed[i] {
			continue
		}
		out = append(out, op)
	}
	return out
}

// window is a run of one lock's ops checked on its own, from state init.
type window struct {
	lock string
	init int64
	ops  []linOp
}

// windows cuts the call-ordered ops of one lock into windows of about size
// ops where the state between them is certain (see Linearizability).
func (m Model) windows(lock string, ops []linOp, size int) []window {
	var ws []window
	start, initial := 0, init0(m)
	maxRet := int64(math.MinInt64)
	// Mutex: each process's acquire oks minus release oks, and how many
	// processes have a non-zero count.
	counts := map[int]int{}
	nonzero := 0
	// Register: the last write by call, and the latest return of the
	// writes before it.
	lastW, otherRet := -1, int64(math.MinInt64)
	state := func() (int64, bool) {
		if m == RegisterModel {
			if lastW < 0 {
				return init0(m), true
			}
			return ops[lastW].in.n, otherRet < ops[lastW].call
		}
		switch nonzero {
		case 0:
			return free, true
		case 1:
			for p, n := range counts {
				if n == 1 {
					return int64(p), true
				}
			}
		}
		return 0, false
	}
	for k := range ops {
		if k-start >= size && maxRet < ops[k].call {
			if s, ok := state(); ok {
				ws = append(ws, window{lock, initial, ops[start:k]})
				start, initial = k, s
			}
		}
		op := &ops[k]
		maxRet = max(maxRet, op.ret)
		switch op.in.kind {
		case 'a', 'r':
			d := 1
			if op.in.kind == 'r' {
				d = -1
			}
			before := counts[op.in.proc]
			counts[op.in.proc] = before + d
			if before == 0 {
				nonzero++
			} else if before+d == 0 {
				nonzero--
			}
		case 'd':
			if counts[op.in.proc] != 0 {
				nonzero--
			}
			counts[op.in.proc] = 0
		case 'W':
			if lastW >= 0 {
				otherRet = max(otherRet, ops[lastW].ret)
			}
			lastW = k
		}
	}
	if start < len(ops) {
		ws = append(ws, window{lock, initial, ops[start:]})
	}
	return ws
}

// init0 is m's state before any op.
func init0(m Model) int64 {
	if m == RegisterModel {
		return 0
	}
	return free
}

// Check checks h as the type's comment describes.
func (c Linearizability) Check(ctx context.Context, h history.History) Result {
	if c.Model != MutexModel && c.Model != RegisterModel {
		return Result{Checker: c.Name(), Valid: Unknown, Anomalies: []Anomaly{}, Error: fmt.Sprintf("unknown model %q", c.Model)}
	}
	byLock, err := c.Model.ops(ctx, h)
	if err != nil {
		return cancelled(c.Name(), err)
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
	var tooBig []window
	for _, l := range locks {
		ops := byLock[l]
		nOps += len(ops)
		for i := range ops {
			if ops[i].out.unknown {
				unknownOps++
			}
		}
		for _, w := range c.Model.windows(l, ops, size) {
			largest = max(largest, len(w.ops))
			if len(w.ops) > maxSize {
				tooBig = append(tooBig, w)
				continue
			}
			ws = append(ws, w)
		}
	}
	r.Stats["ops"] = float64(nOps)
	r.Stats["windows"] = float64(len(ws) + len(tooBig))
	r.Stats["unknown_ops"] = float64(unknownOps)
	r.Stats["largest_window"] = float64(largest)

	deadline := time.Time{}
	if c.Timeout > 0 {
		deadline = time.Now().Add(c.Timeout)
	}
	ctxDeadline := false
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline, ctxDeadline = d, true
	}
	var abort atomic.Bool
	stop := context.AfterFunc(ctx, func() { abort.Store(true) })
	defer stop()
	model := c.Model.porcupineModel(&abort)

	results := make([]porcupine.CheckResult, len(ws))
	var next atomic.Int64
	var failed atomic.Bool
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
				timeout := time.Duration(0)
				if !deadline.IsZero() {
					if timeout = time.Until(deadline); timeout <= 0 {
						results[i] = porcupine.Unknown
						continue
					}
				}
				results[i] = porcupine.CheckOperationsTimeout(model, ws[i].porcupineOps(), timeout)
				if results[i] == porcupine.Illegal && !abort.Load() {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return cancelled(c.Name(), err)
	}
	timedOut := false
	reported := map[string]bool{}
	for i, res := range results {
		switch res {
		case porcupine.Illegal:
			if !reported[ws[i].lock] {
				reported[ws[i].lock] = true
				r.Anomalies = append(r.Anomalies, c.explain(h, model, ws[i], deadline))
			}
		case porcupine.Ok:
		default: // Unknown, or never run because another window failed
			if !failed.Load() {
				timedOut = true
			}
		}
	}
	if len(r.Anomalies) > 0 {
		return settle(r)
	}
	switch {
	case timedOut && ctxDeadline:
		return cancelled(c.Name(), context.DeadlineExceeded)
	case timedOut:
		r.Valid, r.Error = Unknown, fmt.Sprintf("porcupine did not finish within %s", c.Timeout)
	case len(tooBig) > 0:
		w := tooBig[0]
		r.Valid, r.Error = Unknown, fmt.Sprintf("%d ops of lock %q from %s on could not be cut into windows of at most %d ops (every op after one of unknown outcome overlaps it), so they were not checked",
			len(w.ops), w.lock, secs(w.ops[0].call), maxSize)
	}
	return r
}

// porcupineOps returns w's ops for porcupine, after a synthetic op that
// sets w's initial state and precedes them all.
func (w window) porcupineOps() []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(w.ops)+1)
	first := w.ops[0].call
	out = append(out, porcupine.Operation{ClientId: 0, Call: first - 2, Return: first - 1,
		Input: linInput{kind: 'I', state: w.init}, Output: linOutput{}, Metadata: -1})
	for i, op := range w.ops {
		out = append(out, porcupine.Operation{ClientId: max(op.in.proc, 0), Call: op.call, Return: op.ret,
			Input: op.in, Output: op.out, Metadata: i})
	}
	return out
}

// explain re-checks an illegal window verbosely and names the op that
// cannot be linearized after the longest linearizable prefix.
func (c Linearizability) explain(h history.History, model porcupine.Model, w window, deadline time.Time) Anomaly {
	first, last := w.ops[0].call, int64(0)
	for _, op := range w.ops {
		if op.ret != math.MaxInt64 {
			last = max(last, op.ret)
		}
	}
	a := Anomaly{Kind: "not-linearizable", Ops: []int{},
		Explanation: fmt.Sprintf("the %d ops of lock %q from %s to %s have no linearization as a %s",
			len(w.ops), w.lock, secs(first), secs(last), c.Model)}
	timeout := time.Duration(0)
	if !deadline.IsZero() {
		if timeout = time.Until(deadline); timeout <= 0 {
			return a
		}
	}
	res, info := porcupine.CheckOperationsVerbose(model, w.porcupineOps(), timeout)
	if res != porcupine.Illegal {
		return a
	}
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, seq := range part {
			if len(seq) > len(longest) {
				longest = seq
			}
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
	if blocked < 0 {
		return a
	}
	b := &w.ops[blocked-1]
	v := &view{h: h}
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
	a.Ops = v.indexes(ps...)
	a.Explanation += fmt.Sprintf(": after %s, %s cannot take effect", prefix, describeLinOp(h, b))
	return a
}

// describeLinOp renders "process 2's acquire (invoked at 1.000s, ok at
// 1.200s)".
func describeLinOp(h history.History, op *linOp) string {
	o := &h[op.inv]
	if op.in.kind == 'd' {
		return fmt.Sprintf("process %d's death (shown at %s)", op.in.proc, secs(o.Time))
	}
	what := o.F
	switch op.in.kind {
	case 'R':
		what = fmt.Sprintf("read of %d", op.out.n)
	case 'W':
		what = fmt.Sprintf("write of %d", op.in.n)
	}
	end := "of unknown outcome"
	if op.done >= 0 && h[op.done].Type == history.OK {
		end = "ok at " + secs(h[op.done].Time)
	}
	return fmt.Sprintf("process %d's %s (invoked at %s, %s)", o.Process, what, secs(o.Time), end)
}

// Leases reports whether any acquire ok of h carries a valid_until: the
// locks are leases, not session locks.
func Leases(h history.History) bool {
	for i := range h {
		if o := &h[i]; o.F == history.Acquire && o.Type == history.OK && o.Value.ValidUntil != 0 {
			return true
		}
	}
	return false
}
