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

// Resource checks what the resource store actually accepted. Only write oks count as accepted. A write that completed fail
// was rejected by the store when its completion carries a store_time or its
// error starts with "rejected"; any other failed write never reached the
// store. A write that completed info, or not at all, is unknown. A write's
// store time is the store_time of its completion, or the Time of its
// invocation when the completion carries none.
//
// A writer's lease is the hold of the same process's latest acquire ok of
// the lock before the write was invoked. It ends at the earlier of that
// acquire's valid_until (when non-zero) and the process's next release
// invocation of the lock; a later acquire does not end it.
//
// It reports three kinds of anomaly:
//
//   - "stale-write": an accepted write whose store time is after the end of
//     the writer's lease, or whose writer held no lease at all. The Ops are
//     the writer's acquire ok, the write invocation and ok and, when there
//     is one, the first acquire ok of the same lock by another process with
//     a Time after the lease end and at or before the store time: the holder
//     the write trampled. Like all Anomaly.Ops they are listed in time
//     order, so the trampled holder's acquire ok may precede the write ok.
//     A write whose lease ran out (its valid_until, not a release of its
//     writer, ended it) and that trampled nobody — no other process's
//     acquire ok has a Time after the lease end and at or before the store
//     time — is no anomaly but a "late-write" note (see below).
//   - "lost-update": per lock, the accepted writes form a sequence in store
//     time order (ties by the history index of their oks); writes of
//     unknown outcome are not in it. A write's base is the n of the
//     writer's latest read ok of the lock since its latest acquire
//     invocation, or the write's n - 1 when there is no such read. For
//     every consecutive pair of writes W1, W2 of the sequence with
//     base(W2) < n(W1), W2 overwrote W1 without having seen it: one anomaly
//     naming the write ok of W1, the read ok of W2 (when there is one) and
//     the write ok of W2, with n(W1) - base(W2) updates lost. A base above
//     n(W1) is only possible when a write of unknown outcome was applied,
//     and is not reported. So a stale write that rolls the counter back is
//     one anomaly, and the correct sections after it, which re-read values
//     already written, are none.
//   - "token-regression", unless Mode is "none" or "check-and-set": in the same
//     order, an accepted write carrying a token lower than the highest
//     token of an accepted write of the lock before it. Successive
//     regressions of a lock below the same maximum (set by the same write)
//     are one anomaly, the first, whose explanation counts the later ones:
//     a token counter that restarted would otherwise make every later
//     write an anomaly. A regression below a new maximum starts a new
//     anomaly. The Ops are the write ok that set the maximum and the write
//     invocation and ok of the first lower one.
//
// Every rejected write gives a note naming its invocation and completion;
// notes do not change the verdict. It is "write-rejected" (saved by
// fencing, or by the check-and-set claim) when its store time is after the
// end of the writer's lease or the writer held no lease, and
// "live-write-rejected" otherwise: the store refused a holder whose lease
// was still live, as in check-and-set mode after a woken stale holder
// re-claimed the resource, an availability cost of the store's check.
//
// A "late-write" note names the writer's acquire ok and the write
// invocation and ok of a stale write that trampled nobody: no other client
// believed it held the lock between the lease end and the write, so no
// critical section overlapped the write, every later holder read what it
// wrote (what it overwrote, lost-update still reports), and the resource's
// history is the one it would have been had the lease lasted until the
// write. No store could have refused it for the lock's sake: a fenced
// store had seen no newer token, because none had been granted. It is the
// holder's overrun of its own lease, not a broken lock, so it does not
// change the verdict; once another process is granted the lock before the
// write lands, the same write is a stale-write.
//
// The verdict is invalid when there is an anomaly and valid otherwise.
// Stats: "writes_accepted"; "writes_rejected" (every rejected write),
// "saved_by_fencing" (those noted write-rejected) and
// "live_writes_rejected" (those noted live-write-rejected);
// "writes_failed" (failed writes the store never answered);
// "writes_unknown"; "stale_writes"; "late_writes" (those noted
// late-write); "lost_updates" (lost-update anomalies)
// and "updates_lost" (the updates they lost, summed); and, only when the
// token-regression rule applies, "token_regressions" (anomalies) and
// "regressed_writes" (accepted writes below an earlier token, the
// collapsed ones included). When the history holds lost-lock notices, it
// notes every hold whose holder wrote after it was told
// (wrote-after-notice: the client code's fault, not the lock's) and adds
// the statistics of NoticeStats. Nemesis ops are ignored. The check takes
// O(n log n) time.
type Resource struct {
	// Mode is the resource mode of the run: "none" (the store accepts
	// every write), "fenced" (it rejects a write whose token is lower than
	// the highest it accepted), "check-and-set" (it accepts writes only
	// from the holder that claimed it last), another mode, or "" when
	// unknown. Accepted writes are checked for token regressions in every
	// mode but "none" and "check-and-set": there the store does not
	// enforce token order, and a write accepted from a holder whose lease
	// had ended is already a stale-write. Any other mode (such as
	// "etcd-guarded", whose store accepts a write only while the writer
	// still owns the lock and whose writes carry the lock's create
	// revision as token) is taken to guard writes by the lock, so that an
	// accepted write below an earlier token is a violation.
	Mode string
}

var _ Checker = Resource{}

// Name returns "resource".
func (Resource) Name() string { return "resource" }

// fenced reports whether the store of c's mode enforces fencing tokens, so
// that an accepted token regression is an anomaly.
func (c Resource) fenced() bool { return c.Mode != "none" && c.Mode != "check-and-set" }

// resourceCounts are the counts Resource's stats give, and
// StreamResource's too: the writes accepted, rejected (live: those whose
// writer's lease was live), failed before reaching the store and of
// unknown outcome; the stale and late writes; the lost-update anomalies
// and the updates they lost.
type resourceCounts struct {
	accepted, rejected, live, failed, unknown int
	stale, late, lost                         int
	updates                                   int64
}

// put sets stats to the stats of c that Resource's comment names, with
// "saved_by_fencing" the rejected writes that were not live; and, when regs
// is not nil (the store enforces fencing tokens), to the token-regression
// stats of regs.
func (c resourceCounts) put(stats map[string]float64, regs *regressions) {
	if regs != nil {
		stats["token_regressions"] = float64(len(regs.runs))
		stats["regressed_writes"] = float64(regs.total)
	}
	stats["writes_accepted"] = float64(c.accepted)
	stats["writes_rejected"] = float64(c.rejected)
	stats["saved_by_fencing"] = float64(c.rejected - c.live)
	stats["live_writes_rejected"] = float64(c.live)
	stats["writes_failed"] = float64(c.failed)
	stats["writes_unknown"] = float64(c.unknown)
	stats["stale_writes"] = float64(c.stale)
	stats["late_writes"] = float64(c.late)
	stats["lost_updates"] = float64(c.lost)
	stats["updates_lost"] = float64(c.updates)
}

// accepted is one write ok.
type accepted struct {
	w       int32 // index into view.writes
	lock    int32
	store   int64
	n       int64 // the value written, when hasN
	hasN    bool
	base    int64
	hasBase bool
	token   *uint64
}

// Check checks h as the type's comment describes. It returns unknown if
// ctx is done before it finishes.
func (c Resource) Check(ctx context.Context, h *history.Table) Result {
	v, r, ok := begin(ctx, h, c.Name())
	if !ok {
		return r
	}

	var acc []accepted
	var tr *trampled
	var counts resourceCounts
	for i := range v.writes {
		if err := stopped(ctx, i); err != nil {
			return cancelled(c.Name(), err)
		}
		w := &v.writes[i]
		if w.done < 0 || h.Type(int(w.done)) == history.Info {
			counts.unknown++
			continue
		}
		store := v.storeTime(w)
		if h.Type(int(w.done)) == history.Fail {
			done := h.At(int(w.done))
			if done.Value.StoreTime == 0 && !strings.HasPrefix(done.Error, "rejected") {
				counts.failed++
				continue
			}
			counts.rejected++
			if w.hold >= 0 && store <= v.holds[w.hold].leaseEnd {
				counts.live++
				r.Notes = append(r.Notes, v.liveRejected(w, store))
			} else {
				r.Notes = append(r.Notes, v.rejected(w, store))
			}
			continue
		}
		a := accepted{w: int32(i), lock: v.lockIDs[v.lockName(w.inv)], store: store, token: v.token(w.done)}
		if n := v.n(w.done); n != nil {
			a.n, a.hasN = *n, true
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
			if v.trampledNobody(w, a.store, tr) {
				counts.late++
				r.Notes = append(r.Notes, v.late(w, a.store))
				continue
			}
			counts.stale++
			r.Anomalies = append(r.Anomalies, v.stale(w, a.store, tr))
		}
	}

	// The accepted writes of each lock in the order the store took them.
	slices.SortFunc(acc, func(a, b accepted) int {
		if c := cmp.Compare(a.lock, b.lock); c != 0 {
			return c
		}
		if c := cmp.Compare(a.store, b.store); c != 0 {
			return c
		}
		return v.before(v.writes[a.w].done, v.writes[b.w].done)
	})
	counts.accepted = len(acc)
	var err error
	counts.lost, counts.updates, err = v.lostUpdates(ctx, &r, acc)
	if err != nil {
		return cancelled(c.Name(), err)
	}
	var regs *regressions
	if c.fenced() {
		if regs, err = v.writeRegressions(ctx, &r, acc); err != nil {
			return cancelled(c.Name(), err)
		}
	}
	counts.put(r.Stats, regs)
	for _, row := range v.noticeStats(&r) {
		if len(row.WritesAfter) > 0 {
			r.Notes = append(r.Notes, wroteAfterNotice(row))
		}
	}
	return settle(r)
}

// storeTime returns the store time of a completed write: the store_time of
// its completion, or the Time of its invocation when that carries none.
func (v *view) storeTime(w *write) int64 {
	if t := v.h.StoreTime(int(w.done)); t != 0 {
		return t
	}
	return v.h.Time(int(w.inv))
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
	proc := v.h.Process(int(w.inv))
	if w.hold < 0 {
		return Anomaly{
			Kind: KindStaleWrite,
			Ops:  v.indexes(w.inv, w.done),
			Explanation: fmt.Sprintf("process %d %s at %s without having acquired the lock",
				proc, v.wrote(w), secs(store)),
		}
	}
	hd := &v.holds[w.hold]
	ended := "its lease ended"
	if hd.release >= 0 && v.h.Time(int(hd.release)) == hd.leaseEnd {
		ended = "it invoked release"
	}
	expl := fmt.Sprintf("process %d %s at %s, %s after %s at %s",
		proc, v.wrote(w), secs(store), secs(store-hd.leaseEnd), ended, secs(hd.leaseEnd))
	ops := []int32{hd.ok, w.inv, w.done}
	if t := tr.find(v, hd.lock, proc, hd.leaseEnd, store+1); t >= 0 {
		o := &v.holds[t]
		ops = append(ops, o.ok)
		if tok := v.h.Token(int(o.ok)); tok != nil {
			expl += fmt.Sprintf("; process %d had acquired token %d at %s", o.proc, *tok, secs(o.start))
		} else {
			expl += fmt.Sprintf("; process %d had acquired the lock at %s", o.proc, secs(o.start))
		}
	}
	return Anomaly{Kind: KindStaleWrite, Ops: v.indexes(ops...), Explanation: expl}
}

// trampledNobody reports whether w, accepted at store after its writer's
// lease ended, is a late write: its writer held a lease that ran out (its
// valid_until ended it, not the writer's release), and no other process
// acquired the lock after the lease end and at or before store.
func (v *view) trampledNobody(w *write, store int64, tr *trampled) bool {
	if w.hold < 0 {
		return false
	}
	hd := &v.holds[w.hold]
	if hd.leaseEnd == noEnd || hd.release >= 0 && v.h.Time(int(hd.release)) <= hd.leaseEnd {
		return false
	}
	return tr.find(v, hd.lock, hd.proc, hd.leaseEnd, store+1) < 0
}

// late notes an accepted write whose writer's lease had run out, before any
// other process acquired the lock.
func (v *view) late(w *write, store int64) Anomaly {
	hd := &v.holds[w.hold]
	return Anomaly{
		Kind: KindLateWrite,
		Ops:  v.indexes(hd.ok, w.inv, w.done),
		Explanation: fmt.Sprintf("process %d %s at %s, %s after its lease ended at %s, but before any other process acquired the lock: a stale write that trampled nobody",
			hd.proc, v.wrote(w), secs(store), secs(store-hd.leaseEnd), secs(hd.leaseEnd)),
	}
}

// rejectedWhat renders "write of token 41", "write of 12" or "write", and
// the store's reason.
func (v *view) rejectedWhat(w *write) (what, reason string) {
	what = "write"
	if t := v.token(w.inv); t != nil {
		what = fmt.Sprintf("write of token %d", *t)
	} else if n := v.n(w.inv); n != nil {
		what = fmt.Sprintf("write of %d", *n)
	}
	reason = v.h.Error(int(w.done))
	if reason == "" {
		reason = "no reason given"
	}
	return what, reason
}

// rejected notes a write the store rejected at store after the writer's
// lease had ended, or from a writer that held no lease.
func (v *view) rejected(w *write, store int64) Anomaly {
	what, reason := v.rejectedWhat(w)
	return Anomaly{
		Kind: KindWriteRejected,
		Ops:  v.indexes(w.inv, w.done),
		Explanation: fmt.Sprintf("the store rejected process %d's %s under lock %q at %s: %s (saved by fencing)",
			v.h.Process(int(w.inv)), what, v.lockName(w.inv), secs(store), reason),
	}
}

// liveRejected notes a write the store rejected at store while the writer's
// lease was still live.
func (v *view) liveRejected(w *write, store int64) Anomaly {
	what, reason := v.rejectedWhat(w)
	hd := &v.holds[w.hold]
	var lease string
	switch {
	case hd.leaseEnd == noEnd:
		lease = "its lease had not ended"
	case hd.release >= 0 && v.h.Time(int(hd.release)) == hd.leaseEnd:
		lease = "it held the lock until it invoked release at " + secs(hd.leaseEnd)
	default:
		lease = "its lease ran until " + secs(hd.leaseEnd)
	}
	return Anomaly{
		Kind: KindLiveWriteRejected,
		Ops:  v.indexes(w.inv, w.done),
		Explanation: fmt.Sprintf("the store rejected process %d's %s under lock %q at %s (%s) although %s: an availability cost of the resource's check",
			v.h.Process(int(w.inv)), what, v.lockName(w.inv), secs(store), reason, lease),
	}
}

// lostUpdates adds a "lost-update" anomaly for every consecutive pair of
// acc, which holds the accepted writes of each lock in store order, whose
// second write was based on a value lower than the first wrote. It returns
// how many anomalies it added and how many updates they lost.
func (v *view) lostUpdates(ctx context.Context, r *Result, acc []accepted) (int, int64, error) {
	n, updates := 0, int64(0)
	for i := 1; i < len(acc); i++ {
		if err := stopped(ctx, i); err != nil {
			return 0, 0, err
		}
		a, b := &acc[i-1], &acc[i]
		if a.lock != b.lock || !a.hasN || !b.hasBase || b.base >= a.n {
			continue
		}
		n++
		updates += a.n - b.base
		r.Anomalies = append(r.Anomalies, v.lostUpdate(a, b))
	}
	return n, updates, nil
}

// lostUpdate explains that b overwrote a without having seen it.
func (v *view) lostUpdate(a, b *accepted) Anomaly {
	wa, wb := &v.writes[a.w], &v.writes[b.w]
	var based string
	if wb.read >= 0 && v.n(wb.read) != nil {
		rd := v.h.At(int(wb.read))
		at := rd.Value.StoreTime
		if at == 0 {
			at = rd.Time
		}
		based = fmt.Sprintf("read %d at %s", b.base, secs(at))
	} else {
		based = fmt.Sprintf("read nothing, so based on %d", b.base)
	}
	wrote := "wrote"
	if n := v.n(wb.done); n != nil {
		wrote = fmt.Sprintf("wrote %d", *n)
	}
	return Anomaly{
		Kind: KindLostUpdate,
		Ops:  v.indexes(wa.done, wb.read, wb.done),
		Explanation: fmt.Sprintf("process %d %s under lock %q (%s) at %s over process %d's write of %d at %s: %s lost",
			v.h.Process(int(wb.inv)), wrote, v.locks[b.lock], based, secs(b.store),
			v.h.Process(int(wa.inv)), a.n, secs(a.store), plural(a.n-b.base, "update")),
	}
}

// writeRegressions adds "token-regression" anomalies for the accepted
// writes whose token is lower than one the store accepted before them for
// the same lock, one per run of successive regressions below the same
// maximum, and returns the runs. acc holds the accepted writes of each lock
// in store order.
func (v *view) writeRegressions(ctx context.Context, r *Result, acc []accepted) (*regressions, error) {
	regs := newRegressions(len(v.locks))
	top := -1 // the write with the highest token so far of the current lock
	for i := range acc {
		if err := stopped(ctx, i); err != nil {
			return nil, err
		}
		b := &acc[i]
		if b.token == nil {
			continue
		}
		if top < 0 || acc[top].lock != b.lock {
			top = i
			continue
		}
		a := &acc[top]
		switch {
		case *b.token > *a.token:
			top = i
		case *b.token < *a.token:
			if !regs.add(b.lock, int32(top), len(r.Anomalies), *a.token) {
				continue
			}
			wa, wb := &v.writes[a.w], &v.writes[b.w]
			r.Anomalies = append(r.Anomalies, Anomaly{
				Kind: KindTokenRegression,
				Ops:  v.indexes(wa.done, wb.inv, wb.done),
				Explanation: fmt.Sprintf("the store accepted process %d's write of token %d under lock %q at %s after it had accepted process %d's write of token %d at %s",
					v.h.Process(int(wb.inv)), *b.token, v.locks[b.lock], secs(b.store),
					v.h.Process(int(wa.inv)), *a.token, secs(a.store)),
			})
		}
	}
	regs.finish(r.Anomalies, "accepted write")
	return regs, nil
}

// plural renders "1 update" or "2 updates".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
