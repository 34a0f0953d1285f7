package checker

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/history"
)

// Liveness checks that locks stay usable: it
// measures how often and how fast acquires succeed, and finds locks left
// stuck after their holder died.
//
// A lock is stuck when its last hold (the latest acquire ok of the lock,
// by start) was never released — no release ok of the holder followed it —
// and every acquire of the lock that another process invoked after the hold
// ended failed (completed fail or info, or never completed), at least
// MinAttempts of them and at least one of them refused by the service,
// over a window from the end of the hold to the completion of the last
// failed attempt that is at least MinWindow long,
// and for a lease at least as long as the lease itself (valid_until minus
// the acquire ok's time). When the hold ended depends on what it was:
//
//   - a lease (its acquire ok carries a valid_until) ended at valid_until,
//     whatever became of the holder;
//   - a session lock (no valid_until) ended only when the holder is known
//     to have lost it: its worker died (an info op of the holder with an
//     error starting "worker exited", or the ok completion of a nemesis
//     op whose fault kills (history.Kills) naming the holder as
//     "p<process>", after the acquire ok), or its release completed fail or info. A session holder that is
//     merely silent — paused, or still working when the history ended —
//     holds its lock rightly, and the others failing is no anomaly.
//
// A refusal is an acquire completed fail, but for a fail whose error
// begins with history.NotSent (the request never reached the service).
// Attempts whose outcome is unknown (completed info, or never completed),
// or that never reached the service, show nothing of the lock by
// themselves: with no refusal among the failed attempts, a service that
// stopped answering (a starved server or container, with no fault) is not
// a stuck lock. The holder's own later acquire attempts neither count nor
// clear it. So ordinary contention (a later acquire succeeds), a long
// client pause (the holder releases after it, or a session lock is rightly
// held through it) and a short history are not stuck. Each stuck lock is one "stuck-lock"
// anomaly naming the holder's acquire ok, the op that ended the hold (the
// death op, or the failed release's invocation and completion; none for a
// lease that simply expired) and the completions of the first and the last
// failed attempt.
//
// The verdict is invalid when a lock is stuck and valid otherwise. Stats:
// "acquire_attempts" (client acquire invocations), "acquire_ok",
// "acquire_success_rate" (acquire_ok / acquire_attempts, left out when
// there was no attempt), "acquire_latency_p50_ms" and
// "acquire_latency_p99_ms" (from invocation to ok, of the acquires that
// succeeded; left out when none did), "longest_no_acquire_s" (the longest
// time, from the first client op to the end of the history, in which no
// acquire of any lock succeeded) and "stuck_locks"; when the history holds
// lost-lock notices, also those of NoticeStats, the notice latency among
// them. Nemesis ops count only as death evidence. The rules have one
// implementation, StreamLiveness: Check runs it over the history's ops.
type Liveness struct {
	// MinAttempts is how many failed acquire attempts by other processes a
	// stuck lock needs; 0 means DefaultStuckAttempts.
	MinAttempts int
	// MinWindow is how long the failing window of a stuck lock must last at
	// least; 0 means DefaultStuckWindow.
	MinWindow time.Duration
}

// DefaultStuckAttempts is the default Liveness.MinAttempts: one failure may
// be contention, three in a row with nobody succeeding is a pattern.
const DefaultStuckAttempts = 3

// DefaultStuckWindow is the default Liveness.MinWindow. A killed worker's
// connections are closed by the kernel at once, so a lock server that frees
// a dead session's locks does so within milliseconds, and an acquire attempt
// lasts at most the workers' op timeout (a few seconds); 5 s of nothing but
// failures after the holder died is well beyond both.
const DefaultStuckWindow = 5 * time.Second

var _ Checker = Liveness{}

// Name returns "liveness".
func (Liveness) Name() string { return "liveness" }

// Check checks h as the type's comment describes, by running
// StreamLiveness over h's ops; when h holds lost-lock notices, it adds
// their statistics, which pair each notice with any hold of its process
// and so are taken from the whole history (NoticeStats). It returns
// unknown if ctx is done before it finishes.
func (c Liveness) Check(ctx context.Context, h *history.Table) Result {
	r, notices := streamTable(ctx, h, c.Name(), NewStreamLiveness(c))
	if !notices || r.Error != "" {
		return r
	}
	v, err := sharedOrBuild(ctx, h)
	if err != nil {
		return cancelled(c.Name(), err)
	}
	v.noticeStats(&r)
	return r
}

// percentile returns the p-th percentile (nearest rank) of sorted xs.
func percentile(xs []int64, p int) int64 {
	k := (len(xs)*p + 99) / 100
	return xs[max(0, min(len(xs)-1, k-1))]
}

// stuckHow says how a stuck lock's hold ended at ended: its lease (a
// valid_until), a release that failed, or its holder's death; proof is
// whether ops proved it, the first and last of them at firstProof and
// lastProof, released whether they are its failed release.
func stuckHow(lease, released, proof bool, firstProof, lastProof, ended int64) string {
	switch {
	case lease && released:
		return fmt.Sprintf("its release failed at %s, its lease ended at %s", secs(lastProof), secs(ended))
	case lease && proof:
		return fmt.Sprintf("it died at %s, its lease ended at %s", secs(firstProof), secs(ended))
	case lease:
		return "its lease ended at " + secs(ended)
	case released:
		return "its release failed at " + secs(ended)
	}
	return "it died at " + secs(ended)
}

// stuckText explains a lock stuck after the hold of proc begun at start
// ended (how), with fails attempts of others failing from first to last.
func stuckText(lock string, proc int, start int64, token *uint64, how string, fails int, first, last, ended int64) string {
	return fmt.Sprintf("lock %q stayed stuck: process %d acquired it at %s%s and never released it (%s), and all %d acquire attempts by other processes from %s to %s failed, %s after the hold ended",
		lock, proc, secs(start), tokenWord(token), how, fails, secs(first), secs(last), secs(last-ended))
}

// stuckUnknownText explains a lock stuck after proc died at died inside an
// acquire invoked at inv whose outcome is unknown.
func stuckUnknownText(lock string, proc int, died, inv int64, fails int, first, last int64) string {
	return fmt.Sprintf("lock %q stayed stuck: process %d died at %s inside an acquire invoked at %s whose outcome is unknown, and all %d acquire attempts by other processes from %s to %s failed, %s after its death",
		lock, proc, secs(died), secs(inv), fails, secs(first), secs(last), secs(last-died))
}
