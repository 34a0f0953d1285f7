package checker

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/locktest/locktest/history"
)

// releasesOther reports whether a release invoked with the lock value rv
// and token rt names another lease than the hold its process has open of
// the lock, granted with the value hv and token ht: a lease the process
// held before, whose release it retries (a release of unknown outcome
// tried again, --retry-release). Such a release does not end the open
// hold. A value or token that either side lacks does not tell them apart:
// a release that names no lease ends the open hold.
func releasesOther(rv string, rt *uint64, hv string, ht *uint64) bool {
	return rv != "" && hv != "" && rv != hv || rt != nil && ht != nil && *rt != *ht
}

// checkEvery is how many steps a checker takes between looks at its ctx.
const checkEvery = 4096

// stopped returns ctx's error every checkEvery steps (step 0 included) once
// ctx is done, and nil otherwise.
func stopped(ctx context.Context, step int) error {
	if step%checkEvery != 0 {
		return nil
	}
	return ctx.Err()
}

// noEnd is the lease end of a hold that neither expires nor is released.
const noEnd = math.MaxInt64

// endReason says what ended a hold, for explanations.
type endReason uint8

const (
	endHistory    endReason = iota // the history ended first
	endValidUntil                  // the holder's own valid_until
	endRelease                     // the holder invoked release
	endReacquire                   // the holder invoked acquire again
	endDeath                       // the holder's process died (was killed)
)

// hold is one critical section as its process believed it. It starts at the
// Time of an acquire ok and ends at the earliest of the process's next
// release invocation of the same lock, the acquire's valid_until (when
// non-zero), the process's next acquire invocation of the same lock and the
// process's death (see deaths); when there is none of these, at the end of
// the history (the largest Time of any op). Positions are indexes into the History slice, -1 where there is no
// such op.
type hold struct {
	proc       int
	lock       int32 // lock id, see view.locks
	inv        int32 // the acquire invocation
	ok         int32 // the acquire ok
	release    int32 // the release invocation that ended it
	closer     int32 // the release or acquire invocation that ended it
	start      int64
	validUntil int64
	// end is when the holder stopped believing it held the lock; it may
	// be before start when valid_until was already past at the ok.
	end int64
	why endReason
	// leaseEnd is the earlier of valid_until and the release invocation,
	// ignoring later acquires: the end the resource checker holds writes
	// to. It is noEnd when neither exists.
	leaseEnd int64
}

// write is one write invocation of a client and what it was based on.
type write struct {
	inv  int32 // the write invocation
	done int32 // its completion, -1 when the history ended first
	// hold is the writer's latest hold of the lock that began before the
	// write was invoked, -1 when there is none.
	hold int32
	// read is the writer's latest read ok of the lock since its latest
	// acquire invocation of it, -1 when there is none.
	read int32
}

// view is what the lock checkers read of a history: the client ops of the
// lock functions in time order, reduced to holds, writes and foreign
// releases. Building it costs one sort of the history's ops and one pass.
type view struct {
	h       *history.Table
	pair    []int32
	locks   []string         // lock id to name
	lockIDs map[string]int32 // lock name to id
	// holds are the holds of every acquire ok, ordered by start (time,
	// then index).
	holds []hold
	// writes are the write invocations in time order.
	writes []write
	// foreign are the release oks that removed a lock value other than
	// their invocation's own, in time order.
	foreign []int32
	// stale are the release oks of a hold during which another process
	// was granted the lock (see MutualExclusion), in time order.
	stale []staleRelease
	// notices are the lost-lock notices of the clients, in time order.
	notices     []int32
	acquireFail int
	acquireInfo int
	maxTime     int64
}

// opKey is an op's time and position, for sorting by time (see
// compareKeys).
type opKey struct {
	t   int64
	pos int32
}

// compareKeys orders the ops of h by Time, then Index, then position. An
// op's index is its position but in a history built by hand.
func compareKeys(h *history.Table) func(a, b opKey) int {
	return func(a, b opKey) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		if c := cmp.Compare(h.Index(int(a.pos)), h.Index(int(b.pos))); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	}
}

// procLock names one process's view of one lock.
type procLock struct {
	proc int
	lock int32
}

// procState is what the pass remembers about one process and one lock.
type procState struct {
	proc int
	open int32 // the hold not yet ended by a release or acquire invocation
	last int32 // the latest hold
	read int32 // the latest read ok since the latest acquire invocation
	// rel is the latest release invocation and the hold it ended (-1
	// when it ended none), with the grant to another process during that
	// hold (taken, -1 for none).
	rel, relHold, taken int32
}

// staleRelease is a release ok (ok, its invocation inv) of a hold during
// which another process was granted the lock: the acquire ok taken.
type staleRelease struct {
	ok, inv, hold, taken int32
}

// takenOver returns the latest grant of a's lock to another process than
// a's that was invoked after a began, completed before at (the time of
// a's release invocation) and no earlier than a's valid_until, as the
// pass has seen them (states, of the lock's processes); -1 when there is
// none, or when a has no valid_until.
func (v *view) takenOver(a *hold, at int64, states []procState, ids []int32) int32 {
	taken := int32(-1)
	if a.validUntil == 0 {
		return taken
	}
	for _, id := range ids {
		st := &states[id]
		g := st.last
		if st.proc == a.proc || g < 0 {
			continue
		}
		gh := &v.holds[g]
		if gh.inv < 0 || v.h.Time(int(gh.inv)) <= a.start || gh.start >= at || gh.start < a.validUntil {
			continue
		}
		if taken < 0 || v.before(gh.ok, v.holds[taken].ok) > 0 {
			taken = g
		}
	}
	return taken
}

// buildView computes the view of h. Ops of the nemesis (negative processes)
// and of functions other than acquire, release, read and write are left
// out, but for the lost-lock notices, kept apart. It returns ctx's error if ctx is done before it finishes.
func buildView(ctx context.Context, h *history.Table) (*view, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v := &view{h: h, pair: h.Pair()}
	order := make([]opKey, 0, h.Len())
	for i := range h.Len() {
		t := h.Time(i)
		v.maxTime = max(v.maxTime, t)
		if h.Process(i) < 0 {
			continue
		}
		if h.Type(i) == history.Notice {
			if h.F(i) == history.Lost {
				v.notices = append(v.notices, int32(i))
			}
			continue
		}
		switch h.F(i) {
		case history.Acquire, history.Release, history.Read, history.Write:
			order = append(order, opKey{t: t, pos: int32(i)})
		}
	}
	slices.SortStableFunc(v.notices, func(a, b int32) int { return cmp.Compare(h.Time(int(a)), h.Time(int(b))) })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if byTime := compareKeys(h); !slices.IsSortedFunc(order, byTime) {
		slices.SortFunc(order, byTime)
	}

	lockIDs := make(map[string]int32)
	v.lockIDs = lockIDs
	stateIDs := make(map[procLock]int32)
	var states []procState
	var lockStates [][]int32 // per lock id, its processes' states
	for step, k := range order {
		if err := stopped(ctx, step); err != nil {
			return nil, err
		}
		p := k.pos
		ip := int(p)
		proc, typ := h.Process(ip), h.Type(ip)
		name := v.lockName(p)
		lk, ok := lockIDs[name]
		if !ok {
			lk = int32(len(v.locks))
			lockIDs[name] = lk
			v.locks = append(v.locks, name)
			lockStates = append(lockStates, nil)
		}
		sid, ok := stateIDs[procLock{proc, lk}]
		if !ok {
			sid = int32(len(states))
			stateIDs[procLock{proc, lk}] = sid
			states = append(states, procState{proc: proc, open: -1, last: -1, read: -1, rel: -1, relHold: -1, taken: -1})
			lockStates[lk] = append(lockStates[lk], sid)
		}
		st := &states[sid]

		switch h.F(ip) {
		case history.Acquire:
			switch typ {
			case history.Invoke:
				if st.open >= 0 {
					v.holds[st.open].closer = p
					v.holds[st.open].why = endReacquire
					st.open = -1
				}
				st.read = -1
			case history.OK:
				inv := v.pair[p]
				st.open = int32(len(v.holds))
				st.last = st.open
				v.holds = append(v.holds, hold{
					proc: proc, lock: lk, inv: inv, ok: p,
					release: -1, closer: -1,
					start: h.Time(ip), validUntil: h.ValidUntil(ip),
				})
			case history.Fail:
				v.acquireFail++
			case history.Info:
				v.acquireInfo++
			}
		case history.Release:
			switch typ {
			case history.Invoke:
				st.rel, st.relHold, st.taken = p, -1, -1
				if st.open >= 0 && !releasesOther(h.LockValue(ip), h.Token(ip), h.LockValue(int(v.holds[st.open].ok)), h.Token(int(v.holds[st.open].ok))) {
					hd := &v.holds[st.open]
					hd.closer, hd.release, hd.why = p, p, endRelease
					st.relHold, st.taken = st.open, v.takenOver(hd, h.Time(ip), states, lockStates[lk])
					st.open = -1
				}
			case history.OK:
				inv := v.pair[p]
				own := ""
				if inv >= 0 {
					own = h.LockValue(int(inv))
				}
				if removed := h.Removed(ip); removed != "" && removed != own {
					v.foreign = append(v.foreign, p)
				} else if inv >= 0 && inv == st.rel && st.taken >= 0 {
					v.stale = append(v.stale, staleRelease{ok: p, inv: inv, hold: st.relHold, taken: st.taken})
				}
			}
		case history.Read:
			if typ == history.OK {
				st.read = p
			}
		case history.Write:
			if typ == history.Invoke {
				v.writes = append(v.writes, write{inv: p, done: v.pair[p], hold: st.last, read: st.read})
			}
		}
	}

	dead := deaths(h)
	for i := range v.holds {
		hd := &v.holds[i]
		hd.end = noEnd
		if hd.closer >= 0 {
			hd.end = h.Time(int(hd.closer))
		}
		if hd.validUntil != 0 && hd.validUntil < hd.end {
			hd.end, hd.why = hd.validUntil, endValidUntil
		}
		// A process that died believes nothing any more: a session lock's
		// hold (no valid_until) would otherwise last to the end of the
		// history and overlap every later holder.
		for _, d := range dead[hd.proc] {
			if d >= hd.start {
				if d < hd.end {
					hd.end, hd.why = d, endDeath
				}
				break
			}
		}
		if hd.end == noEnd {
			hd.end, hd.why = v.maxTime, endHistory
		}
		hd.leaseEnd = noEnd
		if hd.release >= 0 {
			hd.leaseEnd = h.Time(int(hd.release))
		}
		if hd.validUntil != 0 && hd.validUntil < hd.leaseEnd {
			hd.leaseEnd = hd.validUntil
		}
	}
	return v, nil
}

// deaths returns, per process, the times (ascending) at which the history
// shows it died; see deathOps and deathTime.
func deaths(h *history.Table) map[int][]int64 {
	out := map[int][]int64{}
	var pair []int32
	for p, ps := range deathOps(h) {
		if pair == nil {
			pair = h.Pair()
		}
		for _, i := range ps {
			out[p] = append(out[p], deathTime(h, pair, i, p))
		}
		slices.Sort(out[p])
	}
	return out
}

// deathTime is the earliest moment at which the death of process p shown
// by the op at position i can have happened: for a kill-client, when the
// kill began (its invocation), or later if p still recorded ops after that
// — a kill at a pause point waits for its victim to get there, an acquire
// ok first, say — at the last of them; the lock service may free p's locks
// any time after, before the kill's completion is recorded. For a worker's
// info "worker exited", the info itself (the pool records it once the dead
// process was reaped).
func deathTime(h *history.Table, pair []int32, i int32, p int) int64 {
	if h.Process(int(i)) < 0 {
		if inv := pair[i]; inv >= 0 {
			d, end := h.Time(int(inv)), h.Time(int(i))
			for j := int(inv) + 1; j < int(i); j++ {
				if h.Process(j) == p && h.Time(j) > d && h.Time(j) <= end {
					d = h.Time(j)
				}
			}
			return d
		}
	}
	return h.Time(int(i))
}

// deathOps returns, per process, the positions of the ops that show it
// dead: the ok completion of a nemesis op whose fault kills (see
// history.Kills, kill-client's) naming it as "p<process>" among its targets (a kill that failed or may not
// have happened proves nothing), or an info op of the process whose error
// starts with "worker exited" (the pool completes a dead worker's open op
// so).
func deathOps(h *history.Table) map[int][]int32 {
	out := map[int][]int32{}
	for i := range h.Len() {
		proc, typ := h.Process(i), h.Type(i)
		switch {
		case proc < 0 && typ == history.OK:
			if o := h.At(i); history.Kills(o) {
				for _, t := range o.Value.Targets {
					if p, ok := processTarget(t); ok {
						out[p] = append(out[p], int32(i))
					}
				}
			}
		case proc >= 0 && typ == history.Info && strings.HasPrefix(h.Error(i), "worker exited"):
			out[proc] = append(out[proc], int32(i))
		}
	}
	return out
}

// processTarget reads a nemesis target "p3" as process 3.
func processTarget(t string) (int, bool) {
	if !strings.HasPrefix(t, "p") {
		return 0, false
	}
	p, err := strconv.Atoi(t[1:])
	return p, err == nil
}

// lockName returns the lock an op is about, taking it from the op's
// invocation when a completion does not repeat it.
func (v *view) lockName(p int32) string {
	if l := v.h.Lock(int(p)); l != "" {
		return l
	}
	if q := v.pair[p]; q >= 0 {
		return v.h.Lock(int(q))
	}
	return ""
}

// holdsByLock returns, per lock id, the indexes of its holds in start
// order.
func (v *view) holdsByLock() [][]int32 {
	out := make([][]int32, len(v.locks))
	for i := range v.holds {
		l := v.holds[i].lock
		out[l] = append(out[l], int32(i))
	}
	return out
}

// before orders two positions by time, then index.
func (v *view) before(a, b int32) int {
	if c := cmp.Compare(v.h.Time(int(a)), v.h.Time(int(b))); c != 0 {
		return c
	}
	if c := cmp.Compare(v.h.Index(int(a)), v.h.Index(int(b))); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// indexes returns the history indexes of the ops at positions ps in time
// order, leaving out negative positions and repeats. It may reorder ps.
func (v *view) indexes(ps ...int32) []int {
	ps = slices.DeleteFunc(ps, func(p int32) bool { return p < 0 })
	slices.SortFunc(ps, v.before)
	ps = slices.Compact(ps)
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = v.h.Index(int(p))
	}
	return out
}

// secs formats ns on the history clock as seconds with three decimals.
func secs(ns int64) string { return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + "s" }

// withToken renders " (token 7)", or nothing for no token.
func withToken(t *uint64) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf(" (token %d)", *t)
}

// tokenWord renders " with token 7", or nothing for no token.
func tokenWord(t *uint64) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf(" with token %d", *t)
}

// viewKey is the context key of a sharedView.
type viewKey struct{}

// sharedView is the view of one history that the checkers of one Run
// share: the first that needs it builds it, the others wait for it. Views
// are only read once built, so sharing them is safe.
type sharedView struct {
	h    *history.Table
	once sync.Once
	v    *view
	err  error
	// The streaming checkers' time order of h (timeOrder), built once.
	orderOnce sync.Once
	order     []opKey
	notices   bool
}

// begin builds h's view for the checker called name and returns it with a
// fresh Result; when ctx ends first, ok is false and the Result is the
// unknown of a cancelled check.
func begin(ctx context.Context, h *history.Table, name string) (v *view, r Result, ok bool) {
	v, err := sharedOrBuild(ctx, h)
	if err != nil {
		return nil, cancelled(name, err), false
	}
	return v, newResult(name), true
}

// newResult is a valid Result of the checker called name, with nothing
// found yet.
func newResult(name string) Result {
	return Result{Checker: name, Valid: Valid, Anomalies: []Anomaly{}, Stats: map[string]float64{}}
}

// settle makes r invalid when it found an anomaly.
func settle(r Result) Result {
	if len(r.Anomalies) > 0 {
		r.Valid = Invalid
	}
	return r
}

// cancelled is the result of a check that stopped because ctx was done.
func cancelled(name string, err error) Result {
	return Result{Checker: name, Valid: Unknown, Anomalies: []Anomaly{}, Error: "check cancelled: " + err.Error()}
}
