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
// holder to holder and are never granted twice (DESIGN.md §6, oracle 3).
//
// It looks only at acquire oks that carry a token, per lock. If acquire A
// completed (the Time of its ok) strictly before acquire B was invoked,
// token(A) < token(B) is required; a B whose token is lower than the highest
// token of such an A gives a "token-regression" anomaly naming A's ok and
// B's invocation and ok, at most one per B and against the A that completed
// first with that highest token. A token granted by two or more acquire oks
// of the same lock, by any processes, gives one "duplicate-token" anomaly
// naming all of those oks (so an equal token is a duplicate, not a
// regression).
//
// The verdict is invalid when there is an anomaly and valid otherwise; when
// no acquire carries a token there is nothing to check, the verdict is valid
// and a note of kind "no-tokens" says so. Stats: "tokens" (acquire oks with
// a token), "token_regressions" and "duplicate_tokens". Nemesis ops are
// ignored. The check takes O(n log n) time.
type FencingTokens struct{}

var _ Checker = FencingTokens{}

// Name returns "fencing-tokens".
func (FencingTokens) Name() string { return "fencing-tokens" }

// Check checks h as the type's comment describes. It returns unknown if
// ctx is done before it finishes.
func (c FencingTokens) Check(ctx context.Context, h history.History) Result {
	v, err := buildView(ctx, h)
	if err != nil {
		return cancelled(c.Name(), err)
	}
	r := newResult(c.Name())

	// byOK are the holds with a token in order of their acquire ok.
	var byOK []int32
	for i := range v.holds {
		if h[v.holds[i].ok].Value.Token != nil {
			byOK = append(byOK, int32(i))
		}
	}
	r.Stats["tokens"] = float64(len(byOK))
	r.Stats["token_regressions"] = 0
	r.Stats["duplicate_tokens"] = 0
	if len(byOK) == 0 {
		r.Notes = append(r.Notes, Anomaly{Kind: "no-tokens", Ops: []int{},
			Explanation: "no acquire carried a fencing token, so there were no tokens to check"})
		return r
	}
	tok := func(i int32) uint64 { return *h[v.holds[i].ok].Value.Token }
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
	regressions, next := 0, 0
	for step, b := range byInv {
		if err := stopped(ctx, step); err != nil {
			return cancelled(c.Name(), err)
		}
		at := h[invoked(b)].Time
		for ; next < len(byOK) && h[v.holds[byOK[next]].ok].Time < at; next++ {
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
		regressions++
		ha, hb := &v.holds[a], &v.holds[b]
		r.Anomalies = append(r.Anomalies, Anomaly{
			Kind: "token-regression",
			Ops:  v.indexes(ha.ok, hb.inv, hb.ok),
			Explanation: fmt.Sprintf("process %d was granted token %d of lock %q at %s (invoked at %s), lower than token %d granted to process %d at %s",
				hb.proc, tok(b), v.locks[hb.lock], secs(hb.start), secs(at), tok(a), ha.proc, secs(ha.start)),
		})
	}

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
	duplicates := 0
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
			r.Anomalies = append(r.Anomalies, v.duplicate(byTok[i:j], tok(byTok[i])))
		}
		i = j
	}

	r.Stats["token_regressions"] = float64(regressions)
	r.Stats["duplicate_tokens"] = float64(duplicates)
	return settle(r)
}

// duplicate explains that the holds of group were all granted token t.
func (v *view) duplicate(group []int32, t uint64) Anomaly {
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
	return Anomaly{
		Kind: "duplicate-token",
		Ops:  v.indexes(ops...),
		Explanation: fmt.Sprintf("token %d of lock %q was granted %d times: to %s",
			t, v.locks[v.holds[group[0]].lock], len(group), strings.Join(each, ", ")),
	}
}
