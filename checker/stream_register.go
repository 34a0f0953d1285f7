package checker

import (
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

// RegisterFacts are what the streaming register check must know of a
// whole history before it reads it: per lock, for each value that a write
// of unknown outcome wrote, the latest return of a read ok of that value
// (the register cut asks whether such a write was ever seen after the
// last write ok, and a read that shows it may come much later). ScanFacts
// gathers them.
type RegisterFacts map[string]map[int64]int64

// StreamRegister checks the register model as Linearizability with
// RegisterModel does, on the ops of a history read in time order, without
// keeping the history: each lock's ops are cut into windows at the same
// cuts (windows.go), as soon as the ops after a cut that decide it have
// been read, and each window is checked by porcupine while the history is
// still being read, on up to four goroutines, and then forgotten. Its
// memory is each lock's current window and the ops read ahead of it.
//
// Finish gives Linearizability's Result: the same verdict and the same
// stats. As in Linearizability, checking stops at the first window with no
// linearization, so which locks get a "not-linearizable" anomaly may
// differ. The Timeout bounds porcupine's own time: the time of its
// searches, added up over the goroutines, may reach Timeout times their
// number. It has no visualization.
type StreamRegister struct {
	ordering
	ctx   context.Context
	c     Linearizability
	size  int
	max   int
	facts RegisterFacts

	invs  map[int]*regPending // per process, its invocation under way
	locks map[string]*regLock
	now   int64

	// checking
	model    porcupine.Model
	abort    atomic.Bool
	failed   atomic.Bool
	busy     atomic.Int64 // ns spent in porcupine, summed over goroutines
	workers  int
	todo     chan *regWindow
	wg       sync.WaitGroup
	started  bool
	mu       sync.Mutex
	illegal  map[string]*regWindow // per lock, its first window found with no linearization
	timedOut bool
}

// regPending is a read or write invocation not yet known to be one of
// porcupine's ops (a fail is none).
type regPending struct {
	lock     *regLock
	op       linOp
	f        string
	invN     *int64
	resolved bool
	keep     bool
	// register reports that the invocation is a read or a write.
	register bool
}

// regWindow is one window of a lock, to check.
type regWindow struct {
	lock *regLock
	seq  int
	w    window
}

// regLock is one lock's stream of register ops and its cutter.
type regLock struct {
	name  string
	stage []*regPending // its reads and writes by call, from the first one not yet resolved
	// ops are its porcupine ops from base on, in call order: ops[i-base]
	// is op i.
	ops  []linOp
	base int
	next int // the next op to give the cutter
	// infoAt are the completion times of its ops of unknown outcome that
	// had one, for the explanations.
	infoAt map[int32]int64

	// The current window: its start state, the ops pending at its cut
	// that moved into it, its first op, and the ops that blocked cuts.
	init       int64
	moved      []int
	start      int
	blocked    map[int]int
	blockedOps map[int]linOp
	seq        int

	// The register cutter (registerCutter), on absolute indexes.
	lastWrites
	readRet map[int64]int64
	pend    []int
	maxRet  int64 // the latest return of an op given to the cutter

	nOps, unknownOps, windows, largest int
	tooBig                             *window // its first window too long to check
}

// NewStreamRegister returns a streaming checker of c (whose Model must be
// RegisterModel) for a history whose facts were gathered before; ctx
// cancels its checks.
func NewStreamRegister(ctx context.Context, c Linearizability, facts RegisterFacts) *StreamRegister {
	c.Model = RegisterModel
	s := &StreamRegister{ordering: ordering{newReorder()}, ctx: ctx, c: c, size: c.WindowOps, max: c.MaxWindowOps,
		facts: facts, invs: map[int]*regPending{}, locks: map[string]*regLock{}, illegal: map[string]*regWindow{}}
	if s.size <= 0 {
		s.size = DefaultWindowOps
	}
	if s.max <= 0 {
		s.max = DefaultMaxWindowOps
	}
	s.model = RegisterModel.porcupineModel(&s.abort)
	s.workers = min(runtime.GOMAXPROCS(0), 4)
	return s
}

var _ Stream = (*StreamRegister)(nil)

// Add reads the op recorded next.
func (s *StreamRegister) Add(op history.Op) { add(s, op) }

// Confirmed returns nothing: a window's verdict is given by Finish.
func (s *StreamRegister) Confirmed() []Anomaly { return nil }

// step gives the cutters the ops they can now decide on.
func (s *StreamRegister) step() {
	for _, l := range s.locks {
		s.cut(l, false)
	}
}

func (s *StreamRegister) lock(name string) *regLock {
	l := s.locks[name]
	if l == nil {
		l = &regLock{name: name, infoAt: map[int32]int64{}, init: init0(RegisterModel), start: 0,
			blocked: map[int]int{}, blockedOps: map[int]linOp{}, readRet: s.facts[name],
			lastWrites: newLastWrites(), maxRet: none}
		s.locks[name] = l
	}
	return l
}

// read takes the next op in order.
func (s *StreamRegister) read(op history.Op) {
	s.now = op.Time
	if op.Process < 0 || op.Type == history.Notice {
		return
	}
	p := s.invs[op.Process]
	if op.Type == history.Invoke {
		if p != nil {
			s.resolve(p, nil) // it never completed
		}
		np := &regPending{op: linOp{call: op.Time, ret: math.MaxInt64, inv: int32(op.Index), done: -1}, f: op.F, invN: op.Value.N}
		if op.F == history.Read || op.F == history.Write {
			np.register = true
			np.lock = s.lock(op.Value.Lock)
			np.op.in.lock = op.Value.Lock
			np.lock.stage = append(np.lock.stage, np)
		}
		s.invs[op.Process] = np
		np.op.in.proc = op.Process
		return
	}
	if p == nil {
		return
	}
	delete(s.invs, op.Process)
	s.resolve(p, &op)
}

// resolve decides what the invocation p is, given its completion c (nil:
// it never completed), as Model.collectOps does.
func (s *StreamRegister) resolve(p *regPending, c *history.Op) {
	if !p.register {
		return
	}
	p.resolved = true
	op := &p.op
	if c != nil {
		op.done = int32(c.Index)
		switch c.Type {
		case history.Fail:
			return // certainly no effect
		case history.OK:
			op.ret = max(c.Time, op.call)
		default:
			p.lock.infoAt[op.done] = c.Time
		}
	}
	op.out.unknown = op.ret == math.MaxInt64
	switch p.f {
	case history.Read:
		if op.out.unknown || c.Value.N == nil {
			return // a read that returned nothing constrains nothing
		}
		op.in.kind, op.out.n = 'R', *c.Value.N
	case history.Write:
		n := p.invN
		if c != nil && c.Value.N != nil && !op.out.unknown {
			n = c.Value.N
		}
		if n == nil {
			return
		}
		op.in.kind, op.in.n = 'W', *n
	}
	p.keep = true
}

// cut moves l's resolved ops into its cutter and cuts where the ops read
// so far decide the cut; with final, the history has ended.
func (s *StreamRegister) cut(l *regLock, final bool) {
	n := 0
	for n < len(l.stage) && l.stage[n].resolved {
		if p := l.stage[n]; p.keep {
			l.ops = append(l.ops, p.op)
			l.nOps++
			if p.op.out.unknown {
				l.unknownOps++
			}
		}
		n++
	}
	if n > 0 {
		clear(l.stage[:n])
		l.stage = l.stage[n:]
	}
	// Every op invoked before horizon is among l.ops: a cut needs the
	// writes invoked up to the returns of the reads pending at it.
	horizon := s.now
	if len(l.stage) > 0 {
		horizon = l.stage[0].op.call
	}
	for l.next < l.base+len(l.ops) && (final || horizon > l.maxRet) {
		s.process(l, l.next)
		l.next++
	}
	if final && (len(l.moved) > 0 || l.start < l.base+len(l.ops)) {
		s.emit(l, l.materialize(l.base+len(l.ops), nil))
	}
}

func (l *regLock) op(i int) *linOp { return &l.ops[i-l.base] }

// process is one step of Model.windows' loop, at op k.
func (s *StreamRegister) process(l *regLock, k int) {
	if k > 0 && len(l.moved)+k-l.start >= s.size && l.op(k-1).call < l.op(k).call {
		st, later, ok, b, bop := l.try(k)
		switch {
		case ok && len(later) == len(l.moved)+k-l.start:
			// Every op of the window would move on: no cut.
		case ok:
			s.emit(l, l.materialize(k, later))
			l.init, l.moved, l.start = st, later, k
			clear(l.blocked)
			clear(l.blockedOps)
			l.pend = append(l.pend[:0], later...)
			l.trim()
		case b >= 0:
			l.blocked[b]++
			l.blockedOps[b] = bop
		}
	}
	l.add(k)
}

// trim forgets the ops no window to come holds.
func (l *regLock) trim() {
	need := l.start
	for _, j := range l.moved {
		need = min(need, j)
	}
	if need > l.base {
		l.ops = append([]linOp(nil), l.ops[need-l.base:]...)
		l.base = need
	}
}

// add is registerCutter.add.
func (l *regLock) add(k int) {
	op := l.op(k)
	l.lastWrites.add(op, k, l.readRet)
	if op.ret != math.MaxInt64 {
		l.maxRet = max(l.maxRet, op.ret)
	}
	l.pend = append(l.pend, k)
}

// try is registerCutter.try, which also returns the blocking op.
func (l *regLock) try(k int) (int64, []int, bool, int, linOp) {
	T := l.op(k).call
	l.pend = stillOpen(l.pend, l.op, T)
	s, ok, b := l.state(T)
	if !ok {
		if b < 0 {
			b = firstPending(l.pend, l.op)
		}
		if b < 0 {
			return 0, nil, false, -1, linOp{}
		}
		if b == l.lastW {
			return 0, nil, false, b, l.w // it may be before the ops kept
		}
		return 0, nil, false, b, *l.op(b)
	}
	// The next write at or after the cut: one invoked after every op read
	// so far is invoked after every pending read returned (cut waits for
	// that), as is no write at all.
	nextW, haveNext := int64(0), false
	for j := k; j < l.base+len(l.ops); j++ {
		if l.op(j).in.kind == 'W' {
			nextW, haveNext = l.op(j).call, true
			break
		}
	}
	later, b := registerLater(l.pend, l.op, s, nextW, haveNext)
	if b >= 0 {
		return 0, nil, false, b, *l.op(b)
	}
	return s, later, true, -1, linOp{}
}

// materialize is the window of l's ops from its start to end, less later
// and with its moved ops first.
func (l *regLock) materialize(end int, later []int) window {
	at := func(j int) linOp { return *l.op(j) }
	return window{lock: l.name, init: l.init, ops: gather(l.moved, l.start, end, later, at),
		blockers: topBlockers(l.blocked, func(j int) linOp { return l.blockedOps[j] })}
}

// emit checks window w of l, or notes why it is not checked.
func (s *StreamRegister) emit(l *regLock, w window) {
	if len(w.ops) == 0 {
		return
	}
	l.windows++
	l.largest = max(l.largest, len(w.ops))
	seq := l.seq
	l.seq++
	if len(w.ops) > s.max {
		if l.tooBig == nil {
			w := w
			l.tooBig = &w
		}
		return
	}
	if s.abort.Load() || s.failed.Load() {
		return
	}
	if !s.started {
		s.started = true
		s.todo = make(chan *regWindow, s.workers)
		for range s.workers {
			s.wg.Go(s.checkWindows)
		}
	}
	select {
	case s.todo <- &regWindow{lock: l, seq: seq, w: w}:
	case <-s.ctx.Done():
		s.abort.Store(true)
	}
}

// checkWindows checks the windows sent to it until there are none.
func (s *StreamRegister) checkWindows() {
	budget := int64(s.c.Timeout) * int64(s.workers)
	for rw := range s.todo {
		if s.abort.Load() || s.failed.Load() {
			continue
		}
		if s.ctx.Err() != nil {
			s.abort.Store(true)
			continue
		}
		start := time.Now()
		res := porcupine.CheckOperationsTimeout(s.model, rw.w.porcupineOps(positions{}, 0), 0)
		if used := s.busy.Add(int64(time.Since(start))); s.c.Timeout > 0 && used > budget {
			s.mu.Lock()
			s.timedOut = true
			s.mu.Unlock()
			s.abort.Store(true)
		}
		if s.abort.Load() {
			continue // a step may have failed for the abort
		}
		if res == porcupine.Illegal {
			s.failed.Store(true)
			s.mu.Lock()
			if old := s.illegal[rw.lock.name]; old == nil || rw.seq < old.seq {
				s.illegal[rw.lock.name] = rw
			}
			s.mu.Unlock()
		}
	}
}

// Finish ends the history, waits for the windows' checks and gives
// Linearizability's Result.
func (s *StreamRegister) Finish() Result {
	s.r.ready(true, s.read)
	for _, p := range s.invs {
		s.resolve(p, nil)
	}
	clear(s.invs)
	names := make([]string, 0, len(s.locks))
	for name := range s.locks {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s.cut(s.locks[name], true)
	}
	if s.started {
		close(s.todo)
		s.wg.Wait()
	}
	r := newResult(s.c.Name())
	nOps, unknownOps, windows, largest := 0, 0, 0, 0
	var tooBig *window
	for _, name := range names {
		l := s.locks[name]
		nOps += l.nOps
		unknownOps += l.unknownOps
		windows += l.windows
		largest = max(largest, l.largest)
		if tooBig == nil {
			tooBig = l.tooBig
		}
	}
	r.Stats["ops"] = float64(nOps)
	r.Stats["windows"] = float64(windows)
	r.Stats["unknown_ops"] = float64(unknownOps)
	r.Stats["largest_window"] = float64(largest)
	if err := s.ctx.Err(); err != nil {
		return cancelled(s.c.Name(), err)
	}
	if len(s.illegal) > 0 {
		var abort atomic.Bool
		model := RegisterModel.porcupineModel(&abort)
		for _, name := range names {
			rw := s.illegal[name]
			if rw == nil {
				continue
			}
			src := newLinSource(rw.w.ops, rw.lock.infoAt)
			var partials [][]int
			ws := []window{rw.w}
			st := make([]porcupine.CheckResult, 1)
			info := verbose(src, model, ws, []int{0}, &abort, st)
			if st[0] == porcupine.Illegal {
				partials = info.PartialLinearizations()[0]
			}
			r.Anomalies = append(r.Anomalies, s.c.explain(src, rw.w, partials))
		}
		return settle(r)
	}
	switch {
	case s.timedOut:
		r.Valid, r.Error = Unknown, fmt.Sprintf("porcupine did not finish within %s", s.c.Timeout)
	case tooBig != nil:
		infoAt := s.locks[tooBig.lock].infoAt
		r.Valid, r.Error = Unknown, s.c.tooBig(newLinSource(tooBig.blockers, infoAt), *tooBig, s.max)
	}
	return r
}

// positions is the opSource of a history whose positions are its
// indexes; porcupineOps reads only Index.
type positions struct{}

func (positions) Index(pos int) int     { return pos }
func (positions) Time(int) int64        { return 0 }
func (positions) Process(int) int       { return 0 }
func (positions) F(int) string          { return "" }
func (positions) Type(int) history.Type { return "" }

// linSource is the opSource of the ops behind some linOps of a streaming
// check, whose positions are history indexes: what the explanations read
// of them.
type linSource map[int32]srcOp

type srcOp struct {
	t    int64
	proc int
	f    string
	typ  history.Type
}

// newLinSource describes ops (register ops); infoAt gives the completion
// times of those of unknown outcome that had one.
func newLinSource(ops []linOp, infoAt map[int32]int64) linSource {
	src := linSource{}
	for _, op := range ops {
		f := history.Write
		if op.in.kind == 'R' {
			f = history.Read
		}
		src[op.inv] = srcOp{t: op.call, proc: op.in.proc, f: f, typ: history.Invoke}
		if op.done < 0 {
			continue
		}
		if op.out.unknown {
			src[op.done] = srcOp{t: infoAt[op.done], proc: op.in.proc, f: f, typ: history.Info}
		} else {
			src[op.done] = srcOp{t: op.ret, proc: op.in.proc, f: f, typ: history.OK}
		}
	}
	return src
}

func (s linSource) Index(pos int) int         { return pos }
func (s linSource) Time(pos int) int64        { return s[int32(pos)].t }
func (s linSource) Process(pos int) int       { return s[int32(pos)].proc }
func (s linSource) F(pos int) string          { return s[int32(pos)].f }
func (s linSource) Type(pos int) history.Type { return s[int32(pos)].typ }
