package checker

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// rHold is a hold as the streaming resource checker keeps it: the
// writer's lease, and the first hold of another process that began after
// the lease ended (the holder a stale write tramples).
type rHold struct {
	proc       int
	lock       string
	ok         history.Op
	validUntil int64
	release    int64 // the time of the release invocation that ended it, or -1
	// closed says a release or acquire invocation of its process ended
	// it (only the first one counts, as MutualExclusion's holds end).
	closed     bool
	firstOther *rHold
	latest     bool // it is its process's latest hold of the lock
	refs       int  // the writes under way or undecided that were made under it
}

// leaseEnd is the end of the lease as Resource takes it: the earlier of
// valid_until and the release invocation; a later acquire does not end it.
func (h *rHold) leaseEnd() int64 {
	end := int64(noEnd)
	if h.release >= 0 {
		end = h.release
	}
	if h.validUntil != 0 && h.validUntil < end {
		end = h.validUntil
	}
	return end
}

// rWrite is a write as the streaming resource checker keeps it until it is
// placed in its lock's sequence.
type rWrite struct {
	inv  history.Op
	done history.Op
	lock string
	hold *rHold
	read *history.Op // the writer's latest read ok since its latest acquire invocation
	// The accepted write's place and values, once decided.
	store          int64
	n, base        int64
	hasN, hasBase  bool
	token          *uint64
	completed      bool
	decidedUnknown bool
}

// StreamResource checks what the resource store accepted, as Resource
// does, on the ops of a history as they are recorded (Add), without
// keeping the history. A write is judged once every op up to its
// completion's time has been read: a stale write (and whom it trampled)
// or a late one, a rejected write and whether the writer's lease was
// live. Accepted writes are put in their lock's store order once no write
// still open can come before them, and the lost updates and token
// regressions among them found there. Its memory is bounded by what is
// open: each process's latest hold and read, the writes under way or not
// yet placed, and the ops the watermark holds back. Finish ends the
// history and gives Resource's Result, but for the statistics and notes
// of lost-lock notices, which need the whole history: Resource adds them.
type StreamResource struct {
	mode string
	ordering
	last  map[procLockName]*rHold
	reads map[procLockName]*history.Op
	invs  invocations
	open  map[int]*rWrite // per process, its write under way
	// watched are, per lock, the holds whose firstOther is still to find
	// and that a write may still be judged under.
	watched map[string][]*rHold
	// undecided are the completed writes waiting for the watermark.
	undecided []*rWrite
	// unplaced are, per lock, the writes invoked but not yet decided,
	// by invocation index: an accepted write waits until none of them
	// can come before it.
	unplaced map[string]map[int]int64
	ready    map[string]*writeHeap
	prev     map[string]*rWrite // per lock, the last write placed
	top      map[string]*rWrite // per lock, the placed write of the highest token
	// regs collapses the token regressions as Resource does, by lock id
	// (lockIDs) and by the id of the write that set the maximum.
	regs    *regressions
	lockIDs map[string]int32

	settledAt        int64 // the watermark of the last settle
	anomalies, notes []Anomaly
	// liveNotes are the live-write-rejected notes, by their place in
	// notes, written at Finish: how the writer's lease ended may be read
	// after the write is judged.
	liveNotes map[int]*rWrite
	// anomalyKeys and noteKeys are the places of anomalies and notes in
	// Resource's lists; lockSeen numbers the locks in the order their
	// first op was read.
	anomalyKeys    []rKey
	noteKeys       []opAt
	lockSeen       map[string]int
	firstSeen      int
	resourceCounts // what the stats count, so far
}

// NewStreamResource returns a streaming resource checker of the resource
// mode mode (Resource.Mode).
func NewStreamResource(mode string) *StreamResource {
	return &StreamResource{mode: mode, ordering: ordering{newReorder()}, last: map[procLockName]*rHold{}, reads: map[procLockName]*history.Op{},
		invs: invocations{}, open: map[int]*rWrite{}, watched: map[string][]*rHold{}, unplaced: map[string]map[int]int64{},
		ready: map[string]*writeHeap{}, prev: map[string]*rWrite{}, top: map[string]*rWrite{}, regs: newRegressions(0), lockIDs: map[string]int32{}, lockSeen: map[string]int{}}
}

// Add reads the op recorded next.
func (s *StreamResource) Add(op history.Op) { add(s, op) }

// step judges and places what the ops read so far let it.
func (s *StreamResource) step() {
	// Nothing can be judged or placed until the watermark moves or a
	// write completes.
	if w := s.r.watermark(); w > s.settledAt || len(s.undecided) > 0 {
		s.settledAt = w
		s.settle(w)
	}
}

// Confirmed returns the anomalies found since the last call.
func (s *StreamResource) Confirmed() []Anomaly { return unseen(s.anomalies, &s.firstSeen) }

// Finish ends the history and gives Resource's Result.
func (s *StreamResource) Finish() Result {
	s.r.ready(true, s.read)
	for _, w := range s.open {
		s.unknown++
		s.unplace(w)
		s.unref(w)
	}
	s.open = map[int]*rWrite{}
	s.settle(noEnd)
	r := newResult(Resource{}.Name())
	r.Anomalies = append(r.Anomalies, s.anomalies...)
	for i, w := range s.liveNotes {
		s.notes[i] = s.liveRejected(w)
	}
	r.Notes = append(r.Notes, s.notes...)
	s.regs.finish(r.Anomalies, "accepted write")
	r.Anomalies = inOrder(r.Anomalies, s.anomalyKeys)
	r.Notes = inOrder(r.Notes, s.noteKeys)
	var regs *regressions
	if (Resource{Mode: s.mode}).fenced() {
		regs = s.regs
	}
	s.resourceCounts.put(r.Stats, regs)
	return settle(r)
}

// read takes the next op in order.
func (s *StreamResource) read(op history.Op) {
	if l := op.Value.Lock; l != "" {
		if _, ok := s.lockSeen[l]; !ok {
			s.lockSeen[l] = len(s.lockSeen)
		}
	}
	if op.Process < 0 || op.Type == history.Notice {
		return
	}
	inv, hasInv, lock := s.invs.pair(op)
	key := procLockName{op.Process, lock}
	switch op.F {
	case history.Acquire:
		switch op.Type {
		case history.Invoke:
			delete(s.reads, key)
			if h := s.last[key]; h != nil {
				h.closed = true
			}
		case history.OK:
			h := &rHold{proc: op.Process, lock: lock, ok: op, validUntil: op.Value.ValidUntil, release: -1, latest: true}
			s.trample(h)
			if old := s.last[key]; old != nil {
				old.latest = false
			}
			s.last[key] = h
			s.watched[lock] = append(s.watched[lock], h)
		}
	case history.Release:
		if op.Type == history.Invoke {
			if h := s.last[key]; h != nil && !h.closed && !releasesOther(op.Value.LockValue, op.Value.Token, h.ok.Value.LockValue, h.ok.Value.Token) {
				h.release, h.closed = op.Time, true
			}
		}
	case history.Read:
		if op.Type == history.OK {
			o := op
			if o.Value.N == nil && hasInv {
				o.Value.N = inv.Value.N
			}
			s.reads[key] = &o
		}
	case history.Write:
		if op.Type == history.Invoke {
			w := &rWrite{inv: op, lock: lock, hold: s.last[key], read: s.reads[key]}
			if w.hold != nil {
				w.hold.refs++
			}
			s.open[op.Process] = w
			if s.unplaced[lock] == nil {
				s.unplaced[lock] = map[int]int64{}
			}
			s.unplaced[lock][op.Index] = op.Time
			return
		}
		w := s.open[op.Process]
		if w == nil {
			return
		}
		delete(s.open, op.Process)
		w.done, w.completed = op, true
		s.undecided = append(s.undecided, w)
	}
}

// trample sets g as the first hold of another process after the lease of
// every watched hold of its lock whose lease ended before g began.
func (s *StreamResource) trample(g *rHold) {
	hs := s.watched[g.lock]
	kept := hs[:0]
	for _, h := range hs {
		if h.firstOther == nil && h.proc != g.proc && h.leaseEnd() < g.ok.Time {
			h.firstOther = g
		}
		if h.firstOther == nil && (h.latest || h.refs > 0) {
			kept = append(kept, h)
		}
	}
	s.watched[g.lock] = kept
}

// unref drops w's hold from the watched ones when nothing needs it.
func (s *StreamResource) unref(w *rWrite) {
	if w.hold != nil {
		w.hold.refs--
	}
}

// unplace drops w from the writes its lock's placing waits for.
func (s *StreamResource) unplace(w *rWrite) {
	if m := s.unplaced[w.lock]; m != nil {
		delete(m, w.inv.Index)
		if len(m) == 0 {
			delete(s.unplaced, w.lock)
		}
	}
}

// settle judges the writes completed before safe, and places the accepted
// writes no open one can come before.
func (s *StreamResource) settle(safe int64) {
	kept := s.undecided[:0]
	for _, w := range s.undecided {
		if w.done.Time >= safe {
			kept = append(kept, w)
			continue
		}
		s.judge(w)
		s.unplace(w)
		s.unref(w)
	}
	s.undecided = kept
	for lock, q := range s.ready {
		for q.Len() > 0 {
			w := (*q)[0]
			if w.store >= safe {
				break
			}
			blocked := false
			for _, t := range s.unplaced[lock] {
				if t <= w.store {
					blocked = true
					break
				}
			}
			if blocked {
				break
			}
			heap.Pop(q)
			s.place(w)
		}
		if q.Len() == 0 {
			delete(s.ready, lock)
		}
	}
}

// judge classifies a completed write, as Resource does.
func (s *StreamResource) judge(w *rWrite) {
	done := w.done
	if done.Type == history.Info {
		s.unknown++
		return
	}
	w.store = done.Value.StoreTime
	if w.store == 0 {
		w.store = w.inv.Time
	}
	if done.Type == history.Fail {
		if done.Value.StoreTime == 0 && !strings.HasPrefix(done.Error, "rejected") {
			s.failed++
			return
		}
		s.rejected++
		if w.hold != nil && w.store <= w.hold.leaseEnd() {
			s.live++
			if s.liveNotes == nil {
				s.liveNotes = map[int]*rWrite{}
			}
			s.liveNotes[len(s.notes)] = w
			s.note(w, Anomaly{})
		} else {
			s.note(w, s.rejectedNote(w))
		}
		return
	}
	s.accepted++
	w.token = done.Value.Token
	if w.token == nil {
		w.token = w.inv.Value.Token
	}
	if n := done.Value.N; n != nil {
		w.n, w.hasN = *n, true
	} else if n := w.inv.Value.N; n != nil {
		w.n, w.hasN = *n, true
	}
	if w.read != nil && w.read.Value.N != nil {
		w.base, w.hasBase = *w.read.Value.N, true
	} else if n := w.inv.Value.N; n != nil {
		w.base, w.hasBase = *n-1, true
	}
	if q := s.ready[w.lock]; q == nil {
		s.ready[w.lock] = &writeHeap{}
	}
	heap.Push(s.ready[w.lock], w)
	if h := w.hold; h == nil || w.store > h.leaseEnd() {
		if h != nil && h.leaseEnd() != noEnd && !(h.release >= 0 && h.release <= h.leaseEnd()) &&
			(h.firstOther == nil || h.firstOther.ok.Time > w.store) {
			s.late++
			s.note(w, s.lateNote(w))
			return
		}
		s.stale++
		s.found(rKey{at: at(w.inv)}, s.staleWrite(w))
	}
}

// place takes the next accepted write of its lock in store order: a lost
// update over the one before it, a token regression below the highest
// token before it.
func (s *StreamResource) place(b *rWrite) {
	if a := s.prev[b.lock]; a != nil && a.hasN && b.hasBase && b.base < a.n {
		s.lost++
		s.updates += a.n - b.base
		s.found(rKey{rank: 1, lock: s.lockSeen[b.lock]}, s.lostUpdate(a, b))
	}
	s.prev[b.lock] = b
	if !(Resource{Mode: s.mode}).fenced() || b.token == nil {
		return
	}
	a := s.top[b.lock]
	switch {
	case a == nil || *b.token > *a.token:
		s.top[b.lock] = b
	case *b.token < *a.token:
		lock, ok := s.lockIDs[b.lock]
		if !ok {
			lock = int32(len(s.lockIDs))
			s.lockIDs[b.lock] = lock
		}
		if !s.regs.add(lock, int32(a.inv.Index), len(s.anomalies), *a.token) {
			return
		}
		s.found(rKey{rank: 2, lock: s.lockSeen[b.lock]}, Anomaly{
			Kind: KindTokenRegression,
			Ops:  timeOrdered(a.done, b.inv, b.done),
			Explanation: fmt.Sprintf("the store accepted process %d's write of token %d under lock %q at %s after it had accepted process %d's write of token %d at %s",
				b.inv.Process, *b.token, b.lock, secs(b.store), a.inv.Process, *a.token, secs(a.store)),
		})
	}
}

// wrote renders "wrote 12 under lock "x" with token 41".
func (w *rWrite) wrote() string {
	var b strings.Builder
	b.WriteString("wrote")
	if n := w.invN(); n != nil {
		fmt.Fprintf(&b, " %d", *n)
	}
	fmt.Fprintf(&b, " under lock %q", w.lock)
	if t := w.invToken(); t != nil {
		fmt.Fprintf(&b, " with token %d", *t)
	}
	return b.String()
}

// invN and invToken are the invocation's n and token, or its
// completion's when it carries none.
func (w *rWrite) invN() *int64 {
	if w.inv.Value.N != nil || !w.completed {
		return w.inv.Value.N
	}
	return w.done.Value.N
}

func (w *rWrite) invToken() *uint64 {
	if w.inv.Value.Token != nil || !w.completed {
		return w.inv.Value.Token
	}
	return w.done.Value.Token
}

func (s *StreamResource) staleWrite(w *rWrite) Anomaly {
	if w.hold == nil {
		return Anomaly{Kind: KindStaleWrite, Ops: timeOrdered(w.inv, w.done),
			Explanation: fmt.Sprintf("process %d %s at %s without having acquired the lock", w.inv.Process, w.wrote(), secs(w.store))}
	}
	h := w.hold
	end := h.leaseEnd()
	ended := "its lease ended"
	if h.release >= 0 && h.release == end {
		ended = "it invoked release"
	}
	expl := fmt.Sprintf("process %d %s at %s, %s after %s at %s", w.inv.Process, w.wrote(), secs(w.store), secs(w.store-end), ended, secs(end))
	ops := []history.Op{h.ok, w.inv, w.done}
	if o := h.firstOther; o != nil && o.ok.Time <= w.store {
		ops = append(ops, o.ok)
		if tok := o.ok.Value.Token; tok != nil {
			expl += fmt.Sprintf("; process %d had acquired token %d at %s", o.proc, *tok, secs(o.ok.Time))
		} else {
			expl += fmt.Sprintf("; process %d had acquired the lock at %s", o.proc, secs(o.ok.Time))
		}
	}
	return Anomaly{Kind: KindStaleWrite, Ops: timeOrdered(ops...), Explanation: expl}
}

func (s *StreamResource) lateNote(w *rWrite) Anomaly {
	h := w.hold
	end := h.leaseEnd()
	return Anomaly{Kind: KindLateWrite, Ops: timeOrdered(h.ok, w.inv, w.done),
		Explanation: fmt.Sprintf("process %d %s at %s, %s after its lease ended at %s, but before any other process acquired the lock: a stale write that trampled nobody",
			h.proc, w.wrote(), secs(w.store), secs(w.store-end), secs(end))}
}

func (w *rWrite) rejectedWhat() (what, reason string) {
	what = "write"
	if t := w.invToken(); t != nil {
		what = fmt.Sprintf("write of token %d", *t)
	} else if n := w.invN(); n != nil {
		what = fmt.Sprintf("write of %d", *n)
	}
	reason = w.done.Error
	if reason == "" {
		reason = "no reason given"
	}
	return what, reason
}

func (s *StreamResource) rejectedNote(w *rWrite) Anomaly {
	what, reason := w.rejectedWhat()
	return Anomaly{Kind: KindWriteRejected, Ops: timeOrdered(w.inv, w.done),
		Explanation: fmt.Sprintf("the store rejected process %d's %s under lock %q at %s: %s (saved by fencing)", w.inv.Process, what, w.lock, secs(w.store), reason)}
}

func (s *StreamResource) liveRejected(w *rWrite) Anomaly {
	what, reason := w.rejectedWhat()
	h := w.hold
	var lease string
	switch end := h.leaseEnd(); {
	case end == noEnd:
		lease = "its lease had not ended"
	case h.release >= 0 && h.release == end:
		lease = "it held the lock until it invoked release at " + secs(end)
	default:
		lease = "its lease ran until " + secs(end)
	}
	return Anomaly{Kind: KindLiveWriteRejected, Ops: timeOrdered(w.inv, w.done),
		Explanation: fmt.Sprintf("the store rejected process %d's %s under lock %q at %s (%s) although %s: an availability cost of the resource's check",
			w.inv.Process, what, w.lock, secs(w.store), reason, lease)}
}

func (s *StreamResource) lostUpdate(a, b *rWrite) Anomaly {
	var based string
	ops := []history.Op{a.done}
	if b.read != nil && b.read.Value.N != nil {
		at := b.read.Value.StoreTime
		if at == 0 {
			at = b.read.Time
		}
		based = fmt.Sprintf("read %d at %s", b.base, secs(at))
		ops = append(ops, *b.read)
	} else {
		based = fmt.Sprintf("read nothing, so based on %d", b.base)
	}
	ops = append(ops, b.done)
	wrote := "wrote"
	if b.hasN {
		wrote = fmt.Sprintf("wrote %d", b.n)
	}
	return Anomaly{Kind: KindLostUpdate, Ops: timeOrdered(ops...),
		Explanation: fmt.Sprintf("process %d %s under lock %q (%s) at %s over process %d's write of %d at %s: %s lost",
			b.inv.Process, wrote, b.lock, based, secs(b.store), a.inv.Process, a.n, secs(a.store), plural(a.n-b.base, "update"))}
}

// writeHeap orders a lock's accepted writes as the store took them: by
// store time, then by their completions' time and index.
type writeHeap []*rWrite

func (h writeHeap) Len() int { return len(h) }
func (h writeHeap) Less(i, j int) bool {
	if h[i].store != h[j].store {
		return h[i].store < h[j].store
	}
	return before(h[i].done, h[j].done)
}
func (h writeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *writeHeap) Push(x any)   { *h = append(*h, x.(*rWrite)) }
func (h *writeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// timeOrdered returns the indexes of ops in time order (then index), each
// once, as an anomaly lists them.
func timeOrdered(ops ...history.Op) []int {
	refs := make([]lvRef, len(ops))
	for i, op := range ops {
		refs[i] = lvRef{t: op.Time, idx: op.Index}
	}
	return refIndexes(refs)
}

// rKey is the place of an anomaly in Resource's list: the stale writes
// (rank 0) by their invocations, then the lost updates (1) and the token
// regressions (2), each by lock, in the order they were found.
type rKey struct {
	rank, lock int
	at         opAt
}

func (k rKey) compare(o rKey) int {
	return cmp.Or(cmp.Compare(k.rank, o.rank), cmp.Compare(k.lock, o.lock), k.at.compare(o.at))
}

func (a opAt) compare(b opAt) int {
	return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Index, b.Index))
}

// found adds anomaly a, whose place in Resource's list is k.
func (s *StreamResource) found(k rKey, a Anomaly) {
	s.anomalies = append(s.anomalies, a)
	s.anomalyKeys = append(s.anomalyKeys, k)
}

// note adds note a of write w: Resource lists the notes by their writes'
// invocations.
func (s *StreamResource) note(w *rWrite, a Anomaly) {
	s.notes = append(s.notes, a)
	s.noteKeys = append(s.noteKeys, at(w.inv))
}

// inOrder returns as sorted by their keys, stably.
func inOrder[K interface{ compare(K) int }](as []Anomaly, keys []K) []Anomaly {
	idx := make([]int, len(as))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int { return keys[i].compare(keys[j]) })
	out := make([]Anomaly, len(as))
	for i, j := range idx {
		out[i] = as[j]
	}
	return out
}
