package checker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/locktest/locktest/history"
)

// Resource checks what the resource store actually accepted (DESIGN.md §6,
// oracle 2). Only write oks count as accepted; a write that completed fail
// was rejected and one that completed info, or not at all, is unknown.
// A write's store time is the store_time of its ok, or the Time of its
// invocation when the ok carries none.
//
// It reports three kinds of anomaly:
//
//   - "stale-write": an accepted write whose store time is after the end of
//     the writer's lease, or whose writer held no lease at all. The writer's
//     lease is the hold of the same process's latest acquire ok of the lock
//     before the write was invoked, and it ends at the earlier of that
//     acquire's valid_until (when non-zero) and the process's next release
//     invocation of the lock; a later acquire does not end it. The Ops are
//     the writer's acquire ok, the write invocation and ok and, when there
//     is one, the first acquire ok of the same lock by another process with
//     a Time strictly between the lease end and the store time: the holder
//     the write trampled. Like all Anomaly.Ops they are listed in time
//     order, so the trampled holder's acquire ok may precede the write ok.
//   - "lost-update": two or more accepted writes of one lock whose critical
//     sections read the same counter value. A write's base is the n of the
//     writer's latest read ok of the lock since its latest acquire
//     invocation, or the write's n - 1 when there is no such read. One
//     anomaly per base value, naming the read oks and the write oks.
//   - "token-regression": ordering the accepted writes of a lock that carry
//     a token by store time, a write whose token is lower than the highest
//     token accepted before it. The Ops are the earlier write ok with the
//     highest token and the write invocation and ok of the lower one.
//
// Every rejected write gives a note of kind "write-rejected" (a write that
// fencing or the check-and-set claim saved) naming the write invocation and
// completion; notes do not change the verdict. The verdict is invalid when
// there is an anomaly and valid otherwise. Stats: "writes_accepted",
// "writes_rejected", "saved_by_fencing" (the same number), "writes_unknown",
// "stale_writes", "lost_updates" (lost-update anomalies) and
// "token_regressions". Nemesis ops are ignored. The check takes
// O(n log n) time.
type Resource struct{}

var _ Checker = Resource{}

// Name returns "resource".
func (Resource) Name() string { return "resource" }

// accepted is one write ok.
type accepted struct {
	w       int32 // index into view.writes
	lock    int32
	store   int64
	base    int64
	hasBase bool
	token   *uint64
}

// Check checks h as the type's comment describes. It returns unknown if
// ctx is done before it finishes.
func (c Resource) Check(ctx context.Context, h history.History) Result {
	v, err := buildView(ctx, h)
	if err != nil {
		return cancelled(c.Name(), err)
	}
	r := newResult(c.Name())

	var acc []accepted
	var tr *trampled
	rejected, unknown, stale := 0, 0, 0
	for i := range v.writes {
		if err := stopped(ctx, i); err != nil {
			return cancelled(c.Name(), err)
		}
		w := &v.writes[i]
		if w.done < 0 || h[w.done].Type == history.Info {
			unknown++
			continue
		}
		if h[w.done].Type == history.Fail {
			rejected++
			r.Notes = append(r.Notes, v.rejected(w))
			continue
		}
		a := accepted{w: int32(i), lock: v.lockIDs[v.lockName(w.inv)], store: h[w.done].Value.StoreTime, token: v.token(w.done)}
		if a.store == 0 {
			a.store = h[w.inv].Time
		}
		if w.read >= 0 && v.n(w.read) != nil {
			a.base, a.hasBase = *v.n(w.read), true
		} else if n := v.n(w.inv); n != nil {
			a.base, a.hasBase = *n-1, true
		}
		acc = append(acc, a)

		if w.hold < 0 || a.store > v.holds[w.hold].leaseEnd {
			if tr == nil {
				tr = newTrampled(v)
			}
			stale++
			r.Anomalies = append(r.Anomalies, v.stale(w, a.store, tr))
		}
	}

	lost, err := v.lostUpdates(ctx, &r, acc)
	if err != nil {
		return cancelled(c.Name(), err)
	}
	regressions, err := v.writeRegressions(ctx, &r, acc)
	if err != nil {
		return cancelled(c.Name(), err)
	}

	r.Stats["writes_accepted"] = float64(len(acc))
	r.Stats["writes_rejected"] = float64(rejected)
	r.Stats["saved_by_fencing"] = float64(rejected)
	r.Stats["writes_unknown"] = float64(unknown)
	r.Stats["stale_writes"] = float64(stale)
	r.Stats["lost_updates"] = float64(lost)
	r.Stats["token_regressions"] = float64(regressions)
	return settle(r)
}

// trampled finds, for a stale write, the first hold of another process that
// began after the writer's lease ended.
type trampled struct {
	byLock [][]int32
	// next[l][j] is the first k > j with byLock[l][k] held by another
	// process than byLock[l][j], or len(byLock[l]).
	next [][]int32
}

func newTrampled(v *view) *trampled {
	t := &trampled{byLock: v.holdsByLock()}
	t.next = make([][]int32, len(t.byLock))
	for l, hs := range t.byLock {
		nx := make([]int32, len(hs))
		for j := len(hs) - 1; j >= 0; j-- {
			switch {
			case j == len(hs)-1:
				nx[j] = int32(len(hs))
			case v.holds[hs[j+1]].proc != v.holds[hs[j]].proc:
				nx[j] = int32(j + 1)
			default:
				nx[j] = nx[j+1]
			}
		}
		t.next[l] = nx
	}
	return t
}

// find returns the first hold of lock by another process than proc that
// started strictly between after and before, or -1.
func (t *trampled) find(v *view, lock int32, proc int, after, before int64) int32 {
	hs := t.byLock[lock]
	j := sort.Search(len(hs), func(j int) bool { return v.holds[hs[j]].start > after })
	if j < len(hs) && v.holds[hs[j]].proc == proc {
		j = int(t.next[lock][j])
	}
	if j < len(hs) && v.holds[hs[j]].start < before {
		return hs[j]
	}
	return -1
}

// wrote renders "wrote 12 under lock "x" with token 41".
func (v *view) wrote(w *write) string {
	var b strings.Builder
	b.WriteString("wrote")
	if n := v.n(w.inv); n != nil {
		fmt.Fprintf(&b, " %d", *n)
	}
	fmt.Fprintf(&b, " under lock %q", v.lockName(w.inv))
	if t := v.token(w.inv); t != nil {
		fmt.Fprintf(&b, " with token %d", *t)
	}
	return b.String()
}

// stale explains an accepted write whose writer's lease had ended, or that
// had no lease.
func (v *view) stale(w *write, store int64, tr *trampled) Anomaly {
	proc := v.h[w.inv].Process
	if w.hold < 0 {
		return Anomaly{
			Kind: "stale-write",
			Ops:  v.indexes(w.inv, w.done),
			Explanation: fmt.Sprintf("process %d %s at %s without having acquired the lock",
				proc, v.wrote(w), secs(store)),
		}
	}
	hd := &v.holds[w.hold]
	ended := "its lease ended"
	if hd.release >= 0 && v.h[hd.release].Time == hd.leaseEnd {
		ended = "it invoked release"
	}
	expl := fmt.Sprintf("process %d %s at %s, %s after %s at %s",
		proc, v.wrote(w), secs(store), secs(store-hd.leaseEnd), ended, secs(hd.leaseEnd))
	ops := []int32{hd.ok, w.inv, w.done}
	if t := tr.find(v, hd.lock, proc, hd.leaseEnd, store); t >= 0 {
		o := &v.holds[t]
		ops = append(ops, o.ok)
		if tok := v.h[o.ok].Value.Token; tok != nil {
			expl += fmt.Sprintf("; process %d had acquired token %d at %s", o.proc, *tok, secs(o.start))
		} else {
			expl += fmt.Sprintf("; process %d had acquired the lock at %s", o.proc, secs(o.start))
		}
	}
	return Anomaly{Kind: "stale-write", Ops: v.indexes(ops...), Explanation: expl}
}

// rejected notes a write the store rejected.
func (v *view) rejected(w *write) Anomaly {
	done := &v.h[w.done]
	at := done.Value.StoreTime
	if at == 0 {
		at = done.Time
	}
	what := "write"
	if t := v.token(w.inv); t != nil {
		what = fmt.Sprintf("write of token %d", *t)
	} else if n := v.n(w.inv); n != nil {
		what = fmt.Sprintf("write of %d", *n)
	}
	reason := done.Error
	if reason == "" {
		reason = "no reason given"
	}
	return Anomaly{
		Kind: "write-rejected",
		Ops:  v.indexes(w.inv, w.done),
		Explanation: fmt.Sprintf("the store rejected process %d's %s under lock %q at %s: %s (saved by fencing)",
			done.Process, what, v.lockName(w.inv), secs(at), reason),
	}
}

// lostUpdates adds a "lost-update" anomaly for every lock and base value
// that more than one accepted write was based on, and returns how many.
func (v *view) lostUpdates(ctx context.Context, r *Result, acc []accepted) (int, error) {
	bases := make([]accepted, 0, len(acc))
	for _, a := range acc {
		if a.hasBase {
			bases = append(bases, a)
		}
	}
	slices.SortFunc(bases, func(a, b accepted) int {
		if c := cmp.Compare(a.lock, b.lock); c != 0 {
			return c
		}
		if c := cmp.Compare(a.base, b.base); c != 0 {
			return c
		}
		if c := cmp.Compare(a.store, b.store); c != 0 {
			return c
		}
		return cmp.Compare(a.w, b.w)
	})
	lost := 0
	for i, step := 0, 0; i < len(bases); step++ {
		if err := stopped(ctx, step); err != nil {
			return 0, err
		}
		j := i + 1
		for j < len(bases) && bases[j].lock == bases[i].lock && bases[j].base == bases[i].base {
			j++
		}
		if j-i > 1 {
			lost++
			r.Anomalies = append(r.Anomalies, v.lostUpdate(bases[i:j]))
		}
		i = j
	}
	return lost, nil
}

// lostUpdate explains that the writes of group, all based on one value, were
// all accepted.
func (v *view) lostUpdate(group []accepted) Anomaly {
	ops := make([]int32, 0, 2*len(group))
	var each []string
	for k, a := range group {
		w := &v.writes[a.w]
		ops = append(ops, w.read, w.done)
		if k < 5 {
			s := fmt.Sprintf("process %d", v.h[w.inv].Process)
			if n := v.n(w.inv); n != nil {
				s += fmt.Sprintf(" wrote %d", *n)
			}
			if t := a.token; t != nil {
				s += fmt.Sprintf(" with token %d", *t)
			}
			each = append(each, s+" at "+secs(a.store))
		}
	}
	if len(group) > 5 {
		each = append(each, fmt.Sprintf("%d more", len(group)-5))
	}
	return Anomaly{
		Kind: "lost-update",
		Ops:  v.indexes(ops...),
		Explanation: fmt.Sprintf("%d critical sections of lock %q were based on counter value %d and the store accepted the write of each (%s): %s lost",
			len(group), v.locks[group[0].lock], group[0].base, strings.Join(each, ", "), plural(len(group)-1, "update")),
	}
}

// writeRegressions adds a "token-regression" anomaly for every accepted
// write whose token is lower than one the store accepted before it for the
// same lock, and returns how many.
func (v *view) writeRegressions(ctx context.Context, r *Result, acc []accepted) (int, error) {
	toks := make([]accepted, 0, len(acc))
	for _, a := range acc {
		if a.token != nil {
			toks = append(toks, a)
		}
	}
	slices.SortFunc(toks, func(a, b accepted) int {
		if c := cmp.Compare(a.lock, b.lock); c != 0 {
			return c
		}
		if c := cmp.Compare(a.store, b.store); c != 0 {
			return c
		}
		return cmp.Compare(a.w, b.w)
	})
	n := 0
	top := -1 // the write with the highest token so far of the current lock
	for i := range toks {
		if err := stopped(ctx, i); err != nil {
			return 0, err
		}
		b := &toks[i]
		if top < 0 || toks[top].lock != b.lock {
			top = i
			continue
		}
		a := &toks[top]
		switch {
		case *b.token > *a.token:
			top = i
		case *b.token < *a.token:
			n++
			wa, wb := &v.writes[a.w], &v.writes[b.w]
			r.Anomalies = append(r.Anomalies, Anomaly{
				Kind: "token-regression",
				Ops:  v.indexes(wa.done, wb.inv, wb.done),
				Explanation: fmt.Sprintf("the store accepted process %d's write of token %d under lock %q at %s after it had accepted process %d's write of token %d at %s",
					v.h[wb.inv].Process, *b.token, v.locks[b.lock], secs(b.store),
					v.h[wa.inv].Process, *a.token, secs(a.store)),
			})
		}
	}
	return n, nil
}

// plural renders "1 update" or "2 updates".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
