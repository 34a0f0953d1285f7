package checker

import (
	"context"
	"fmt"
	"sort"

	"github.com/locktest/locktest/history"
)

// MutualExclusion checks mutual exclusion as the clients believed it.
//
// A hold of process p starts at the Time of an acquire ok and ends at the
// earliest of p's next release invocation of that lock, the acquire's
// valid_until (when non-zero) and p's next acquire invocation of that lock;
// when there is none of these, it lasts past the end of the history (the
// largest Time of any op), so a hold that starts at that very end overlaps
// it. Acquires that completed fail or info, or not at all, are not
// holds. Holds that merely touch (one ends at the ns the other starts) do not
// overlap. Nemesis ops are ignored, and holds of differently named locks
// never conflict.
//
// The checker reports an "overlapping-holds" anomaly for every hold B that
// starts inside a hold A of the same lock by another process (A.start <=
// B.start < A.end, ties in start broken by index) and ends after A starts
// (A.start < B.end; only an empty B, released at the ns it began or
// granted with its valid_until already past, can fail that), where a hold
// that lasts past the end of the history ends after everything, naming the acquire oks of
// A and B and A's release invocation when it has one. Each hold is reported
// at most once, against the live hold of another process that ends last. It
// reports a "foreign-release" anomaly for every release ok whose
// value.removed is non-empty and differs from the lock_value of its
// invocation, naming the release invocation and ok and, when one is found,
// the latest acquire ok of the same lock whose lock_value is the removed one
// (the holder whose lock was deleted). It reports a "stale-release"
// anomaly for every release ok, not a foreign release, of a lease A of
// process p (its acquire ok has a valid_until) after which another process
// q was granted the lock: an acquire ok G of the same lock by q invoked
// after A began, completed at or after A's valid_until (so that no
// overlap of the two holds is reported) and before p invoked the release.
// The lock service then confirmed, by the release's success, that it still
// held p's lease after it had handed the lock to q (a release without an
// owner check, one that reports success whatever happened, a lease that
// came back). It names A's acquire ok, the latest such G's acquire ok, and
// the release's invocation and ok.
//
// The verdict is invalid when there is an anomaly and valid otherwise.
// Stats: "holds" and "acquire_ok" (the same number: every acquire ok starts
// a hold), "acquire_fail", "acquire_info", "overlaps",
// "foreign_releases" and "stale_releases". The check takes O(n log n)
// time, and O(n·k) with k processes for the stale releases.
type MutualExclusion struct{}

var _ Checker = MutualExclusion{}

// Name returns "mutual-exclusion".
func (MutualExclusion) Name() string { return "mutual-exclusion" }

// Check checks h as the type's comment describes. It returns unknown if
// ctx is done before it finishes.
func (c MutualExclusion) Check(ctx context.Context, h *history.Table) Result {
	v, r, ok := begin(ctx, h, c.Name())
	if !ok {
		return r
	}

	// live is, per lock, the hold that ends last (best) and the hold that
	// ends last among the other processes than best's (other); either is
	// -1 when unknown. An anomaly's A is best, or other when best is B's own.
	type live struct{ best, other int32 }
	lives := make([]live, len(v.locks))
	for i := range lives {
		lives[i] = live{-1, -1}
	}
	overlaps := 0
	for i := range v.holds {
		if err := stopped(ctx, i); err != nil {
			return cancelled(c.Name(), err)
		}
		b := &v.holds[i]
		l := &lives[b.lock]
		ai := l.best
		if ai >= 0 && v.holds[ai].proc == b.proc {
			ai = l.other
		}
		// Holds that merely touch do not overlap: B must start before A
		// ends and end after A starts (a hold that lasts past the end of
		// the history ends after everything). The second condition only
		// matters for a B that is empty (released at the ns it began, or
		// granted with its valid_until already past).
		if ai >= 0 && v.overlaps(&v.holds[ai], b) {
			overlaps++
			r.Anomalies = append(r.Anomalies, v.overlap(&v.holds[ai], b))
		}
		switch {
		case l.best < 0:
			l.best = int32(i)
		case b.lastEnd() > v.holds[l.best].lastEnd():
			if b.proc != v.holds[l.best].proc {
				l.other = l.best
			}
			l.best = int32(i)
		case b.proc != v.holds[l.best].proc && (l.other < 0 || b.lastEnd() > v.holds[l.other].lastEnd()):
			l.other = int32(i)
		}
	}

	if len(v.foreign) > 0 {
		owners := v.lockValueOwners()
		for _, p := range v.foreign {
			r.Anomalies = append(r.Anomalies, v.foreignRelease(p, owners))
		}
	}

	for _, sr := range v.stale {
		r.Anomalies = append(r.Anomalies, v.staleRelease(sr))
	}

	mutexCounts{holds: len(v.holds), fail: v.acquireFail, info: v.acquireInfo, overlaps: overlaps, foreign: len(v.foreign), stale: len(v.stale)}.put(r.Stats)
	return settle(r)
}

// mutexCounts are the counts MutualExclusion's stats give, and
// StreamMutex's too: the holds (every acquire ok), the acquires that
// failed and those of unknown outcome, and the overlapping-holds and
// foreign-release and stale-release anomalies.
type mutexCounts struct{ holds, fail, info, overlaps, foreign, stale int }

// put sets stats to the stats of c that MutualExclusion's comment names:
// "holds" and "acquire_ok" are both the holds.
func (c mutexCounts) put(stats map[string]float64) {
	stats["holds"] = float64(c.holds)
	stats["acquire_ok"] = float64(c.holds)
	stats["acquire_fail"] = float64(c.fail)
	stats["acquire_info"] = float64(c.info)
	stats["overlaps"] = float64(c.overlaps)
	stats["foreign_releases"] = float64(c.foreign)
	stats["stale_releases"] = float64(c.stale)
}

// staleReleaseText explains that process p's release of lock at rel,
// of its hold acquired at start, succeeded although process q was granted
// the lock at granted (invoked at invoked) during that hold.
func staleReleaseText(p int, lock string, start int64, rel int64, q int, invoked, granted int64, tok *uint64) string {
	return fmt.Sprintf("process %d's release of lock %q at %s succeeded, but process %d had been granted the lock at %s%s (invoked at %s) after process %d's grant at %s: the lock service confirmed a lease it had handed on",
		p, lock, secs(rel), q, secs(granted), withToken(tok), secs(invoked), p, secs(start))
}

// staleRelease explains the stale release sr.
func (v *view) staleRelease(sr staleRelease) Anomaly {
	a, g := &v.holds[sr.hold], &v.holds[sr.taken]
	return Anomaly{
		Kind:        KindStaleRelease,
		Ops:         v.indexes(a.ok, g.ok, sr.inv, sr.ok),
		Explanation: staleReleaseText(a.proc, v.locks[a.lock], a.start, v.h.Time(int(sr.inv)), g.proc, v.h.Time(int(g.inv)), g.start, v.h.Token(int(g.ok))),
	}
}

// lastEnd is when h ends for ordering live holds: its end, or after every
// time when it lasts past the end of the history.
func (h *hold) lastEnd() int64 {
	if h.why == endHistory {
		return noEnd
	}
	return h.end
}

// overlaps reports whether hold b, which starts no earlier than a, overlaps
// it.
func (v *view) overlaps(a, b *hold) bool {
	aEnds := a.end > b.start || a.why == endHistory
	bEnds := b.end > a.start || b.why == endHistory
	return aEnds && bEnds
}

// overlap explains that hold b began while a was still held.
func (v *view) overlap(a, b *hold) Anomaly {
	var until string
	switch a.why {
	case endValidUntil:
		until = "believed valid until " + secs(a.end)
	case endRelease:
		until = "released only at " + secs(a.end)
	case endReacquire:
		until = "held until it invoked acquire again at " + secs(a.end)
	case endDeath:
		until = "held until its process was killed by " + secs(a.end)
	default:
		until = "never released before the history ended at " + secs(a.end)
	}
	return Anomaly{
		Kind: KindOverlappingHolds,
		Ops:  v.indexes(a.ok, b.ok, a.release),
		Explanation: fmt.Sprintf("process %d acquired lock %q at %s%s while process %d still held it (acquired at %s%s, %s)",
			b.proc, v.locks[b.lock], secs(b.start), withToken(v.h.Token(int(b.ok))),
			a.proc, secs(a.start), tokenWord(v.h.Token(int(a.ok))), until),
	}
}

// lockValue names one lock value of one lock.
type lockValue struct {
	lock  int32
	value string
}

// lockValueOwners maps each lock value to the holds that wrote it, in start
// order.
func (v *view) lockValueOwners() map[lockValue][]int32 {
	owners := make(map[lockValue][]int32)
	for i := range v.holds {
		hd := &v.holds[i]
		if lv := v.h.LockValue(int(hd.ok)); lv != "" {
			k := lockValue{hd.lock, lv}
			owners[k] = append(owners[k], int32(i))
		}
	}
	return owners
}

// foreignRelease explains that the release ok at p deleted a lock value not
// its own.
func (v *view) foreignRelease(p int32, owners map[lockValue][]int32) Anomaly {
	ok := v.h.At(int(p))
	inv := v.pair[p]
	own := ""
	if inv >= 0 {
		own = v.h.LockValue(int(inv))
	}
	name := v.lockName(p)
	removed := ok.Value.Removed
	// The owner is the latest hold with that value that began before the
	// release completed.
	owner := int32(-1)
	hs := owners[lockValue{v.lockIDs[name], removed}]
	if j := sort.Search(len(hs), func(j int) bool { return v.before(v.holds[hs[j]].ok, p) > 0 }); j > 0 {
		owner = hs[j-1]
	}
	at := ok.Time
	if inv >= 0 {
		at = v.h.Time(int(inv))
	}
	var whose string
	ops := []int32{inv, p}
	if owner >= 0 {
		o := &v.holds[owner]
		ops = append(ops, o.ok)
		whose = fmt.Sprintf(" of process %d (acquired at %s%s)", o.proc, secs(o.start), tokenWord(v.h.Token(int(o.ok))))
	}
	return Anomaly{
		Kind: KindForeignRelease,
		Ops:  v.indexes(ops...),
		Explanation: fmt.Sprintf("process %d's release of lock %q at %s removed lock value %q%s, not its own %q",
			ok.Process, name, secs(at), removed, whose, own),
	}
}
