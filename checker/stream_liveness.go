package checker

import (
	"cmp"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// StreamLiveness checks liveness as Liveness does, on the ops of a history
// as they are recorded (Add), without keeping the history: it keeps, per
// lock, its latest hold and the acquire attempts made since that hold
// could have ended, the holds whose end is not known yet, the acquires of
// unknown outcome whose process died and that may still leave a lock
// stuck, and one latency per acquire ok (for the percentiles). A stuck
// lock is a fact about the end of a history, so it confirms nothing
// before Finish. Finish gives Liveness's Result, but for the statistics of
// lost-lock notices, which need the whole history: Liveness adds them.
type StreamLiveness struct {
	ordering
	minAttempts int
	minWindow   int64

	kills killWatch
	invs  invocations // per process, its invocation under way
	// deaths are, per process, the death times proved so far (deathTime's
	// rule), which end its holds; deathOps the ops that proved them, as
	// the stuck-lock rule reads them (each op's own time).
	deaths   map[int][]int64
	deathOps map[int]lvDeath
	// cur is, per process, its acquire invocation under way.
	cur map[int]*lvAttempt
	// waiting are, per process, its acquires of unknown outcome whose
	// death is not known yet.
	waiting map[int][]*lvAttempt

	open   map[procLockName]*lvHold // a process's hold not yet ended by a release or acquire invocation
	live   []*lvHold                // holds whose end may still change
	lockID map[string]int
	locks  []*lvLock

	attempts  int
	holdsN    int
	firstTime int64
	maxTime   int64
	lat       []int64

	// The longest time with no acquire ok.
	prevStart, longest int64
	lastStart          int64
	haveStart          bool

	// The fault windows (faultWindows), and what the stats of each need.
	faultOpen int64 // the open window's start, or -1
	windows   []*lvWindow
	// maxFinalEnd is the latest end of the holds whose end is final.
	maxFinalEnd int64
	// recoveryDue are the closed windows still waiting for an acquire ok.
	recoveryDue []*lvWindow
	// The quiet time outside fault windows (longestOutside).
	quietOn            bool // the first client op was read
	inFault            bool
	quietPrev, quietAt int64 // the quiet span's start; its last cut
	longestOut         int64
	rec                lvRecovery
}

// lvDeath is the latest op that showed a process dead: its time and index,
// the first op of that time.
type lvDeath struct {
	t   int64
	idx int
	f   string
}

// lvHold is a hold as StreamLiveness keeps it.
type lvHold struct {
	holdEnds
	proc    int
	lock    int
	okIdx   int
	start   int64
	token   *uint64
	value   string
	release *lvRelease
	deathOp *lvDeath
	// endAt and endWhy are its end once final (finalize).
	endAt  int64
	endWhy endReason
}

// lvRelease is the release invocation that ended a hold, and how it
// completed.
type lvRelease struct {
	idx    int
	t      int64
	done   bool
	ok     bool
	doneAt int64
	doneIx int
}

// lvAttempt is one acquire invocation, and how it completed.
type lvAttempt struct {
	proc    int
	lock    int
	t       int64
	idx     int
	done    bool
	typ     history.Type
	doneAt  int64
	doneIx  int
	refusal bool
	// died is the first op at or after t that showed its process dead;
	// diedOK says there is one.
	died   lvDeath
	diedOK bool
}

// lvLock is what StreamLiveness keeps of one lock.
type lvLock struct {
	name string
	last *lvHold
	// attempts are the acquire invocations of the lock from the earliest
	// time a candidate of it may have ended on.
	attempts []*lvAttempt
	// unknowns are the acquires of unknown outcome whose process died
	// after them and that may still be the lock's candidate.
	unknowns []*lvAttempt
}

// lvWindow is one closed fault window.
type lvWindow struct {
	from, to  int64
	effective bool
}

// NewStreamLiveness returns a streaming liveness checker with the
// thresholds of c.
func NewStreamLiveness(c Liveness) *StreamLiveness {
	s := &StreamLiveness{ordering: ordering{newReorder()}, minAttempts: c.MinAttempts, minWindow: int64(c.MinWindow),
		kills: newKillWatch(), invs: invocations{}, deaths: map[int][]int64{}, deathOps: map[int]lvDeath{},
		cur: map[int]*lvAttempt{}, waiting: map[int][]*lvAttempt{}, open: map[procLockName]*lvHold{},
		lockID: map[string]int{}, firstTime: -1, faultOpen: -1, maxFinalEnd: -1 << 63}
	if s.minAttempts <= 0 {
		s.minAttempts = DefaultStuckAttempts
	}
	if s.minWindow <= 0 {
		s.minWindow = int64(DefaultStuckWindow)
	}
	return s
}

var _ Stream = (*StreamLiveness)(nil)

// Add reads the op recorded next.
func (s *StreamLiveness) Add(op history.Op) { add(s, op) }

// Confirmed returns nothing: a stuck lock is known only at the end.
func (s *StreamLiveness) Confirmed() []Anomaly { return nil }

// step ends the holds whose end no op to come can change.
func (s *StreamLiveness) step() {
	safe := s.kills.earliest(s.r.watermark())
	kept := s.live[:0]
	for _, h := range s.live {
		if e, _, ok := h.end(); ok && e < safe {
			s.finalize(h)
			continue
		}
		kept = append(kept, h)
	}
	clear(s.live[len(kept):])
	s.live = kept
}

// finalize fixes h's end: the earliest of what ended it, or the
// history's end.
func (s *StreamLiveness) finalize(h *lvHold) {
	var ok bool
	if h.endAt, h.endWhy, ok = h.end(); !ok {
		h.endAt, h.endWhy = s.maxTime, endHistory
	}
	s.maxFinalEnd = max(s.maxFinalEnd, h.endAt)
	for _, w := range s.windows {
		if !w.effective && h.start <= w.to && h.endAt >= w.from {
			w.effective = true
		}
	}
}

// read takes the next op in order.
func (s *StreamLiveness) read(op history.Op) {
	s.maxTime = max(s.maxTime, op.Time)
	if op.Process >= 0 {
		s.kills.saw(op)
		if s.firstTime < 0 {
			s.firstTime = op.Time
			s.startQuiet(op.Time)
		}
	}
	if op.Process < 0 {
		s.nemesis(op)
		return
	}
	if op.Type == history.Notice {
		return
	}
	if op.Type == history.Info && strings.HasPrefix(op.Error, "worker exited") {
		s.deathOp(op.Process, op)
		s.died(op.Process, op.Time)
	}
	switch op.F {
	case history.Acquire, history.Release, history.Read, history.Write:
	default:
		return
	}
	inv, hasInv, lockName := s.invs.pair(op)
	l := s.lock(lockName)
	key := procLockName{op.Process, lockName}
	switch op.F {
	case history.Acquire:
		switch op.Type {
		case history.Invoke:
			s.attempts++
			if h := s.open[key]; h != nil {
				h.closer, h.closedBy = op.Time, endReacquire
				delete(s.open, key)
			}
			a := &lvAttempt{proc: op.Process, lock: l, t: op.Time, idx: op.Index}
			if d, ok := s.deathOps[op.Process]; ok && d.t == op.Time {
				a.died, a.diedOK = d, true
			}
			s.cur[op.Process] = a
			s.locks[l].attempts = append(s.locks[l].attempts, a)
		default:
			s.completeAttempt(op)
			if op.Type == history.OK {
				s.hold(op, inv, hasInv, l, key)
			}
		}
	case history.Release:
		switch op.Type {
		case history.Invoke:
			if h := s.open[key]; h != nil && !releasesOther(op.Value.LockValue, op.Value.Token, h.value, h.token) {
				h.closer, h.closedBy = op.Time, endRelease
				h.release = &lvRelease{idx: op.Index, t: op.Time}
				delete(s.open, key)
			}
		default:
			// The hold this release ended, if it ended one.
			if last := s.locks[l].last; last != nil && last.release != nil && hasInv && last.release.idx == inv.Index {
				rel := last.release
				rel.done, rel.ok, rel.doneAt, rel.doneIx = true, op.Type == history.OK, op.Time, op.Index
			}
		}
	}
}

// lock returns the id of the lock called name.
func (s *StreamLiveness) lock(name string) int {
	id, ok := s.lockID[name]
	if !ok {
		id = len(s.locks)
		s.lockID[name] = id
		s.locks = append(s.locks, &lvLock{name: name})
	}
	return id
}

// completeAttempt records the completion op of its process's acquire
// under way.
func (s *StreamLiveness) completeAttempt(op history.Op) {
	a := s.cur[op.Process]
	if a == nil {
		return
	}
	delete(s.cur, op.Process)
	a.done, a.typ, a.doneAt, a.doneIx = true, op.Type, op.Time, op.Index
	a.refusal = op.Type == history.Fail && !strings.HasPrefix(op.Error, history.NotSent)
	if op.Type == history.Info {
		s.unknown(a)
	}
}

// unknown takes a, an acquire of unknown outcome: a candidate once its
// process is known dead after it.
func (s *StreamLiveness) unknown(a *lvAttempt) {
	if a.diedOK {
		s.candidate(a)
		return
	}
	s.waiting[a.proc] = append(s.waiting[a.proc], a)
}

// candidate keeps a, an acquire of unknown outcome whose process died
// after it, unless a hold already began after that death: then it can no
// longer be what left its lock stuck (the lock's last hold began after
// it, and was not freed before it).
func (s *StreamLiveness) candidate(a *lvAttempt) {
	lk := s.locks[a.lock]
	if lk.last != nil && lk.last.start > a.died.t {
		return
	}
	lk.unknowns = append(lk.unknowns, a)
}

// hold records the hold that the acquire ok op begins.
func (s *StreamLiveness) hold(op, inv history.Op, hasInv bool, l int, key procLockName) {
	h := &lvHold{holdEnds: newHoldEnds(op.Value.ValidUntil), proc: op.Process, lock: l, okIdx: op.Index, start: op.Time,
		token: op.Value.Token, value: op.Value.LockValue}
	for _, d := range s.deaths[op.Process] {
		if d >= h.start && (h.death < 0 || d < h.death) {
			h.death = d
		}
	}
	if d, ok := s.deathOps[op.Process]; ok && d.t == op.Time {
		h.deathOp = &d
	}
	s.holdsN++
	if hasInv {
		s.lat = append(s.lat, op.Time-inv.Time)
	}
	s.open[key] = h
	s.live = append(s.live, h)
	lk := s.locks[l]
	lk.last = h
	// What no candidate of the lock can need any more: the attempts
	// invoked before the earliest end a candidate may have, and the
	// unknown acquires whose death came before this hold began.
	from := h.start
	if h.validUntil != 0 {
		from = min(from, h.validUntil)
	}
	lk.unknowns = slices.DeleteFunc(lk.unknowns, func(a *lvAttempt) bool { return a.died.t < h.start })
	for _, a := range lk.unknowns {
		from = min(from, a.died.t)
	}
	n := 0
	for n < len(lk.attempts) && lk.attempts[n].t < from {
		n++
	}
	lk.attempts = slices.Delete(lk.attempts, 0, n)

	// The gaps between grants, and the recovery after each heal.
	if !s.haveStart {
		s.prevStart = s.firstTime
	}
	s.longest = max(s.longest, h.start-s.prevStart)
	s.prevStart = max(s.prevStart, h.start)
	s.lastStart, s.haveStart = h.start, true
	for _, w := range s.recoveryDue {
		s.recovered(w, h.start)
	}
	s.recoveryDue = s.recoveryDue[:0]
	s.quietCut(h.start)
}

// recovery sums.
type lvRecovery struct {
	worst, sum int64
	n, never   int
}

// recovered notes that the first acquire ok after window w's heal began
// at start.
func (s *StreamLiveness) recovered(w *lvWindow, start int64) {
	d := start - w.to
	s.rec.worst, s.rec.sum, s.rec.n = max(s.rec.worst, d), s.rec.sum+d, s.rec.n+1
}

// deathOp notes op, which shows process p dead.
func (s *StreamLiveness) deathOp(p int, op history.Op) {
	d := lvDeath{t: op.Time, idx: op.Index, f: op.F}
	if old, ok := s.deathOps[p]; !ok || old.t != op.Time {
		s.deathOps[p] = d
	} else {
		d = old // the first op of that time
	}
	if a := s.cur[p]; a != nil && !a.diedOK {
		a.died, a.diedOK = d, true
	}
	for _, a := range s.waiting[p] {
		if !a.diedOK {
			a.died, a.diedOK = d, true
		}
		s.candidate(a)
	}
	delete(s.waiting, p)
	for _, lk := range s.locks {
		if h := lk.last; h != nil && h.proc == p && h.deathOp == nil && d.t >= h.start {
			h.deathOp = &d
		}
	}
}

// died sets the death of process p at d on its holds that began by d and
// have no earlier death.
func (s *StreamLiveness) died(p int, d int64) {
	s.deaths[p] = append(s.deaths[p], d)
	for _, h := range s.live {
		if h.proc == p && h.start <= d && (h.death < 0 || d < h.death) {
			h.death = d
		}
	}
}

// nemesis reads an op of the nemesis: a fault's window, and the deaths a
// kill proves.
func (s *StreamLiveness) nemesis(op history.Op) {
	if op.Type == history.OK && history.Kills(op) {
		for _, t := range op.Value.Targets {
			if p, ok := processTarget(t); ok {
				s.deathOp(p, op)
			}
		}
	}
	s.kills.nemesis(op, s.died)
	heal := history.IsHeal(op.F)
	switch {
	case !heal && op.Type == history.Invoke && s.faultOpen < 0:
		s.faultOpen = op.Time
		s.quietClose(op.Time)
	case heal && op.Type != history.Invoke && s.faultOpen >= 0:
		s.closeWindow(s.faultOpen, max(s.faultOpen, op.Time))
		s.faultOpen = -1
	}
}

// closeWindow records the fault window [from, to].
func (s *StreamLiveness) closeWindow(from, to int64) {
	w := &lvWindow{from: from, to: to}
	s.windows = append(s.windows, w)
	// The holds whose end is final and that began by to (every one read
	// so far began by now); the others are checked as they end.
	if s.maxFinalEnd >= from {
		w.effective = true
	}
	if s.haveStart && s.lastStart == to {
		s.recovered(w, to)
	} else {
		s.recoveryDue = append(s.recoveryDue, w)
	}
	s.quietOpen(to)
}

// startQuiet begins the quiet time at the first client op, t.
func (s *StreamLiveness) startQuiet(t int64) {
	s.quietOn = true
	s.quietPrev = max(t, s.quietPrev)
	s.quietAt = s.quietPrev
	s.inFault = s.faultOpen >= 0
}

// quietClose ends the quiet span at from, where a fault window begins.
func (s *StreamLiveness) quietClose(from int64) {
	if !s.quietOn {
		return
	}
	if from > s.quietPrev {
		s.longestOut = max(s.longestOut, from-s.quietAt)
	}
	s.inFault = true
}

// quietOpen begins a quiet span at to, where a fault window ended.
func (s *StreamLiveness) quietOpen(to int64) {
	if !s.quietOn {
		s.quietPrev = max(s.quietPrev, to)
		return
	}
	s.quietPrev = max(s.quietPrev, to)
	s.quietAt = s.quietPrev
	s.inFault = false
}

// quietCut cuts the quiet span at an acquire ok at t.
func (s *StreamLiveness) quietCut(t int64) {
	if !s.quietOn {
		return
	}
	// An acquire ok at the time a window began, read after its
	// injection, would cut the span it closed at that very time: the
	// span's longest piece is the same.
	if !s.inFault && t >= s.quietPrev {
		s.longestOut = max(s.longestOut, t-s.quietAt)
		s.quietAt = t
	}
}

// Finish ends the history and gives Liveness's Result.
func (s *StreamLiveness) Finish() Result {
	s.r.ready(true, s.read)
	r := newResult(Liveness{}.Name())
	for _, h := range s.live {
		s.finalize(h)
	}
	s.live = nil
	if s.faultOpen >= 0 {
		// The window still open ends with the history; no quiet span
		// follows it.
		s.closeWindow(s.faultOpen, max(s.faultOpen, s.maxTime))
		s.faultOpen = -1
		s.inFault = true
	}
	// An acquire still under way at the end is of unknown outcome too.
	for _, a := range s.cur {
		if a.diedOK {
			s.candidate(a)
		}
	}

	stuck := 0
	for _, lk := range s.locks {
		if a, ok := s.stuck(lk); ok {
			stuck++
			r.Anomalies = append(r.Anomalies, a)
		}
	}
	r.Stats["acquire_attempts"] = float64(s.attempts)
	r.Stats["acquire_ok"] = float64(s.holdsN)
	if s.attempts > 0 {
		r.Stats["acquire_success_rate"] = float64(s.holdsN) / float64(s.attempts)
	}
	if len(s.lat) > 0 {
		slices.Sort(s.lat)
		r.Stats["acquire_latency_p50_ms"] = float64(percentile(s.lat, 50)) / 1e6
		r.Stats["acquire_latency_p99_ms"] = float64(percentile(s.lat, 99)) / 1e6
	}
	if len(s.windows) > 0 {
		n := 0
		for _, w := range s.windows {
			if w.effective {
				n++
			}
		}
		r.Stats["fault_windows"] = float64(len(s.windows))
		r.Stats["faults_effective"] = float64(n)
	}
	if s.firstTime >= 0 {
		prev := s.firstTime
		if s.haveStart {
			prev = s.prevStart
		}
		r.Stats["longest_no_acquire_s"] = float64(max(s.longest, s.maxTime-prev)) / 1e9
		if len(s.windows) > 0 {
			out := s.longestOut
			if !s.inFault && s.maxTime > s.quietPrev {
				out = max(out, s.maxTime-s.quietAt)
			}
			r.Stats["longest_no_acquire_outside_faults_s"] = float64(out) / 1e9
			rec := s.rec
			rec.never += len(s.recoveryDue)
			if rec.n > 0 {
				r.Stats["recovery_after_heal_max_s"] = float64(rec.worst) / 1e9
				r.Stats["recovery_after_heal_mean_s"] = float64(rec.sum) / float64(rec.n) / 1e9
			}
			r.Stats["heals_without_recovery"] = float64(rec.never)
		}
	}
	r.Stats["stuck_locks"] = float64(stuck)
	return settle(r)
}

// lvRef is an op an anomaly names: its time, index and f.
type lvRef struct {
	t   int64
	idx int
	f   string
}

// freedBefore is view.freedBefore for hold h: it certainly left its lock
// free for an acquire invoked at inv whose process died at died.
func (h *lvHold) freedBefore(inv, died int64) bool {
	if h.endWhy != endHistory && h.start <= inv && h.endAt <= inv {
		return true
	}
	return h.release != nil && h.release.done && h.release.ok && h.release.doneAt <= died
}

// stuck decides whether lk was left stuck, as Liveness does, and explains
// it.
func (s *StreamLiveness) stuck(lk *lvLock) (Anomaly, bool) {
	var (
		hold    *lvHold
		unknown *lvAttempt
		proc    int
		ended   int64 = -1
		proof   []lvRef
	)
	if h := lk.last; h != nil {
		released := false
		if rel := h.release; rel != nil {
			switch {
			case rel.done && rel.ok:
				released = true
			case rel.done:
				ended, proof = rel.doneAt, []lvRef{{rel.t, rel.idx, history.Release}, {rel.doneAt, rel.doneIx, history.Release}}
			default:
				ended, proof = rel.t, []lvRef{{rel.t, rel.idx, history.Release}}
			}
		}
		if !released {
			if ended < 0 && h.deathOp != nil {
				ended, proof = h.deathOp.t, []lvRef{{h.deathOp.t, h.deathOp.idx, h.deathOp.f}}
			}
			if h.validUntil != 0 {
				ended = h.validUntil
			}
			if ended >= 0 {
				hold, proc = h, h.proc
			}
		}
	}
	// The latest acquire of unknown outcome whose process then died, and
	// that the lock's last hold had certainly left free for, replaces it.
	for _, a := range lk.unknowns {
		if lk.last != nil && !lk.last.freedBefore(a.t, a.died.t) {
			continue
		}
		if unknown == nil || a.t > unknown.t || a.t == unknown.t && a.idx > unknown.idx {
			unknown = a
		}
	}
	if unknown != nil {
		hold, proc, ended = nil, unknown.proc, unknown.died.t
		proof = []lvRef{{unknown.died.t, unknown.died.idx, unknown.died.f}}
	}
	if hold == nil && unknown == nil {
		return Anomaly{}, false
	}
	fails, refusals := 0, 0
	var first, last lvRef
	earlier := func(a, b lvRef) bool { return a.t < b.t || a.t == b.t && a.idx < b.idx }
	for _, a := range lk.attempts {
		if a.proc == proc || a.t < ended {
			continue
		}
		if a.done && a.typ == history.OK {
			return Anomaly{}, false // broken: the lock was taken after all
		}
		end := lvRef{a.t, a.idx, history.Acquire}
		if a.done {
			end = lvRef{a.doneAt, a.doneIx, history.Acquire}
		}
		if a.refusal {
			refusals++
		}
		if fails == 0 || earlier(end, first) {
			first = end
		}
		if fails == 0 || earlier(last, end) {
			last = end
		}
		fails++
	}
	if fails < s.minAttempts || refusals == 0 {
		return Anomaly{}, false
	}
	need := s.minWindow
	if hold != nil && hold.validUntil != 0 {
		need = max(need, hold.validUntil-hold.start)
	}
	if last.t-ended < need {
		return Anomaly{}, false
	}
	if unknown != nil {
		refs := append([]lvRef{{unknown.t, unknown.idx, history.Acquire}, first, last}, proof...)
		if unknown.done {
			refs = append(refs, lvRef{unknown.doneAt, unknown.doneIx, history.Acquire})
		}
		return Anomaly{Kind: KindStuckLock, Ops: refIndexes(refs),
			Explanation: stuckUnknownText(lk.name, unknown.proc, ended, unknown.t, fails, first.t, last.t)}, true
	}
	released := len(proof) > 0 && proof[0].f == history.Release
	var firstProof, lastProof int64
	if len(proof) > 0 {
		firstProof, lastProof = proof[0].t, proof[len(proof)-1].t
	}
	how := stuckHow(hold.validUntil != 0, released, len(proof) > 0, firstProof, lastProof, ended)
	refs := append([]lvRef{{hold.start, hold.okIdx, history.Acquire}, first, last}, proof...)
	return Anomaly{Kind: KindStuckLock, Ops: refIndexes(refs),
		Explanation: stuckText(lk.name, hold.proc, hold.start, hold.token, how, fails, first.t, last.t, ended)}, true
}

// refIndexes returns the indexes of refs in time order, each once.
func refIndexes(refs []lvRef) []int {
	slices.SortFunc(refs, func(a, b lvRef) int {
		if a.t != b.t {
			return cmp.Compare(a.t, b.t)
		}
		return a.idx - b.idx
	})
	out := make([]int, 0, len(refs))
	for i, r := range refs {
		if i > 0 && r.idx == refs[i-1].idx {
			continue
		}
		out = append(out, r.idx)
	}
	return out
}
