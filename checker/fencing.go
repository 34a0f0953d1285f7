package checker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// FencingTokens checks that the lock service's fencing tokens increase from
// holder to holder and are never granted twice.
//
// It looks only at acquire oks that carry a token, per lock. If acquire A
// completed (the Time of its ok) strictly before acquire B was invoked,
// token(A) < token(B) is required. Sweeping the acquires in invocation
// order, a B whose token is lower than the highest token of such an A is a
// regression, counted against the A that completed first with that highest
// token. Successive regressions of a lock below the same A are one
// "token-regression" anomaly, the first, naming A's ok and B's invocation
// and ok, whose explanation counts the later ones: a token counter that
// restarted (a Redis node restarted without persistence restarts its INCR
// at 1) would otherwise make every later grant an anomaly. A regression
// below a new maximum starts a new anomaly. A token granted by two or more
// acquire oks of the same lock, by any processes, gives a
// "duplicate-token" anomaly naming all of those oks (so an equal token is a
// duplicate, not a regression); duplicated tokens of a lock with
// consecutive values (what a restarted counter grants again) are one
// anomaly, the first, whose explanation names the range.
//
// A re-grant that continues a hold is not a second grant: it is left out of
// both rules. Acquire ok B continues the hold of acquire ok A when all of
// these hold: A and B are of the same process and lock and carry the same
// token and the same, non-empty lock value; that process invoked a release
// of A's hold (nothing else ended it) and the release's outcome is unknown
// (info); between the release's completion and B's invocation the process
// recorded nothing but acquires that failed, and did not die; and no other
// acquire of the lock, by any process, was granted between A's ok and B's.
// The release may then never have taken effect, and the lock service, which
// still held the same lease for the process, handed it back: one hold going
// on, as a re-entrant lock (etcd's concurrency.Mutex on the same session)
// does. A chain of such re-grants is one hold. If the release takes
// effect later after all, it ends that hold under its holder, which the
// next holder's grant shows to the mutual-exclusion checker. When another
// grant of the lock came between the two oks, the lease had certainly
// changed hands, and the same token again is a duplicate; its explanation
// says so.
//
// The verdict is invalid when there is an anomaly and valid otherwise; when
// no acquire carries a token there is nothing to check, the verdict is valid
// and a note of kind "no-tokens" says so. Stats: "tokens" (acquire oks with
// a token), "token_regressions" (token-regression anomalies),
// "regressed_grants" (acquire oks whose token was lower than an earlier
// one, the collapsed ones included), "duplicate_tokens" (token values
// granted more than once, the collapsed ones included) and
// "continued_holds" (re-grants that continue a hold, left out of the
// rules). Nemesis ops are ignored. The check takes O(n log n) time, plus,
// for each re-grant of a token to the process that held it, a walk over
// the ops recorded between its release's completion and its invocation.
type FencingTokens struct{}

var _ Checker = FencingTokens{}

// Name returns "fencing-tokens".
func (FencingTokens) Name() string { return "fencing-tokens" }

// Check checks h as the type's comment describes. It returns unknown if
// ctx is done before it finishes.
func (c FencingTokens) Check(ctx context.Context, h *history.Table) Result {
	v, r, ok := begin(ctx, h, c.Name())
	if !ok {
		return r
	}

	// byOK are the holds with a token in order of their acquire ok, but
	// the re-grants that continue a hold.
	var byOK []int32
	tokens := 0
	for i := range v.holds {
		if h.Token(int(v.holds[i].ok)) != nil {
			tokens++
		}
	}
	if tokens == 0 {
		return noTokens(r)
	}
	tok := func(i int32) uint64 { return *h.Token(int(v.holds[i].ok)) }
	rg, err := v.regrants(ctx)
	if err != nil {
		return cancelled(c.Name(), err)
	}
	for i := range v.holds {
		if h.Token(int(v.holds[i].ok)) != nil && !rg.continues[i] {
			byOK = append(byOK, int32(i))
		}
	}
	// invoked is when the acquire of hold i was invoked (its ok's time when
	// the invocation is missing).
	invoked := func(i int32) int32 {
		if p := v.holds[i].inv; p >= 0 {
			return p
		}
		return v.holds[i].ok
	}

	byInv := slices.Clone(byOK)
	slices.SortFunc(byInv, func(a, b int32) int { return v.before(invoked(a), invoked(b)) })

	// top[l] is the hold with the highest token of lock l among those whose
	// acquire completed before the current invocation; -1 for none yet.
	top := make([]int32, len(v.locks))
	for i := range top {
		top[i] = -1
	}
	regs := newRegressions(len(v.locks))
	next := 0
	for step, b := range byInv {
		if err := stopped(ctx, step); err != nil {
			return cancelled(c.Name(), err)
		}
		at := h.Time(int(invoked(b)))
		for ; next < len(byOK) && h.Time(int(v.holds[byOK[next]].ok)) < at; next++ {
			a := byOK[next]
			l := v.holds[a].lock
			if top[l] < 0 || tok(a) > tok(top[l]) {
				top[l] = a
			}
		}
		a := top[v.holds[b].lock]
		if a < 0 || tok(a) <= tok(b) {
			continue
		}
		if !regs.add(v.holds[b].lock, a, len(r.Anomalies), tok(a)) {
			continue
		}
		ha, hb := &v.holds[a], &v.holds[b]
		r.Anomalies = append(r.Anomalies, Anomaly{
			Kind: KindTokenRegression,
			Ops:  v.indexes(ha.ok, hb.inv, hb.ok),
			Explanation: fmt.Sprintf("process %d was granted token %d of lock %q at %s (invoked at %s), lower than token %d granted to process %d at %s",
				hb.proc, tok(b), v.locks[hb.lock], secs(hb.start), secs(at), tok(a), ha.proc, secs(ha.start)),
		})
	}
	regs.finish(r.Anomalies, "grant")

	byTok := slices.Clone(byOK)
	slices.SortFunc(byTok, func(a, b int32) int {
		if c := cmp.Compare(v.holds[a].lock, v.holds[b].lock); c != 0 {
			return c
		}
		if c := cmp.Compare(tok(a), tok(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	// Duplicated tokens with consecutive values of one lock (what a
	// restarted token counter grants again: 1, 2, 3, …) are one anomaly,
	// the first, whose explanation names the range.
	duplicates := 0
	runAnomaly, runLock, runFirst, runLast := -1, int32(-1), uint64(0), uint64(0)
	closeRun := func() {
		if runAnomaly >= 0 && runLast > runFirst {
			r.Anomalies[runAnomaly].Explanation += fmt.Sprintf(
				", and tokens %d to %d were each granted more than once too", runFirst+1, runLast)
		}
		runAnomaly = -1
	}
	for i, step := 0, 0; i < len(byTok); step++ {
		if err := stopped(ctx, step); err != nil {
			return cancelled(c.Name(), err)
		}
		j := i + 1
		for j < len(byTok) && v.holds[byTok[j]].lock == v.holds[byTok[i]].lock && tok(byTok[j]) == tok(byTok[i]) {
			j++
		}
		if j-i > 1 {
			duplicates++
			l, t := v.holds[byTok[i]].lock, tok(byTok[i])
			if runAnomaly >= 0 && l == runLock && t == runLast+1 {
				runLast = t
			} else {
				closeRun()
				runAnomaly, runLock, runFirst, runLast = len(r.Anomalies), l, t, t
				r.Anomalies = append(r.Anomalies, v.duplicate(byTok[i:j], t, rg))
			}
		}
		i = j
	}
	closeRun()

	tokenCounts{tokens: tokens, continued: tokens - len(byOK), duplicates: duplicates, regs: regs}.put(r.Stats)
	return settle(r)
}

// tokenCounts are the counts FencingTokens' stats give, and
// StreamFencing's too: the acquire oks with a token, the re-grants among
// them that continue a hold, and the token values granted more than once;
// regs are the token regressions, nil for none.
type tokenCounts struct {
	tokens, continued, duplicates int
	regs                          *regressions
}

// put sets stats to the stats of c that FencingTokens' comment names.
func (c tokenCounts) put(stats map[string]float64) {
	stats["tokens"] = float64(c.tokens)
	stats["continued_holds"] = float64(c.continued)
	stats["duplicate_tokens"] = float64(c.duplicates)
	stats["token_regressions"] = 0
	stats["regressed_grants"] = 0
	if c.regs != nil {
		stats["token_regressions"] = float64(len(c.regs.runs))
		stats["regressed_grants"] = float64(c.regs.total)
	}
}

// noTokens returns r, a fresh (valid) FencingTokens result, as the check
// of a history in which no acquire carried a token ends it: with every
// stat 0 and a no-tokens note.
func noTokens(r Result) Result {
	tokenCounts{}.put(r.Stats)
	r.Notes = append(r.Notes, Anomaly{Kind: KindNoTokens, Ops: []int{},
		Explanation: "no acquire carried a fencing token, so there were no tokens to check"})
	return r
}

// duplicate explains that the holds of group were all granted token t;
// where a hold of the group was a re-grant after its process's release of
// unknown outcome that rg refused to call the same hold, it says why.
func (v *view) duplicate(group []int32, t uint64, rg *regrantSet) Anomaly {
	ops := make([]int32, 0, len(group))
	var each []string
	for k, i := range group {
		hd := &v.holds[i]
		ops = append(ops, hd.ok)
		if k < 5 {
			each = append(each, fmt.Sprintf("process %d at %s", hd.proc, secs(hd.start)))
		}
	}
	if len(group) > 5 {
		each = append(each, fmt.Sprintf("%d more", len(group)-5))
	}
	why := ""
	for _, i := range group {
		if n, ok := rg.between[i]; ok {
			hd := &v.holds[i]
			why = fmt.Sprintf("; the grant to process %d at %s came after its release of unknown outcome, but %s of the lock came between, so it was not the same hold going on",
				hd.proc, secs(hd.start), plural(int64(n), "other grant"))
			break
		}
	}
	return Anomaly{
		Kind: KindDuplicateToken,
		Ops:  v.indexes(ops...),
		Explanation: fmt.Sprintf("token %d of lock %q was granted %d times: to %s%s",
			t, v.locks[v.holds[group[0]].lock], len(group), strings.Join(each, ", "), why),
	}
}

// regrantSet is what regrants finds about the re-grants of a token to the
// process that held it.
type regrantSet struct {
	// continues is, per hold, whether it continues the hold before it
	// (see FencingTokens).
	continues []bool
	// between holds, for a re-grant that met every condition of a
	// continued hold but the last, how many grants of the lock by other
	// processes came between the two.
	between map[int32]int
}

// regrants finds, for each hold, whether it continues its process's
// previous hold of the lock, as FencingTokens defines it. It returns ctx's
// error if ctx is done first.
func (v *view) regrants(ctx context.Context) (*regrantSet, error) {
	h := v.h
	rg := &regrantSet{continues: make([]bool, len(v.holds)), between: map[int32]int{}}
	var dead map[int][]int64
	step := 0
	for _, list := range v.holdsByLock() {
		// last is, per process, its latest hold of the lock so far and
		// where in list it was.
		type at struct{ hold, pos int }
		last := map[int]at{}
		for pos, b := range list {
			hb := &v.holds[b]
			prev, seen := last[hb.proc]
			last[hb.proc] = at{int(b), pos}
			if !seen {
				continue
			}
			step++
			if err := stopped(ctx, step); err != nil {
				return nil, err
			}
			ha := &v.holds[prev.hold]
			ta, tb := h.Token(int(ha.ok)), h.Token(int(hb.ok))
			if ta == nil || tb == nil || *ta != *tb {
				continue
			}
			val := h.LockValue(int(ha.ok))
			if val == "" || val != h.LockValue(int(hb.ok)) {
				continue
			}
			if ha.release < 0 || ha.closer != ha.release {
				continue
			}
			done := v.pair[ha.release]
			if done < 0 || h.Type(int(done)) != history.Info || hb.inv < 0 || !v.onlyFailedAcquires(hb.proc, done, hb.inv) {
				continue
			}
			if dead == nil {
				dead = deaths(h)
			}
			if diedBetween(dead[hb.proc], h.Time(int(done)), h.Time(int(hb.inv))) {
				continue
			}
			if others := pos - prev.pos - 1; others > 0 {
				rg.between[b] = others
				continue
			}
			rg.continues[b] = true
		}
	}
	return rg, nil
}

// onlyFailedAcquires reports whether process proc recorded nothing but
// failed acquires (their invocations and completions) between the ops at
// positions from and to, both left out.
func (v *view) onlyFailedAcquires(proc int, from, to int32) bool {
	h := v.h
	for i := from + 1; i < to; i++ {
		if h.Process(int(i)) != proc {
			continue
		}
		if h.F(int(i)) != history.Acquire {
			return false
		}
		switch h.Type(int(i)) {
		case history.Fail:
		case history.Invoke:
			if d := v.pair[i]; d < 0 || d >= to || h.Type(int(d)) != history.Fail {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// diedBetween reports whether one of the death times ds (ascending) is in
// [from, to].
func diedBetween(ds []int64, from, to int64) bool {
	k, _ := slices.BinarySearch(ds, from)
	return k < len(ds) && ds[k] <= to
}

// regressions collapses token regressions: successive regressions of a lock
// below the same maximum (set by the same op) are one run, reported as one
// anomaly that counts the rest.
type regressions struct {
	cur   []int // per lock id, the index in runs of its latest run, or -1
	runs  []regressionRun
	total int // regressions, collapsed ones included
}

// regressionRun is one anomaly and the regressions it stands for.
type regressionRun struct {
	top     int32  // the checker's id of the op that set the maximum
	token   uint64 // the maximum
	anomaly int    // the index of the run's anomaly
	more    int    // the later regressions collapsed into it
}

func newRegressions(locks int) *regressions {
	g := &regressions{cur: make([]int, locks)}
	for i := range g.cur {
		g.cur[i] = -1
	}
	return g
}

// add counts a regression of lock below token, the maximum set by the op
// the checker calls top. It reports whether the regression starts a new
// run, in which case the caller must add the run's anomaly at index
// anomaly; otherwise the latest run of the lock was below the same
// maximum and the regression is counted in it.
func (g *regressions) add(lock, top int32, anomaly int, token uint64) bool {
	for int(lock) >= len(g.cur) {
		g.cur = append(g.cur, -1) // a lock first seen now (a streaming check)
	}
	g.total++
	if c := g.cur[lock]; c >= 0 && g.runs[c].top == top {
		g.runs[c].more++
		return false
	}
	g.cur[lock] = len(g.runs)
	g.runs = append(g.runs, regressionRun{top: top, token: token, anomaly: anomaly})
	return true
}

// finish appends to the explanation of each run's anomaly in as how many
// later regressions (of what, e.g. "grant") it stands for.
func (g *regressions) finish(as []Anomaly, what string) {
	for _, run := range g.runs {
		if run.more == 0 {
			continue
		}
		verb := "were"
		if run.more == 1 {
			verb = "was"
		}
		as[run.anomaly].Explanation += fmt.Sprintf(", and %s %s below token %d too",
			plural(int64(run.more), "later "+what), verb, run.token)
	}
}
