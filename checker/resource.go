package checker

import (
	"context"
	"fmt"

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
// the statistics of NoticeStats. Nemesis ops are ignored. The rules have
// one implementation, StreamResource: Check runs it over the history's
// ops.
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

// resourceCounts are the counts Resource's stats give: the writes accepted, rejected (live: those whose
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

// Check checks h as the type's comment describes, by running
// StreamResource over h's ops; when h holds lost-lock notices, it adds
// their statistics and wrote-after-notice notes, which pair each notice
// with any hold of its process and so are taken from the whole history.
// It returns unknown if ctx is done before it finishes.
func (c Resource) Check(ctx context.Context, h *history.Table) Result {
	r, notices := streamTable(ctx, h, c.Name(), NewStreamResource(c.Mode))
	if !notices || r.Error != "" {
		return r
	}
	v, err := sharedOrBuild(ctx, h)
	if err != nil {
		return cancelled(c.Name(), err)
	}
	for _, row := range v.noticeStats(&r) {
		if len(row.WritesAfter) > 0 {
			r.Notes = append(r.Notes, wroteAfterNotice(row))
		}
	}
	return r
}

// plural renders "1 update" or "2 updates".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
