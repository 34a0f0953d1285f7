package checker

import (
	"context"
	"fmt"

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
// rules). Nemesis ops are ignored. The rules have one implementation,
// StreamFencing: Check runs it over the history's ops in time order.
type FencingTokens struct{}

var _ Checker = FencingTokens{}

// Name returns "fencing-tokens".
func (FencingTokens) Name() string { return "fencing-tokens" }

// Check checks h as the type's comment describes, by running StreamFencing
// over h's ops; as h is held, a duplicate names the first grant of its
// token however long ago it was. It returns unknown if ctx is done before
// it finishes.
func (c FencingTokens) Check(ctx context.Context, h *history.Table) Result {
	s := NewStreamFencing()
	s.keepAll = true // the history is held: name the first holder of any duplicate
	r, _ := streamTable(ctx, h, c.Name(), s)
	return r
}

// tokenCounts are the counts FencingTokens' stats give: the acquire oks with a token, the re-grants among
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
