package checker

import (
	"cmp"
	"math"
	"slices"
)

// This file cuts one lock's call-ordered ops into windows that porcupine
// checks separately, each from the state the ops before it certainly
// leave. A cut at T (the call of ops[k], later than the call of ops[k-1])
// splits the ops into an earlier window E and a later one L: every op
// invoked at or after T goes to L; every op that returned before T goes to
// E; an op pending at T (invoked before T, returning at or after it, or
// never) goes to the side its rule below says, and when one has no such
// side there is no cut at T. A cut is sound when
//
//   - every linearization of E (from its start state) ends in a state s,
//     or can be changed into one that does, and
//   - every linearization of the whole history can be rearranged so that
//     E's ops come first, ending in s, and L's follow.
//
// Then the whole is linearizable if and only if E is from its start and L is
// from s: every op of E was invoked before T and every op of L returns at
// or after T, so E's linearization followed by L's respects real time.
// Below, τ(x) is the point at which a linearization takes op x, inside
// [x.call, x.ret] (porcupine's intervals are closed).
//
// Mutex: the holder cut. Process p certainly holds the lock at T when its
// latest acquire ok A (by call) returned before T and each release or
// death of p invoked before T returned before A's call. Then in every
// linearization the lock is p's from τ(A) to the first release or death of
// p taken at or after T, and so in every linearization of E it is p's at
// the end: every other op is refused in state p (an acquire ok, another's
// release ok) or changes nothing there (an acquire or release of unknown
// outcome, another's death). The ops pending at T go:
//
//  1. An acquire X of unknown outcome by q (p included): to E when every
//     release ok of q in the whole history returned before T; else to L
//     when every release ok of q invoked before T returned before X's call;
//     else no cut. An unknown acquire may always be taken as having no
//     effect, and the effect it had can be removed whenever the op that
//     ended it (the first release or death of q after it) is not a release
//     ok: the states in between were q's and every op in between is as
//     legal with the lock free. So if τ(X) ≥ T, X can be made a no-op and
//     moved to E's end (state p: a no-op); if τ(X) < T it is a no-op in
//     state p, or before τ(A) its effect was ended before A by a release or
//     death of q that is no release ok, and it moves to L's start.
//  2. An acquire ok Q of q: to L when every release or death of q invoked
//     before T returned before Q's call: then nothing could free the lock
//     between Q and A, so τ(Q) ≥ T.
//  3. A release ok R of r (r ≠ p, by the holder's condition): to E when no
//     acquire of r is pending at T and none is invoked in [T, R.ret]: then
//     no acquire of r can give r the lock between T and τ(R), so τ(R) < T.
//  4. A death or a release of unknown outcome of r (r ≠ p): to E when no
//     acquire ok of r is pending at T, r's unknown acquires pending at T go
//     to E (rule 1), and no acquire of r is invoked in [T, ret]: then it
//     finds the lock not r's if τ ≥ T (after those acquires were made
//     no-ops) and moves to E's end as a no-op.
//
// Whether a replaced worker reused its dead predecessor's process id or
// not, these rules hold: they look at every op of the process, before and
// after the death.
//
// Mutex: the free cut (kept from before). Every op of the window returned
// before T, and the processes' acquire oks minus release oks in the window
// (a death resetting its process's count) leave at most one process with
// one: the lock is that process's, or free. A death that overlaps an op of
// its own process in the window makes its place in that count uncertain,
// and then there is no free cut in the window.
//
// Register: the last-write cut. The latest write ok W (by call) returned
// before T, every other write ok invoked before T returned before W's
// call, and every write of unknown outcome invoked before T is blind after
// W's call (no read ok returning its value returns at or after W's call).
// A blind write taken after W can be made a no-op (no read sees it), so
// the register holds W's value s from τ(W) to T in some rearrangement of
// every linearization, and at the end of some linearization of E. Pending
// at T there are then only writes of unknown outcome, which go to E (as
// no-ops), and reads ok: to E when no write is invoked in [T, R.ret], else
// to L when R read s, else no cut.

// window is a run of one lock's ops checked on its own, from state init.
// blockers are, for a window that could not be cut small enough, ops that
// prevented the cuts in it, the most frequent first.
type window struct {
	lock     string
	init     int64
	ops      []linOp
	blockers []linOp
}

// cutter is what cuts one lock's ops: it tries a cut at ops[k] (before the
// op is added) and is told of each op after.
type cutter interface {
	try(k int) (init int64, later []int, ok bool, blocker int)
	add(k int)
	// moved tells it that the current window now starts, in state init,
	// with the ops later (pending at the cut, sorted by index).
	moved(init int64, later []int)
}

// maxBlockers is how many blocking ops a window reports.
const maxBlockers = 3

// windows cuts the call-ordered ops of one lock into windows of about size
// ops, at cuts where the state is certain (see above).
func (m Model) windows(lock string, ops []linOp, size int) []window {
	var c cutter
	if m == MutexModel {
		c = newMutexCutter(ops)
	} else {
		c = newRegisterCutter(ops)
	}
	var ws []window
	init := init0(m)
	var moved []int // ops[start:] of the current window come after these
	start := 0
	blocked := map[int]int{}
	at := func(j int) linOp { return ops[j] }
	materialize := func(end int, later []int) window {
		w := window{lock: lock, init: init}
		if len(moved) == 0 && len(later) == 0 {
			w.ops = ops[start:end]
		} else {
			w.ops = gather(moved, start, end, later, at)
		}
		w.blockers = topBlockers(blocked, at)
		return w
	}
	for k := range ops {
		if k > 0 && len(moved)+k-start >= size && ops[k-1].call < ops[k].call {
			s, later, ok, b := c.try(k)
			switch {
			case ok && len(later) == len(moved)+k-start:
				// Every op of the window would move on: no cut.
			case ok:
				ws = append(ws, materialize(k, later))
				init, moved, start = s, later, k
				clear(blocked)
				c.moved(s, later)
			case b >= 0:
				blocked[b]++
			}
		}
		c.add(k)
	}
	if len(moved) > 0 || start < len(ops) {
		ws = append(ws, materialize(len(ops), nil))
	}
	return ws
}

// gather returns a window's ops in order: the ops moved into it, then
// those from start to end, leaving out later (those that move on); op
// gives an op by its index.
func gather(moved []int, start, end int, later []int, op func(int) linOp) []linOp {
	skip := map[int]bool{}
	for _, j := range later {
		skip[j] = true
	}
	out := make([]linOp, 0, len(moved)+end-start)
	for _, j := range moved {
		if !skip[j] {
			out = append(out, op(j))
		}
	}
	for j := start; j < end; j++ {
		if !skip[j] {
			out = append(out, op(j))
		}
	}
	return out
}

// topBlockers returns the ops that blocked the most cuts (blocked counts
// the cuts each op, by index, blocked; op gives an op by its index).
func topBlockers(blocked map[int]int, op func(int) linOp) []linOp {
	if len(blocked) == 0 {
		return nil
	}
	ks := make([]int, 0, len(blocked))
	for k := range blocked {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b int) int {
		if c := cmp.Compare(blocked[b], blocked[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := make([]linOp, 0, maxBlockers)
	for _, k := range ks[:min(len(ks), maxBlockers)] {
		out = append(out, op(k))
	}
	return out
}

// none is the "no such time" of the cutters' maxima.
const none = math.MinInt64

// mutexProc is what the mutex cutter knows of one process.
type mutexProc struct {
	// acqCalls are the calls of all its acquires, ascending; seenAcq of
	// them are before the cut being tried.
	acqCalls []int64
	seenAcq  int
	// lastOKRelRet is the latest return of its release oks in the whole
	// history.
	lastOKRelRet int64
	// relRet is the latest return of its releases and deaths before the
	// cut, okRelRet that of its release oks.
	relRet, okRelRet int64
	// hold is its latest acquire ok before the cut when no release or
	// death of it was invoked after that acquire and every earlier one
	// returned before the acquire's call; -1 otherwise.
	hold int
}

// nextAcq returns the call of its first acquire at or after the cut.
func (pr *mutexProc) nextAcq() (int64, bool) {
	if pr.seenAcq < len(pr.acqCalls) {
		return pr.acqCalls[pr.seenAcq], true
	}
	return 0, false
}

type mutexCutter struct {
	ops   []linOp
	procs map[int]*mutexProc
	// holding are the processes whose hold is set.
	holding map[int]bool
	// pend are ops of the current window that may be pending at the next
	// cut tried.
	pend []int
	// The free cut's view of the current window: the latest return, each
	// process's acquire oks minus release oks, whether a death overlaps an
	// op of its process, and per process the latest return of its acquires
	// and releases and of its deaths.
	maxRet   int64
	counts   map[int]int
	tainted  bool
	opRet    map[int]int64
	deathRet map[int]int64
}

func newMutexCutter(ops []linOp) *mutexCutter {
	c := &mutexCutter{ops: ops, procs: map[int]*mutexProc{}, holding: map[int]bool{}}
	for i := range ops {
		op := &ops[i]
		pr := c.proc(op.in.proc)
		switch {
		case op.in.kind == 'a':
			pr.acqCalls = append(pr.acqCalls, op.call)
		case op.in.kind == 'r' && !op.out.unknown:
			pr.lastOKRelRet = max(pr.lastOKRelRet, op.ret)
		}
	}
	c.moved(free, nil)
	return c
}

func (c *mutexCutter) proc(p int) *mutexProc {
	pr := c.procs[p]
	if pr == nil {
		pr = &mutexProc{lastOKRelRet: none, relRet: none, okRelRet: none, hold: -1}
		c.procs[p] = pr
	}
	return pr
}

func (c *mutexCutter) moved(init int64, later []int) {
	c.pend = append(c.pend[:0], later...)
	c.maxRet, c.tainted = none, false
	c.counts, c.opRet, c.deathRet = map[int]int{}, map[int]int64{}, map[int]int64{}
	if init != free {
		c.counts[int(init)] = 1
	}
	for _, j := range later {
		c.window(j)
	}
}

// window adds ops[j] to the free cut's view of the current window.
func (c *mutexCutter) window(j int) {
	op := &c.ops[j]
	p := op.in.proc
	c.maxRet = max(c.maxRet, op.ret)
	switch op.in.kind {
	case 'a', 'r':
		if d, ok := c.deathRet[p]; ok && d >= op.call {
			c.tainted = true
		}
		c.opRet[p] = max(c.opRet[p], op.ret)
		if !op.out.unknown {
			if op.in.kind == 'a' {
				c.counts[p]++
			} else {
				c.counts[p]--
			}
		}
	case 'd':
		if r, ok := c.opRet[p]; ok && r >= op.call {
			c.tainted = true
		}
		c.deathRet[p] = max(c.deathRet[p], op.ret)
		c.counts[p] = 0
	}
}

func (c *mutexCutter) add(k int) {
	op := &c.ops[k]
	p := op.in.proc
	pr := c.proc(p)
	switch op.in.kind {
	case 'a':
		pr.seenAcq++
		if !op.out.unknown {
			pr.hold = -1
			delete(c.holding, p)
			if pr.relRet < op.call {
				pr.hold = k
				c.holding[p] = true
			}
		}
	case 'r', 'd':
		pr.relRet = max(pr.relRet, op.ret)
		if op.in.kind == 'r' && !op.out.unknown {
			pr.okRelRet = max(pr.okRelRet, op.ret)
		}
		pr.hold = -1
		delete(c.holding, p)
	}
	c.pend = append(c.pend, k)
	c.window(k)
}

func (c *mutexCutter) try(k int) (int64, []int, bool, int) {
	T := c.ops[k].call
	c.pend = stillOpen(c.pend, sliceAt(c.ops), T)
	pend := c.pend
	if c.maxRet < T && !c.tainted {
		if s, ok := c.countState(); ok {
			return s, nil, true, -1
		}
	}
	// The certain holder: of several (a history that is not linearizable
	// anyway), the one with the latest acquire.
	p, a := -1, -1
	for q := range c.holding {
		if h := c.procs[q].hold; c.ops[h].ret < T && h > a {
			p, a = q, h
		}
	}
	if p < 0 {
		return 0, nil, false, firstPending(pend, sliceAt(c.ops))
	}
	// The processes with an acquire pending at T: any, and ok.
	pendAcq, pendOKAcq := map[int]bool{}, map[int]bool{}
	for _, j := range pend {
		if op := &c.ops[j]; op.in.kind == 'a' {
			pendAcq[op.in.proc] = true
			if !op.out.unknown {
				pendOKAcq[op.in.proc] = true
			}
		}
	}
	var later []int
	for _, j := range pend {
		op := &c.ops[j]
		pr := c.procs[op.in.proc]
		switch {
		case op.in.kind == 'a' && op.out.unknown: // rule 1
			if pr.lastOKRelRet < T {
				continue
			}
			if pr.okRelRet < op.call {
				later = append(later, j)
				continue
			}
		case op.in.kind == 'a': // rule 2
			if pr.relRet < op.call {
				later = append(later, j)
				continue
			}
		case op.in.kind == 'r' && !op.out.unknown: // rule 3
			if next, ok := pr.nextAcq(); !pendAcq[op.in.proc] && (!ok || next > op.ret) {
				continue
			}
		default: // rule 4: a death or an unknown release
			unknownAcqToE := !pendAcq[op.in.proc] || pr.lastOKRelRet < T
			if next, ok := pr.nextAcq(); !pendOKAcq[op.in.proc] && unknownAcqToE && (!ok || next > op.ret) {
				continue
			}
		}
		return 0, nil, false, j
	}
	return int64(p), later, true, -1
}

// countState returns the state the free cut's counts say, when they say
// one.
func (c *mutexCutter) countState() (int64, bool) {
	s := int64(free)
	for p, n := range c.counts {
		switch n {
		case 0:
		case 1:
			if s != free {
				return 0, false
			}
			s = int64(p)
		default:
			return 0, false
		}
	}
	return s, true
}

// lastWrites is what the register cut knows of the writes before the cut
// it tries: the latest write ok (w, at index lastW; -1 for none), the
// latest return of the write oks before it (prevRet) and of all of them
// (okRet), and blind, the latest return of a read of the value of a write
// of unknown outcome before the cut.
type lastWrites struct {
	lastW          int
	w              linOp
	prevRet, okRet int64
	blind          int64
}

func newLastWrites() lastWrites {
	return lastWrites{lastW: -1, prevRet: none, okRet: none, blind: none}
}

// add takes op, of index k, which comes next; readRet gives, per value,
// the latest return of a read ok of it in the whole history.
func (lw *lastWrites) add(op *linOp, k int, readRet map[int64]int64) {
	if op.in.kind != 'W' {
		return
	}
	if op.out.unknown {
		if r, ok := readRet[op.in.n]; ok {
			lw.blind = max(lw.blind, r)
		}
		return
	}
	lw.prevRet, lw.lastW, lw.w = lw.okRet, k, *op
	lw.okRet = max(lw.okRet, op.ret)
}

// state returns the register's value at a cut at T when the writes before
// it leave it certain (the last write's, or the start's). When they do
// not, ok is false and blocker is the op that prevents the cut: the last
// write, or -1 for the first op pending at T.
func (lw *lastWrites) state(T int64) (s int64, ok bool, blocker int) {
	s, since := init0(RegisterModel), int64(none)
	if lw.lastW >= 0 {
		if lw.w.ret >= T {
			return 0, false, lw.lastW
		}
		if lw.prevRet >= lw.w.call {
			return 0, false, -1
		}
		s, since = lw.w.in.n, lw.w.call
	}
	if lw.blind != none && (since == none || lw.blind >= since) {
		return 0, false, -1
	}
	return s, true, -1
}

// registerCutter cuts register ops at the last-write cut.
type registerCutter struct {
	lastWrites
	ops []linOp
	// readRet is, per value, the latest return of a read ok of it.
	readRet map[int64]int64
	// writeCalls are the calls of all writes, ascending; seenW of them are
	// before the cut.
	writeCalls []int64
	seenW      int
	pend       []int
}

func newRegisterCutter(ops []linOp) *registerCutter {
	c := &registerCutter{lastWrites: newLastWrites(), ops: ops, readRet: map[int64]int64{}}
	for i := range ops {
		switch op := &ops[i]; op.in.kind {
		case 'R':
			if r, ok := c.readRet[op.out.n]; !ok || op.ret > r {
				c.readRet[op.out.n] = op.ret
			}
		case 'W':
			c.writeCalls = append(c.writeCalls, op.call)
		}
	}
	return c
}

func (c *registerCutter) moved(_ int64, later []int) { c.pend = append(c.pend[:0], later...) }

func (c *registerCutter) add(k int) {
	if c.ops[k].in.kind == 'W' {
		c.seenW++
	}
	c.lastWrites.add(&c.ops[k], k, c.readRet)
	c.pend = append(c.pend, k)
}

func (c *registerCutter) try(k int) (int64, []int, bool, int) {
	T := c.ops[k].call
	c.pend = stillOpen(c.pend, sliceAt(c.ops), T)
	pend := c.pend
	s, ok, b := c.state(T)
	if !ok {
		if b < 0 {
			b = firstPending(pend, sliceAt(c.ops))
		}
		return 0, nil, false, b
	}
	nextW, haveNext := int64(0), c.seenW < len(c.writeCalls)
	if haveNext {
		nextW = c.writeCalls[c.seenW]
	}
	later, b := registerLater(pend, sliceAt(c.ops), s, nextW, haveNext)
	if b >= 0 {
		return 0, nil, false, b
	}
	return s, later, true, -1
}

// registerLater gives each op pending at a last-write cut in state s
// its side: it returns those that go to the later window, or the first
// that can go to neither (-1 when there is none). nextW is the call of the
// first write at or after the cut, when haveNext.
func registerLater(pend []int, op func(int) *linOp, s, nextW int64, haveNext bool) (later []int, blocker int) {
	for _, j := range pend {
		op := op(j)
		switch {
		case op.in.kind == 'W' && op.out.unknown:
			continue
		case op.in.kind == 'R' && (!haveNext || nextW > op.ret):
			continue
		case op.in.kind == 'R' && op.out.n == s:
			later = append(later, j)
			continue
		}
		return nil, j
	}
	return later, -1
}

// sliceAt gives the ops of a slice by their index.
func sliceAt(ops []linOp) func(int) *linOp { return func(j int) *linOp { return &ops[j] } }

// firstPending returns the op of pend invoked first, or -1 when pend is
// empty; op gives an op by its index.
func firstPending(pend []int, op func(int) *linOp) int {
	first := -1
	for _, j := range pend {
		if first < 0 || op(j).call < op(first).call {
			first = j
		}
	}
	return first
}

// stillOpen keeps, in place, the ops of pend that have not returned before
// time T; op gives an op by its index.
func stillOpen(pend []int, op func(int) *linOp, T int64) []int {
	return slices.DeleteFunc(pend, func(j int) bool { return op(j).ret < T })
}
