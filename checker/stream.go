package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// Stream is a checker that reads the ops of a history as they are
// recorded, in the order they reach the driver, and confirms anomalies
// while the history goes on: StreamMutex, StreamResource and
// StreamFencing. Expect and Revive tell it of a worker whose ops are to
// come; Confirmed gives each anomaly it found since the last call, every
// one an anomaly of the whole history; Late counts the ops that came after
// it had passed their time (a confirmation may then rest on an order that
// was not the history's); Finish ends the history and gives the Result of
// the Checker of its property (FencingTokens, Resource and Liveness run
// their Stream over the history; MutualExclusion has its own sweep).
type Stream interface {
	Expect(p int)
	Revive(p int, at int64)
	Add(op history.Op)
	Confirmed() []Anomaly
	Late() int
	Finish() Result
}

var (
	_ Stream = (*StreamMutex)(nil)
	_ Stream = (*StreamResource)(nil)
	_ Stream = (*StreamFencing)(nil)
)

// ordered is a streaming checker that can share its reorder buffer: read
// takes the next op in order, and step decides what the ops read so far
// let it decide.
type ordered interface {
	Stream
	read(history.Op)
	step()
	reorderOf() **reorder
}

// ordering is what every streaming checker has of the order of its ops:
// its reorder buffer, its own or one that Streams shares, and the methods
// of Stream that only the buffer answers.
type ordering struct{ r *reorder }

func (o *ordering) reorderOf() **reorder { return &o.r }

// add is Add of a checker s with its own reorder buffer: op, recorded
// next, is held back until no op of a lower time can still come, s reads
// the ops that are then in order, and decides what they let it decide.
func add(s ordered, op history.Op) {
	r := *s.reorderOf()
	r.push(op)
	r.ready(false, s.read)
	s.step()
}

// unseen returns the anomalies of found from the *seen-th on, the ones
// Confirmed has not given yet, and counts them as given.
func unseen(found []Anomaly, seen *int) []Anomaly {
	out := found[*seen:]
	*seen = len(found)
	return out
}

// Expect makes the checker wait for process p's first op before it
// decides anything after it: a run's workers are known before their
// first op.
func (o *ordering) Expect(p int) { o.r.expect(p) }

// Revive says that a new worker takes the id p of a dead one from at on
// (the pool restarts a killed client): the checker waits for its ops
// again.
func (o *ordering) Revive(p int, at int64) { o.r.revive(p, at) }

// Late counts the ops that came after the watermark had passed their
// time: none in a run whose workers stamp and send their ops in order.
func (o *ordering) Late() int { return o.r.late }

// Streams runs streaming checkers over one reorder buffer: each op is put
// in order once for all of them, not once for each. Add, Expect, Revive
// and Late go through it; Confirmed of each checker gives what that one
// found, and Finish ends the history for all of them, after which each
// checker's Finish gives its Result.
type Streams struct {
	r    *reorder
	list []ordered
}

// NewStreams returns the streams of ss, fresh checkers of this package
// (NewStreamMutex, NewStreamResource, NewStreamFencing, NewStreamLiveness),
// which from now on must be fed through it.
func NewStreams(ss ...Stream) *Streams {
	return newStreams(newReorder(), ss)
}

// NewFileStreams returns the streams of ss for the ops of a recorded
// history read in its file's order, where no op comes more than slack ns
// after an op of a later time (ScanFacts measures it): an op is read once
// an op slack ns later than it has come, so Expect and Revive are not
// needed, and no op comes late.
func NewFileStreams(slack int64, ss ...Stream) *Streams {
	r := newReorder()
	r.slack = max(slack, 0)
	return newStreams(r, ss)
}

func newStreams(r *reorder, ss []Stream) *Streams {
	m := &Streams{r: r}
	for _, s := range ss {
		o := s.(ordered)
		*o.reorderOf() = m.r
		m.list = append(m.list, o)
	}
	return m
}

// Expect makes the checkers wait for process p's first op.
func (m *Streams) Expect(p int) { m.r.expect(p) }

// Revive says that a new worker takes the id p of a dead one from at on.
func (m *Streams) Revive(p int, at int64) { m.r.revive(p, at) }

// Late counts the ops that came after the watermark had passed their
// time.
func (m *Streams) Late() int { return m.r.late }

// Add reads the op recorded next into every checker.
func (m *Streams) Add(op history.Op) {
	m.r.push(op)
	m.r.ready(false, m.read)
	for _, s := range m.list {
		s.step()
	}
}

func (m *Streams) read(op history.Op) {
	for _, s := range m.list {
		s.read(op)
	}
}

// Finish reads every op still held back into every checker; then each
// checker's Finish gives its Result.
func (m *Streams) Finish() { m.r.ready(true, m.read) }

// reorder puts the ops of a history, as they are recorded, back in the
// order the checkers read them: by time, then index. The recorder writes
// an op when it reaches the driver, and a worker stamps its ops itself, so
// one worker's ops come in time order but may come after another's later
// ones (a worker stopped between stamping an op and sending it sends it
// when it wakes). An op is released once no op of a lower time can still
// come: its time is below the watermark, the lowest last time of the
// processes that may still send one. The nemesis's ops and the pool's
// (process -1, and a worker's "worker exited" info) are stamped when
// recorded, so they never come late and do not hold the watermark back.
//
// Its memory is the ops not yet released: those after the watermark,
// which a stopped worker holds back for as long as it is stopped.
type reorder struct {
	buf  opHeap
	last map[int]int64 // per worker process, the time of its last op
	gone map[int]bool  // workers known to be dead, which hold nothing back
	// released is the highest time released so far; an op that comes
	// with a lower time came late (late counts them).
	released int64
	late     int
	// slack, when not negative, makes the watermark the highest time
	// pushed (seen) less slack, for ops known to come at most slack ns
	// out of order (a recorded file).
	slack int64
	seen  int64
}

func newReorder() *reorder {
	return &reorder{last: map[int]int64{}, gone: map[int]bool{}, slack: -1}
}

// expect makes the watermark wait for the first op of process p.
func (r *reorder) expect(p int) {
	if _, ok := r.last[p]; !ok {
		r.last[p] = -1
	}
}

// matters reports whether op, come late, could have changed what the
// checks decided before it came: every op of a worker, and of the
// nemesis the ops of a fault that kills (a death ends holds). The
// nemesis stamps an op just before it records it, so under load another
// op may be recorded in between: a late pause or heal changes nothing
// the checks read.
func matters(op history.Op) bool {
	if op.Process >= 0 {
		return true
	}
	k, ok := history.FaultOfOp(op.F)
	return ok && k.Kills
}

// revive makes the watermark wait again for process p, dead until now,
// whose id a new worker takes from at on: its ops come from then on.
func (r *reorder) revive(p int, at int64) {
	delete(r.gone, p)
	r.last[p] = max(r.last[p], at)
}

// push adds op, which came next.
func (r *reorder) push(op history.Op) {
	if op.Time < r.released && matters(op) {
		r.late++
	}
	r.buf.push(op)
	r.seen = max(r.seen, op.Time)
	if op.Process < 0 || r.slack >= 0 {
		return
	}
	if op.Type == history.Info && strings.HasPrefix(op.Error, "worker exited") {
		r.gone[op.Process] = true
		return
	}
	delete(r.gone, op.Process) // an id used again
	r.last[op.Process] = max(r.last[op.Process], op.Time)
}

// watermark is the time below which no op can still come.
func (r *reorder) watermark() int64 {
	if r.slack >= 0 {
		return r.seen - r.slack
	}
	w := int64(1<<63 - 1)
	for p, t := range r.last {
		if !r.gone[p] {
			w = min(w, t)
		}
	}
	return w
}

// ready gives f, in order, every op below the watermark (every op, with
// all), and drops it.
func (r *reorder) ready(all bool, f func(history.Op)) {
	w := r.watermark()
	for r.buf.Len() > 0 && (all || r.buf[0].Time < w) {
		op := r.buf.pop()
		r.released = max(r.released, op.Time)
		f(op)
	}
}

// opHeap is a binary min-heap of ops by time, then index. It holds the
// ops themselves, not boxed in interfaces as container/heap would: an
// allocation of each op's 224 bytes saved, on every op a run records.
type opHeap []history.Op

func (h opHeap) Len() int { return len(h) }

func (h opHeap) less(i, j int) bool {
	if h[i].Time != h[j].Time {
		return h[i].Time < h[j].Time
	}
	return h[i].Index < h[j].Index
}

// push adds op.
func (h *opHeap) push(op history.Op) {
	*h = append(*h, op)
	q := *h
	for i := len(q) - 1; i > 0; {
		up := (i - 1) / 2
		if !q.less(i, up) {
			break
		}
		q[i], q[up] = q[up], q[i]
		i = up
	}
}

// pop removes and returns the first op; h must not be empty.
func (h *opHeap) pop() history.Op {
	q := *h
	first := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = history.Op{} // let its strings go
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && q.less(l, m) {
			m = l
		}
		if r < len(q) && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return first
}

// killWatch follows the nemesis's faults under way for the streaming
// checkers, and proves the deaths of the processes a kill's ok names at
// deathTime's moment: when the kill began, or later if the process still
// recorded ops between the kill's invocation and its ok.
type killWatch struct {
	// kills are the nemesis invocations under way, by index: any of
	// them may be a kill, whose death goes back to its invocation.
	kills map[int]history.Op
	// watch holds, while a kill is under way, each process's ops read
	// since (index and time), for deathTime's rule.
	watch map[int][][2]int64
}

func newKillWatch() killWatch {
	return killWatch{kills: map[int]history.Op{}, watch: map[int][][2]int64{}}
}

// saw notes op, a worker's op read in order.
func (k *killWatch) saw(op history.Op) {
	if len(k.kills) > 0 {
		k.watch[op.Process] = append(k.watch[op.Process], [2]int64{int64(op.Index), op.Time})
	}
}

// nemesis takes a nemesis op read in order; for the ok of a fault that
// kills, it calls died with each process the op names and its death time.
func (k *killWatch) nemesis(op history.Op, died func(p int, d int64)) {
	if op.Type == history.Invoke {
		k.kills[op.Index] = op
		return
	}
	// Its invocation is the latest one of the same f before it.
	var inv *history.Op
	for i, o := range k.kills {
		if o.F == op.F && o.Index < op.Index && (inv == nil || o.Index > inv.Index) {
			o := k.kills[i]
			inv = &o
		}
	}
	if inv != nil {
		delete(k.kills, inv.Index)
	}
	defer func() {
		if len(k.kills) == 0 {
			clear(k.watch)
		}
	}()
	if op.Type != history.OK || !history.Kills(op) {
		return
	}
	for _, t := range op.Value.Targets {
		p, ok := processTarget(t)
		if !ok {
			continue
		}
		d := op.Time
		if inv != nil {
			d = inv.Time
			for _, w := range k.watch[p] {
				if w[0] > int64(inv.Index) && w[0] < int64(op.Index) && w[1] > d && w[1] <= op.Time {
					d = w[1]
				}
			}
		}
		died(p, d)
	}
}

// earliest returns t, or the invocation time of a fault under way if
// earlier: a death may still be proved from then on.
func (k *killWatch) earliest(t int64) int64 {
	for _, o := range k.kills {
		t = min(t, o.Time)
	}
	return t
}

// since reports whether a fault under way was invoked at or before t.
func (k *killWatch) since(t int64) bool { return k.earliest(t+1) <= t }

// holdEnds are what may end a hold of a streaming checker: its
// valid_until (0: none), the release or acquire invocation of its process
// that ended it (closer, -1 while none has, and why) and the first death
// of its process at or after its start (-1: none known).
type holdEnds struct {
	validUntil int64
	closer     int64
	closedBy   endReason
	death      int64
}

// newHoldEnds are the ends of a hold just begun, leasing to validUntil.
func newHoldEnds(validUntil int64) holdEnds {
	return holdEnds{validUntil: validUntil, closer: -1, death: -1}
}

// end is when the hold ended as known now, and why; ok is false while
// nothing has ended it yet.
func (h *holdEnds) end() (int64, endReason, bool) {
	end, why, ok := int64(noEnd), endHistory, false
	if h.closer >= 0 {
		end, why, ok = h.closer, h.closedBy, true
	}
	if h.validUntil != 0 && h.validUntil < end {
		end, why, ok = h.validUntil, endValidUntil, true
	}
	if h.death >= 0 && h.death < end {
		end, why, ok = h.death, endDeath, true
	}
	return end, why, ok
}

// sHold is a hold as the streaming mutual-exclusion checker keeps it
// while it can still matter.
type sHold struct {
	holdEnds
	proc    int
	lock    string
	ok      history.Op // the acquire ok
	release int        // the index of the release invocation, or -1
	decided bool       // its own overlap (as a B) is decided
}

// StreamMutex checks mutual exclusion as MutualExclusion does, on the ops
// of a history as they are recorded (Add), without keeping the history:
// its memory is bounded by what is still open (holds whose end is not
// known yet, invocations not completed, kills under way) and by the ops
// the watermark holds back (reorder). Every overlap and foreign release
// it reports is one MutualExclusion reports of the whole history: it
// reports an overlap only once no op still to come can undo it (a release
// invocation at the same ns, a kill whose invocation came before).
// Finish ends the history and gives the Result, which agrees with
// MutualExclusion's: the same verdict, the same anomalies by kind and
// count, and the same stats; an anomaly may name another of the holds it
// overlapped.
type StreamMutex struct {
	ordering
	open    map[procLockName]*sHold // a process's hold not yet ended by a release or acquire invocation
	holds   map[string][]*sHold     // per lock, the holds that may still overlap one to come
	pending []*sHold                // holds whose own overlap is not decided yet
	invs    invocations             // per process, its invocation under way
	kills   killWatch
	// deaths are, per process, the deaths proved so far that a hold read
	// later may still begin by (its ok at the same ns, read after).
	deaths map[int][]int64
	now    int64 // the time of the last op read in order
	// decided is the safe time of the last decide: nothing changes
	// until it moves.
	decidedAt int64

	anomalies []Anomaly
	firstSeen int         // anomalies already given by Confirmed
	counts    mutexCounts // what the stats count, so far
	maxTime   int64
	// lockValues is, per lock value, the latest hold that wrote it while
	// that hold is kept: who a foreign release removed.
	lockValues map[lockValueName]*sHold
	// grants are, per lock and process, its latest grant; released, per
	// process, its latest release invocation and the grant to another
	// process during the hold it ended: what a stale release needs.
	grants   map[string]map[int]sGrant
	released map[int]sReleased
}

// sGrant is an acquire ok and its invocation, if known.
type sGrant struct {
	inv, ok history.Op
	hasInv  bool
}

// sReleased is a release invocation (its index inv), the hold it ended
// (nil for none) and the grant to another process during that hold (nil
// for none).
type sReleased struct {
	inv   int
	hold  *sHold
	taken *sGrant
}

type procLockName struct {
	proc int
	lock string
}

type lockValueName struct{ lock, value string }

// NewStreamMutex returns a streaming mutual-exclusion checker.
func NewStreamMutex() *StreamMutex {
	return &StreamMutex{ordering: ordering{newReorder()}, open: map[procLockName]*sHold{}, holds: map[string][]*sHold{},
		invs: invocations{}, kills: newKillWatch(), deaths: map[int][]int64{}, lockValues: map[lockValueName]*sHold{},
		grants: map[string]map[int]sGrant{}, released: map[int]sReleased{}}
}

// Add reads the op recorded next.
func (s *StreamMutex) Add(op history.Op) { add(s, op) }

// step decides what the ops read so far let it decide.
func (s *StreamMutex) step() { s.decide(false) }

// Confirmed returns the anomalies found since the last call: each is one
// the whole history has, whatever comes after.
func (s *StreamMutex) Confirmed() []Anomaly { return unseen(s.anomalies, &s.firstSeen) }

// Finish ends the history: every op held back is read, the holds still
// open last past its end, and the Result is MutualExclusion's.
func (s *StreamMutex) Finish() Result {
	s.r.ready(true, s.read)
	s.now = noEnd
	s.decide(true)
	r := newResult(MutualExclusion{}.Name())
	r.Anomalies = append(r.Anomalies, s.anomalies...)
	s.counts.put(r.Stats)
	return settle(r)
}

// read takes the next op in order.
func (s *StreamMutex) read(op history.Op) {
	s.maxTime = max(s.maxTime, op.Time)
	s.now = op.Time
	if op.Process >= 0 {
		s.kills.saw(op)
	}
	switch {
	case op.Process < 0:
		s.kills.nemesis(op, s.died)
		return
	case op.Type == history.Info && strings.HasPrefix(op.Error, "worker exited"):
		s.died(op.Process, op.Time)
	case op.Type == history.Notice:
		return
	}
	inv, hasInv, lock := s.invs.pair(op)
	key := procLockName{op.Process, lock}
	switch op.F {
	case history.Acquire:
		switch op.Type {
		case history.Invoke:
			if h := s.open[key]; h != nil {
				h.closer, h.closedBy = op.Time, endReacquire
				delete(s.open, key)
			}
		case history.OK:
			h := &sHold{holdEnds: newHoldEnds(op.Value.ValidUntil), proc: op.Process, lock: lock, ok: op, release: -1}
			for _, d := range s.deaths[op.Process] {
				if d >= h.ok.Time && (h.death < 0 || d < h.death) {
					h.death = d
				}
			}
			s.counts.holds++
			s.open[key] = h
			s.holds[lock] = append(s.holds[lock], h)
			s.pending = append(s.pending, h)
			if op.Value.LockValue != "" {
				s.lockValues[lockValueName{lock, op.Value.LockValue}] = h
			}
			if s.grants[lock] == nil {
				s.grants[lock] = map[int]sGrant{}
			}
			s.grants[lock][op.Process] = sGrant{inv: inv, ok: op, hasInv: hasInv}
		case history.Fail:
			s.counts.fail++
		case history.Info:
			s.counts.info++
		}
	case history.Release:
		switch op.Type {
		case history.Invoke:
			rel := sReleased{inv: op.Index}
			if h := s.open[key]; h != nil && !releasesOther(op.Value.LockValue, op.Value.Token, h.ok.Value.LockValue, h.ok.Value.Token) {
				h.closer, h.closedBy, h.release = op.Time, endRelease, op.Index
				delete(s.open, key)
				rel.hold, rel.taken = h, s.takenOver(h, op.Time)
			}
			s.released[op.Process] = rel
		case history.OK:
			own := ""
			if hasInv {
				own = inv.Value.LockValue
			}
			if removed := op.Value.Removed; removed != "" && removed != own {
				s.counts.foreign++
				s.anomalies = append(s.anomalies, s.foreignRelease(op, inv, hasInv, lock))
			} else if rel, ok := s.released[op.Process]; ok && hasInv && inv.Index == rel.inv && rel.taken != nil {
				s.counts.stale++
				a, g := rel.hold, rel.taken
				s.anomalies = append(s.anomalies, Anomaly{
					Kind:        KindStaleRelease,
					Ops:         []int{a.ok.Index, g.ok.Index, inv.Index, op.Index},
					Explanation: staleReleaseText(a.proc, lock, a.ok.Time, inv.Time, g.ok.Process, g.inv.Time, g.ok.Time, g.ok.Value.Token),
				})
			}
		}
	}
}

// takenOver returns the latest grant of a's lock to another process than
// a's that was invoked after a began, completed before at (the time of a's
// release invocation) and no earlier than a's valid_until, among the
// grants read so far, as MutualExclusion's; nil when there is none, or
// when a has no valid_until.
func (s *StreamMutex) takenOver(a *sHold, at int64) *sGrant {
	var taken *sGrant
	vu := a.ok.Value.ValidUntil
	if vu == 0 {
		return nil
	}
	for p, g := range s.grants[a.lock] {
		if p == a.proc || !g.hasInv || g.inv.Time <= a.ok.Time || g.ok.Time >= at || g.ok.Time < vu {
			continue
		}
		if taken == nil || before(taken.ok, g.ok) {
			taken = &g
		}
	}
	return taken
}

// died sets the death of process p at d on its holds that began by d and
// have no earlier death.
func (s *StreamMutex) died(p int, d int64) {
	s.deaths[p] = append(s.deaths[p], d)
	for _, hs := range s.holds {
		for _, h := range hs {
			if h.proc == p && h.ok.Time <= d && (h.death < 0 || d < h.death) {
				h.death = d
			}
		}
	}
}

// decide settles the holds whose overlap no op to come can change, and
// forgets the holds that can no longer overlap one to come. With final,
// the history has ended.
func (s *StreamMutex) decide(final bool) {
	// An op at the time of the last one read may still come; a kill
	// under way may still prove a death from its invocation on.
	safe := int64(noEnd)
	if !final {
		// Every op below the watermark has been read.
		safe = s.kills.earliest(s.r.watermark())
		if safe <= s.decidedAt {
			return
		}
		s.decidedAt = safe
	}
	kept := s.pending[:0]
	for _, b := range s.pending {
		if !final && b.ok.Time >= safe {
			kept = append(kept, b)
			continue
		}
		if a := s.overlapped(b, final); a != nil {
			s.counts.overlaps++
			s.anomalies = append(s.anomalies, s.overlap(a, b, final))
		}
		b.decided = true
	}
	s.pending = kept
	if final {
		return
	}
	for p, ds := range s.deaths {
		// A hold still to come begins at the watermark or later.
		ds = slices.DeleteFunc(ds, func(d int64) bool { return d < safe })
		if len(ds) == 0 {
			delete(s.deaths, p)
		} else {
			s.deaths[p] = ds
		}
	}
	for lock, hs := range s.holds {
		live := hs[:0]
		for _, h := range hs {
			if end, _, ok := h.end(); ok && end < safe && h.decided {
				// It ended before any hold still to be decided began.
				if k := (lockValueName{lock, h.ok.Value.LockValue}); s.lockValues[k] == h {
					delete(s.lockValues, k)
				}
				continue
			}
			live = append(live, h)
		}
		if len(live) == 0 {
			delete(s.holds, lock)
			continue
		}
		s.holds[lock] = live
	}
}

// overlapped returns the hold of another process that b began inside,
// or nil. As MutualExclusion, it looks only at the hold of another
// process, begun before b, that ends last (the first of those that end
// together), as far as is known now: an open hold ends after everything.
func (s *StreamMutex) overlapped(b *sHold, final bool) *sHold {
	var best *sHold
	var bestEnd int64
	for _, a := range s.holds[b.lock] {
		if a == b || a.proc == b.proc || !before(a.ok, b.ok) {
			continue
		}
		end, why, _ := a.end()
		if why == endHistory {
			end = noEnd
		}
		if best == nil || end > bestEnd || end == bestEnd && before(a.ok, best.ok) {
			best, bestEnd = a, end
		}
	}
	if best == nil {
		return nil
	}
	aEnd, aWhy, _ := best.end()
	bEnd, bWhy, _ := b.end()
	if (aEnd > b.ok.Time || aWhy == endHistory) && (bEnd > best.ok.Time || bWhy == endHistory) {
		return best
	}
	return nil
}

// invocations are, per process, its invocation under way, if open. A
// process's slot is made once and used again: a map of ops themselves
// would allocate each one it stores.
type invocations map[int]*openInv

// openInv is a process's latest invocation, under way while open.
type openInv struct {
	op   history.Op
	open bool
}

// pair keeps op when it is an invocation, and returns the invocation
// under way of op's process before it (hasInv says there is one), and
// the lock op is about, taken from its invocation when a completion does
// not repeat it.
func (invs invocations) pair(op history.Op) (inv history.Op, hasInv bool, lock string) {
	lock = op.Value.Lock
	slot := invs[op.Process]
	if slot != nil && slot.open {
		inv, hasInv = slot.op, true
	}
	if op.Type == history.Invoke {
		if slot == nil {
			slot = &openInv{}
			invs[op.Process] = slot
		}
		slot.op, slot.open = op, true
		return inv, hasInv, lock
	}
	if slot != nil {
		slot.open = false
	}
	if lock == "" && hasInv {
		lock = inv.Value.Lock
	}
	return inv, hasInv, lock
}

// before orders two ops by time, then index.
func before(a, b history.Op) bool {
	if a.Time != b.Time {
		return a.Time < b.Time
	}
	return a.Index < b.Index
}

// overlap explains that hold b began while a was still held, as
// MutualExclusion's does.
func (s *StreamMutex) overlap(a, b *sHold, final bool) Anomaly {
	end, why, _ := a.end()
	if why == endHistory {
		end = s.maxTime
	}
	var until string
	switch why {
	case endValidUntil:
		until = "believed valid until " + secs(end)
	case endRelease:
		until = "released only at " + secs(end)
	case endReacquire:
		until = "held until it invoked acquire again at " + secs(end)
	case endDeath:
		until = "held until its process was killed by " + secs(end)
	default:
		until = "never released before the history ended at " + secs(end)
		if !final {
			until = "not released by " + secs(s.now)
		}
	}
	ops := []int{a.ok.Index, b.ok.Index}
	if a.release >= 0 {
		ops = append(ops, a.release)
	}
	return Anomaly{
		Kind: KindOverlappingHolds,
		Ops:  ops,
		Explanation: fmt.Sprintf("process %d acquired lock %q at %s%s while process %d still held it (acquired at %s%s, %s)",
			b.proc, b.lock, secs(b.ok.Time), withToken(b.ok.Value.Token), a.proc, secs(a.ok.Time), tokenWord(a.ok.Value.Token), until),
	}
}

// foreignRelease explains a release ok that removed a lock value not its
// own, as MutualExclusion's does.
func (s *StreamMutex) foreignRelease(ok, inv history.Op, hasInv bool, lock string) Anomaly {
	own, at := "", ok.Time
	ops := []int{ok.Index}
	if hasInv {
		own, at = inv.Value.LockValue, inv.Time
		ops = []int{inv.Index, ok.Index}
	}
	var whose string
	if o := s.lockValues[lockValueName{lock, ok.Value.Removed}]; o != nil && before(o.ok, ok) {
		ops = append(ops, o.ok.Index)
		whose = fmt.Sprintf(" of process %d (acquired at %s%s)", o.proc, secs(o.ok.Time), tokenWord(o.ok.Value.Token))
	}
	return Anomaly{
		Kind: KindForeignRelease,
		Ops:  ops,
		Explanation: fmt.Sprintf("process %d's release of lock %q at %s removed lock value %q%s, not its own %q",
			ok.Process, lock, secs(at), ok.Value.Removed, whose, own),
	}
}
