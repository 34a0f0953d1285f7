package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/locktest/locktest/history"
)

// StreamFencing checks fencing tokens as FencingTokens does, on the ops of
// a history as they are recorded (Add), without keeping the history.
//
// It applies FencingTokens' rules to the acquires in the order of their
// invocations, each once its outcome is known: a regression is a grant
// whose token is lower than the highest token granted before the grant was
// invoked (kept per lock as the ops are read in time order, and copied at
// each invocation), collapsed as FencingTokens collapses them; a duplicate
// is a token already granted, found in a compressed set of the tokens
// granted so far (a roaring bitmap per lock: about two bytes per grant
// where tokens are dense, as counters and revisions are). A re-grant that
// may continue its process's hold after a release of unknown outcome waits
// until no kill under way can still prove its process dead before the
// re-grant's invocation.
//
// Its memory is what is still open (acquires under way and the grants
// invoked after them, each process's latest hold per lock, the kills under
// way and the ops the watermark holds back), the token sets, and the
// first grants of the last 4,096 tokens of each lock, which name the first
// holder in a duplicate's explanation (an older one is named by its token
// only; FencingTokens, which holds the history, keeps them all). Finish
// ends the history and gives FencingTokens' Result. Confirmed gives each regression as it is
// found, and the first duplicate of each lock: duplicates of consecutive
// tokens are one anomaly only at the end, when all of them are known.
type StreamFencing struct {
	ordering
	kills killWatch
	invs  invocations
	now   int64 // the time of the last op read
	locks map[string]*fLock
	// lockOrder are the locks in the order their first op was read.
	lockOrder []string
	fresh     []*fLock // the locks granted a token at time now
	procs     map[int]*fProc
	// queue are the acquires, in the order of their invocations, whose
	// rules are not applied yet: the first one waits for its outcome.
	queue []*fGrant
	regs  *regressions
	// anomalies are the regressions found, in the order FencingTokens
	// finds them.
	anomalies []Anomaly
	early     []Anomaly // what Confirmed gives
	firstSeen int
	tokens    int
	continued int
	dupLocks  map[string]bool // the locks whose first duplicate Confirmed gave
	keepAll   bool            // remember the first grant of every token
}

// fLock is what StreamFencing keeps of one lock.
type fLock struct {
	name string
	id   int32
	// best is the grant of the highest token among those read at a time
	// before now (the first of them to be read), if hasTop; fresh are the
	// tokens granted at time now, which join it when the time moves on.
	best    fTop
	hasTop  bool
	fresh   []fTop
	grants  int // acquire oks so far
	seen    *roaring64.Bitmap
	dups    map[uint64]*fDup
	recent  map[uint64]fTop // the first grant of each of the last recentTokens tokens
	recentQ []uint64
	keepAll bool // recent keeps every token (the history is held anyway)
}

// recentTokens is how many tokens per lock StreamFencing remembers the
// first grant of.
const recentTokens = 4096

// fTop is one grant: its token, ok and process.
type fTop struct {
	token uint64
	ok    opAt
	proc  int
}

// opAt is where an op is in the history: its index and time, all the
// streaming fencing check keeps of it.
type opAt struct {
	Index int
	Time  int64
}

func at(op history.Op) opAt { return opAt{op.Index, op.Time} }

// fDup is a token granted more than once, and to whom.
type fDup struct {
	first  *fTop // its first grant, if still remembered when it was granted again
	grants []fTop
	why    string // a re-grant that was not the same hold going on, and why
}

// fHold is a process's hold of a lock as StreamFencing keeps it while it
// may be continued by a re-grant.
type fHold struct {
	token     *uint64
	value     string
	pos       int  // its place among the lock's grants
	byRelease bool // a release invocation ended it (not an acquire's)
	hasDone   bool // its release completed
	doneType  history.Type
	doneIndex int
	doneTime  int64
}

// fProc is what StreamFencing keeps of one process.
type fProc struct {
	last      map[string]*fHold // its latest hold of each lock
	open      map[string]*fHold // its holds not yet ended by a release or acquire invocation
	releasing *fHold            // the hold its release under way ends
	acquiring *fGrant           // its acquire under way
	// cleanSince is the index of the release completion of unknown
	// outcome since which the process recorded nothing but failed
	// acquires, or -1.
	cleanSince int
	deaths     []int64 // the times it died, as far as they may still matter
}

// fGrant is one acquire, from its invocation (or its ok, when the
// invocation is missing) until its rules are applied.
type fGrant struct {
	lock       *fLock
	proc       int
	inv        opAt
	hasInv     bool
	top        fTop // the lock's top when it was invoked
	hasTop     bool
	cleanSince int // the process's cleanSince when it was invoked
	done       bool
	granted    bool
	ok         opAt
	token      *uint64 // the ok's token
	value      string  // the ok's lock value
	pos        int
	prev       *fHold // the process's previous hold of the lock
}

// NewStreamFencing returns a streaming fencing-tokens checker.
func NewStreamFencing() *StreamFencing {
	return &StreamFencing{ordering: ordering{newReorder()}, kills: newKillWatch(), invs: invocations{}, locks: map[string]*fLock{},
		procs: map[int]*fProc{}, regs: newRegressions(0), dupLocks: map[string]bool{}}
}

// Add reads the op recorded next.
func (s *StreamFencing) Add(op history.Op) { add(s, op) }

// step applies the rules to the grants the ops read so far let it.
func (s *StreamFencing) step() { s.decide(false) }

// Confirmed returns the anomalies found since the last call.
func (s *StreamFencing) Confirmed() []Anomaly { return unseen(s.early, &s.firstSeen) }

// Finish ends the history and gives the Result, FencingTokens'.
func (s *StreamFencing) Finish() Result {
	s.r.ready(true, s.read)
	s.settleFresh()
	s.decide(true)
	r := newResult(FencingTokens{}.Name())
	if s.tokens == 0 {
		return noTokens(r)
	}
	r.Anomalies = append(r.Anomalies, s.anomalies...)
	s.regs.finish(r.Anomalies, "grant")
	duplicates := 0
	for _, name := range s.lockOrder {
		lk := s.locks[name]
		if lk == nil || len(lk.dups) == 0 {
			continue
		}
		toks := make([]uint64, 0, len(lk.dups))
		for t := range lk.dups {
			toks = append(toks, t)
		}
		slices.Sort(toks)
		duplicates += len(toks)
		// Duplicated tokens with consecutive values are one anomaly, as
		// FencingTokens reports them.
		for i := 0; i < len(toks); {
			j := i + 1
			for j < len(toks) && toks[j] == toks[j-1]+1 {
				j++
			}
			a := lk.duplicate(toks[i])
			if j-1 > i {
				a.Explanation += fmt.Sprintf(", and tokens %d to %d were each granted more than once too", toks[i]+1, toks[j-1])
			}
			r.Anomalies = append(r.Anomalies, a)
			i = j
		}
	}
	tokenCounts{tokens: s.tokens, continued: s.continued, duplicates: duplicates, regs: s.regs}.put(r.Stats)
	return settle(r)
}

// lock returns the state of the lock called name, made when first seen.
func (s *StreamFencing) lock(name string) *fLock {
	lk := s.locks[name]
	if lk == nil {
		lk = &fLock{name: name, id: int32(len(s.lockOrder)), seen: roaring64.New(), dups: map[uint64]*fDup{}, recent: map[uint64]fTop{}, keepAll: s.keepAll}
		s.locks[name] = lk
		s.lockOrder = append(s.lockOrder, name)
	}
	return lk
}

// proc returns the state of process p, made when first seen.
func (s *StreamFencing) proc(p int) *fProc {
	pr := s.procs[p]
	if pr == nil {
		pr = &fProc{last: map[string]*fHold{}, open: map[string]*fHold{}, cleanSince: -1}
		s.procs[p] = pr
	}
	return pr
}

// settleFresh moves the tokens granted at the time read last into their
// locks' tops: an acquire invoked later is bound by them.
func (s *StreamFencing) settleFresh() {
	for _, lk := range s.fresh {
		for _, g := range lk.fresh {
			if !lk.hasTop || g.token > lk.best.token {
				lk.best, lk.hasTop = g, true
			}
		}
		lk.fresh = lk.fresh[:0]
	}
	s.fresh = s.fresh[:0]
}

// read takes the next op in order.
func (s *StreamFencing) read(op history.Op) {
	if op.Time > s.now {
		s.settleFresh()
	}
	s.now = op.Time
	if op.Process < 0 {
		s.kills.nemesis(op, s.died)
		return
	}
	s.kills.saw(op)
	pr := s.proc(op.Process)
	if op.Type == history.Info && strings.HasPrefix(op.Error, "worker exited") {
		s.died(op.Process, op.Time)
	}
	// Since a release of unknown outcome, only failed acquires keep the
	// process clean (FencingTokens' re-grant rule).
	if !(op.F == history.Acquire && (op.Type == history.Invoke || op.Type == history.Fail)) {
		pr.cleanSince = -1
	}
	if op.Type == history.Notice {
		return
	}
	if g := pr.acquiring; g != nil && op.Type == history.Invoke {
		// Its acquire never completed: it granted nothing, and the
		// acquires invoked after it need not wait for it.
		g.done, pr.acquiring = true, nil
	}
	_, hasInv, name := s.invs.pair(op)
	switch op.F {
	case history.Acquire, history.Release, history.Read, history.Write:
	default:
		return
	}
	lk := s.lock(name)
	switch op.F {
	case history.Acquire:
		switch op.Type {
		case history.Invoke:
			if h := pr.open[name]; h != nil {
				delete(pr.open, name) // ended by this acquire, not by a release
			}
			g := &fGrant{lock: lk, proc: op.Process, inv: at(op), hasInv: true, top: lk.best, hasTop: lk.hasTop, cleanSince: pr.cleanSince}
			pr.acquiring = g
			s.queue = append(s.queue, g)
		case history.OK:
			g := pr.acquiring
			if !hasInv || g == nil {
				// No invocation: bound by the tokens granted before its ok.
				g = &fGrant{lock: lk, proc: op.Process, top: lk.best, hasTop: lk.hasTop, cleanSince: -1}
				s.queue = append(s.queue, g)
			}
			pr.acquiring = nil
			lk.grants++
			g.done, g.granted, g.ok, g.pos, g.prev = true, true, at(op), lk.grants, pr.last[name]
			g.token, g.value = op.Value.Token, op.Value.LockValue
			h := &fHold{token: op.Value.Token, value: op.Value.LockValue, pos: lk.grants}
			pr.last[name], pr.open[name] = h, h
			if t := op.Value.Token; t != nil {
				s.tokens++
				if len(lk.fresh) == 0 {
					s.fresh = append(s.fresh, lk)
				}
				lk.fresh = append(lk.fresh, fTop{token: *t, ok: at(op), proc: op.Process})
			}
		default:
			if g := pr.acquiring; g != nil {
				g.done = true
			}
			pr.acquiring = nil
		}
	case history.Release:
		switch op.Type {
		case history.Invoke:
			pr.releasing = nil
			if h := pr.open[name]; h != nil && !releasesOther(op.Value.LockValue, op.Value.Token, h.value, h.token) {
				h.byRelease = true
				pr.releasing = h
				delete(pr.open, name)
			}
		default:
			if h := pr.releasing; h != nil && hasInv {
				h.hasDone, h.doneType, h.doneIndex, h.doneTime = true, op.Type, op.Index, op.Time
				if op.Type == history.Info {
					pr.cleanSince = op.Index
				}
			}
			pr.releasing = nil
		}
	}
}

// died records that process p died at d.
func (s *StreamFencing) died(p int, d int64) {
	pr := s.proc(p)
	pr.deaths = append(pr.deaths, d)
}

// decide applies the rules to the acquires at the head of the queue whose
// outcome is known, in the order of their invocations. With final, the
// history has ended: an acquire with no outcome granted nothing.
func (s *StreamFencing) decide(final bool) {
	n := 0
	for _, g := range s.queue {
		if !g.done && !final {
			break
		}
		if g.done && g.granted && g.token != nil {
			if !s.apply(g, final) {
				break
			}
		}
		n++
	}
	if n == 0 {
		return
	}
	// The rest move to the front: the array, as long as the most acquires
	// ever open at once, serves again.
	m := copy(s.queue, s.queue[n:])
	clear(s.queue[m:])
	s.queue = s.queue[:m]
	s.forgetDeaths()
}

// apply applies the rules to g, a grant with a token. It reports false,
// and does nothing, when a kill under way may still prove g's process
// dead in the time its re-grant rule reads.
func (s *StreamFencing) apply(g *fGrant, final bool) bool {
	tok := *g.token
	lk := g.lock
	between := 0
	if a := g.prev; a != nil && a.token != nil && *a.token == tok && a.value != "" && a.value == g.value &&
		a.byRelease && a.hasDone && a.doneType == history.Info && g.hasInv && g.cleanSince == a.doneIndex {
		if !final && s.kills.since(g.inv.Time) {
			return false
		}
		died := false
		for _, d := range s.proc(g.proc).deaths {
			if d >= a.doneTime && d <= g.inv.Time {
				died = true
			}
		}
		if !died {
			if between = g.pos - a.pos - 1; between == 0 {
				s.continued++
				return true
			}
		}
	}
	if g.hasTop && g.top.token > tok {
		if s.regs.add(lk.id, int32(g.top.ok.Index), len(s.anomalies), g.top.token) {
			at := g.ok.Time
			ops := []int{g.top.ok.Index, g.ok.Index}
			if g.hasInv {
				at = g.inv.Time
				ops = []int{g.top.ok.Index, g.inv.Index, g.ok.Index}
			}
			a := Anomaly{
				Kind: KindTokenRegression,
				Ops:  ops,
				Explanation: fmt.Sprintf("process %d was granted token %d of lock %q at %s (invoked at %s), lower than token %d granted to process %d at %s",
					g.proc, tok, lk.name, secs(g.ok.Time), secs(at), g.top.token, g.top.proc, secs(g.top.ok.Time)),
			}
			s.anomalies = append(s.anomalies, a)
			s.early = append(s.early, a)
		}
	}
	grant := fTop{token: tok, ok: g.ok, proc: g.proc}
	if lk.seen.CheckedAdd(tok) {
		lk.remember(grant)
		return true
	}
	d := lk.dups[tok]
	if d == nil {
		d = &fDup{}
		if first, ok := lk.recent[tok]; ok {
			d.first = &first
		}
		lk.dups[tok] = d
	}
	d.grants = append(d.grants, grant)
	if between > 0 && d.why == "" {
		d.why = fmt.Sprintf("; the grant to process %d at %s came after its release of unknown outcome, but %s of the lock came between, so it was not the same hold going on",
			g.proc, secs(g.ok.Time), plural(int64(between), "other grant"))
	}
	if !s.dupLocks[lk.name] {
		s.dupLocks[lk.name] = true
		s.early = append(s.early, lk.duplicate(tok))
	}
	return true
}

// remember keeps the first grant of token for a duplicate's explanation,
// forgetting the oldest beyond recentTokens.
func (lk *fLock) remember(g fTop) {
	lk.recent[g.token] = g
	lk.recentQ = append(lk.recentQ, g.token)
	if !lk.keepAll && len(lk.recentQ) > 2*recentTokens {
		for _, t := range lk.recentQ[:len(lk.recentQ)-recentTokens] {
			delete(lk.recent, t)
		}
		lk.recentQ = append(lk.recentQ[:0], lk.recentQ[len(lk.recentQ)-recentTokens:]...)
	}
}

// duplicate explains that token t of the lock was granted more than once,
// as FencingTokens' does.
func (lk *fLock) duplicate(t uint64) Anomaly {
	d := lk.dups[t]
	grants := slices.Clone(d.grants)
	var each []string
	if d.first != nil {
		grants = append([]fTop{*d.first}, grants...)
	} else {
		each = append(each, fmt.Sprintf("a holder before the last %d tokens (whose grants the check no longer keeps)", recentTokens))
	}
	// The grants in the order they were made, as FencingTokens lists them.
	slices.SortFunc(grants, func(a, b fTop) int {
		if c := cmp.Compare(a.ok.Time, b.ok.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.ok.Index, b.ok.Index)
	})
	times := len(grants) + len(each)
	var ops []int
	for k, g := range grants {
		ops = append(ops, g.ok.Index)
		if k < 5 {
			each = append(each, fmt.Sprintf("process %d at %s", g.proc, secs(g.ok.Time)))
		}
	}
	if len(grants) > 5 {
		each = append(each, fmt.Sprintf("%d more", len(grants)-5))
	}
	return Anomaly{
		Kind:        KindDuplicateToken,
		Ops:         ops,
		Explanation: fmt.Sprintf("token %d of lock %q was granted %d times: to %s%s", t, lk.name, times, strings.Join(each, ", "), d.why),
	}
}

// forgetDeaths drops the deaths no re-grant still to be decided can read:
// those before now, before the release of unknown outcome its process is
// clean since, and before the earliest such release of its grants in the
// queue.
func (s *StreamFencing) forgetDeaths() {
	for p, pr := range s.procs {
		if len(pr.deaths) == 0 {
			continue
		}
		// A release not read yet completes at now or later.
		from := s.now
		if pr.cleanSince >= 0 {
			for _, h := range pr.last {
				if h.hasDone && h.doneIndex == pr.cleanSince {
					from = min(from, h.doneTime)
				}
			}
		}
		for _, g := range s.queue {
			if g.proc == p && g.prev != nil && g.prev.hasDone {
				from = min(from, g.prev.doneTime)
			}
		}
		pr.deaths = slices.DeleteFunc(pr.deaths, func(d int64) bool { return d < from })
	}
}
