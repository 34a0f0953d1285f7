package checker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
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
// them. Nemesis ops count only as death evidence. The check takes
// O(n log n) time.
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

// Check checks h as the type's comment describes. It returns unknown if
// ctx is done before it finishes.
func (c Liveness) Check(ctx context.Context, h *history.Table) Result {
	v, r, ok := begin(ctx, h, c.Name())
	if !ok {
		return r
	}
	minAttempts := c.MinAttempts
	if minAttempts <= 0 {
		minAttempts = DefaultStuckAttempts
	}
	minWindow := int64(c.MinWindow)
	if minWindow <= 0 {
		minWindow = int64(DefaultStuckWindow)
	}

	// The last hold of each lock, and when it ended (-1: not known to).
	last := make([]int32, len(v.locks))
	for i := range last {
		last[i] = -1
	}
	for i := range v.holds {
		last[v.holds[i].lock] = int32(i)
	}
	type cand struct {
		hold int32 // the last hold, or -1 for an acquire of unknown outcome
		// unknown is that acquire's invocation: its process died in it
		// (between SETNX and EXPIRE, say), so it may hold the lock.
		unknown int32
		proc    int
		ended   int64   // when the hold ended
		proof   []int32 // the ops that ended it
		fails   int
		// refusals are the failed attempts the service answered with a
		// refusal (fail, but not "not sent"): at least one must show the
		// lock held.
		refusals int
		first    int32 // completion (or invocation) of the first failed attempt
		lastF    int32 // of the last failed attempt
		broken   bool  // an attempt after ended succeeded
	}
	cands := make([]*cand, len(v.locks))
	deaths := deathOps(h) // process → ops that show it died
	attempts, firstTime := 0, int64(-1)
	for step := range h.Len() {
		if err := stopped(ctx, step); err != nil {
			return cancelled(c.Name(), err)
		}
		if h.Process(step) < 0 {
			continue
		}
		if t := h.Time(step); firstTime < 0 || t < firstTime {
			firstTime = t
		}
		if h.Type(step) == history.Invoke && h.F(step) == history.Acquire {
			attempts++
		}
	}
	for _, ds := range deaths {
		slices.SortFunc(ds, v.before)
	}
	for l, hi := range last {
		if hi < 0 {
			continue
		}
		hd := &v.holds[hi]
		cd := &cand{hold: hi, unknown: -1, proc: hd.proc, ended: -1, first: -1, lastF: -1}
		if hd.release >= 0 {
			done := v.pair[hd.release]
			switch {
			case done >= 0 && v.h.Type(int(done)) == history.OK:
				continue // released
			case done >= 0:
				cd.ended, cd.proof = v.h.Time(int(done)), []int32{hd.release, done}
			default:
				cd.ended, cd.proof = v.h.Time(int(hd.release)), []int32{hd.release}
			}
		}
		if cd.ended < 0 {
			if d := v.death(hd, deaths[hd.proc]); d >= 0 {
				cd.ended, cd.proof = v.h.Time(int(d)), []int32{d}
			}
		}
		if hd.validUntil != 0 {
			cd.ended = hd.validUntil
		}
		if cd.ended < 0 {
			continue // a silent session holder: rightly held
		}
		cands[l] = cd
	}
	// An acquire of unknown outcome whose process then died, invoked after
	// the lock's last hold ended, or invoked before and open when a release
	// ok of that hold completed, before the death, may have left the lock
	// taken: the latest such acquire of each lock is a candidate too, ended
	// at the death (it replaces the last hold's candidate: if it took
	// effect, it came after that hold ended, since the lock was held until
	// then).
	for step := range h.Len() {
		if h.Process(step) < 0 || h.Type(step) != history.Invoke || h.F(step) != history.Acquire {
			continue
		}
		o := h.At(step)
		if done := v.pair[step]; done >= 0 && h.Type(int(done)) != history.Info {
			continue
		}
		lk, ok := v.lockIDs[o.Value.Lock]
		if !ok {
			continue
		}
		var died int32 = -1
		for _, d := range deaths[o.Process] {
			if h.Time(int(d)) >= o.Time {
				died = d
				break
			}
		}
		if died < 0 {
			continue
		}
		// The lock's last hold must have ended before this acquire began,
		// or have been released (a release ok) before the death: else a
		// live holder, not the dead one, may be what keeps others out.
		if hi := last[lk]; hi >= 0 && !v.freedBefore(&v.holds[hi], o.Time, h.Time(int(died))) {
			continue
		}
		if cd := cands[lk]; cd != nil && cd.unknown >= 0 && h.Time(int(cd.unknown)) > o.Time {
			continue
		}
		cands[lk] = &cand{hold: -1, unknown: int32(step), proc: o.Process, ended: h.Time(int(died)),
			proof: []int32{died}, first: -1, lastF: -1}
	}
	// The acquire attempts of other processes after each candidate's end.
	for step := range h.Len() {
		if err := stopped(ctx, step); err != nil {
			return cancelled(c.Name(), err)
		}
		if h.Process(step) < 0 || h.Type(step) != history.Invoke || h.F(step) != history.Acquire {
			continue
		}
		o := h.At(step)
		lk, ok := v.lockIDs[o.Value.Lock]
		if !ok {
			continue
		}
		cd := cands[lk]
		if cd == nil || o.Process == cd.proc || o.Time < cd.ended {
			continue
		}
		done := v.pair[step]
		if done >= 0 && h.Type(int(done)) == history.OK {
			cd.broken = true
			continue
		}
		end := int32(step)
		if done >= 0 {
			end = done
		}
		// A refusal by the service shows the lock held; an attempt whose
		// outcome is unknown (a timeout, open at the end) or that never
		// reached the service does not.
		if done >= 0 && h.Type(int(done)) == history.Fail && !strings.HasPrefix(h.Error(int(done)), history.NotSent) {
			cd.refusals++
		}
		cd.fails++
		if cd.first < 0 || v.before(end, cd.first) < 0 {
			cd.first = end
		}
		if cd.lastF < 0 || v.before(end, cd.lastF) > 0 {
			cd.lastF = end
		}
	}
	stuck := 0
	for l, cd := range cands {
		if cd == nil || cd.broken || cd.fails < minAttempts || cd.refusals == 0 {
			continue
		}
		window := h.Time(int(cd.lastF)) - cd.ended
		need := minWindow
		if cd.hold >= 0 {
			if hd := &v.holds[cd.hold]; hd.validUntil != 0 {
				need = max(need, hd.validUntil-hd.start)
			}
		}
		if window < need {
			continue
		}
		stuck++
		if cd.hold < 0 {
			r.Anomalies = append(r.Anomalies, v.stuckUnknown(int32(l), cd.unknown, cd.ended, cd.proof, cd.fails, cd.first, cd.lastF))
			continue
		}
		r.Anomalies = append(r.Anomalies, v.stuck(int32(l), &v.holds[cd.hold], cd.ended, cd.proof, cd.fails, cd.first, cd.lastF))
	}

	r.Stats["acquire_attempts"] = float64(attempts)
	r.Stats["acquire_ok"] = float64(len(v.holds))
	if attempts > 0 {
		r.Stats["acquire_success_rate"] = float64(len(v.holds)) / float64(attempts)
	}
	if len(v.holds) > 0 {
		lat := make([]int64, 0, len(v.holds))
		for i := range v.holds {
			if hd := &v.holds[i]; hd.inv >= 0 {
				lat = append(lat, hd.start-h.Time(int(hd.inv)))
			}
		}
		slices.Sort(lat)
		if len(lat) > 0 {
			r.Stats["acquire_latency_p50_ms"] = float64(percentile(lat, 50)) / 1e6
			r.Stats["acquire_latency_p99_ms"] = float64(percentile(lat, 99)) / 1e6
		}
	}
	faults := faultWindows(h, v.maxTime)
	if len(faults) > 0 {
		r.Stats["fault_windows"] = float64(len(faults))
		r.Stats["faults_effective"] = float64(effective(v, faults))
	}
	if firstTime >= 0 {
		// Holds are in start order: the gaps between successive grants,
		// and before the first and after the last.
		prev, longest := firstTime, int64(0)
		for i := range v.holds {
			longest = max(longest, v.holds[i].start-prev)
			prev = max(prev, v.holds[i].start)
		}
		longest = max(longest, v.maxTime-prev)
		r.Stats["longest_no_acquire_s"] = float64(longest) / 1e9
		if len(faults) > 0 {
			r.Stats["longest_no_acquire_outside_faults_s"] = float64(longestOutside(v, firstTime, faults)) / 1e9
			worst, sum, n, never := recovery(v, faults)
			if n > 0 {
				r.Stats["recovery_after_heal_max_s"] = float64(worst) / 1e9
				r.Stats["recovery_after_heal_mean_s"] = float64(sum) / float64(n) / 1e9
			}
			r.Stats["heals_without_recovery"] = float64(never)
		}
	}
	r.Stats["stuck_locks"] = float64(stuck)
	v.noticeStats(&r)
	return settle(r)
}

// percentile returns the p-th percentile (nearest rank) of sorted xs.
func percentile(xs []int64, p int) int64 {
	k := (len(xs)*p + 99) / 100
	return xs[max(0, min(len(xs)-1, k-1))]
}

// death returns the first of ds (ops showing the holder of hd died, in
// time order) at or after hd's acquire ok, or -1.
func (v *view) death(hd *hold, ds []int32) int32 {
	j := sort.Search(len(ds), func(j int) bool { return v.h.Time(int(ds[j])) >= hd.start })
	if j < len(ds) {
		return ds[j]
	}
	return -1
}

// freedBefore reports whether hold hd certainly left its lock free for an
// acquire invoked at inv whose process died at died: the hold ended before
// inv (and began before it), or a release ok of the hold completed before
// died.
func (v *view) freedBefore(hd *hold, inv, died int64) bool {
	if hd.why != endHistory && hd.start <= inv && hd.end <= inv {
		return true
	}
	if hd.release < 0 {
		return false
	}
	done := v.pair[hd.release]
	return done >= 0 && v.h.Type(int(done)) == history.OK && v.h.Time(int(done)) <= died
}

// stuck explains that lock l stayed unacquirable after hold hd ended.
func (v *view) stuck(l int32, hd *hold, ended int64, proof []int32, fails int, first, last int32) Anomaly {
	released := len(proof) > 0 && v.h.F(int(proof[0])) == history.Release
	var firstProof, lastProof int64
	if len(proof) > 0 {
		firstProof, lastProof = v.h.Time(int(proof[0])), v.h.Time(int(proof[len(proof)-1]))
	}
	ops := append([]int32{hd.ok, first, last}, proof...)
	return Anomaly{
		Kind: KindStuckLock,
		Ops:  v.indexes(ops...),
		Explanation: stuckText(v.locks[l], hd.proc, hd.start, v.h.Token(int(hd.ok)),
			stuckHow(hd.validUntil != 0, released, len(proof) > 0, firstProof, lastProof, ended),
			fails, v.h.Time(int(first)), v.h.Time(int(last)), ended),
	}
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

// stuckUnknown explains a lock stuck after an acquire of unknown outcome
// (invocation inv) whose process died.
func (v *view) stuckUnknown(l, inv int32, died int64, proof []int32, fails int, first, last int32) Anomaly {
	ops := append([]int32{inv, first, last}, proof...)
	if done := v.pair[inv]; done >= 0 {
		ops = append(ops, done)
	}
	return Anomaly{
		Kind:        KindStuckLock,
		Ops:         v.indexes(ops...),
		Explanation: stuckUnknownText(v.locks[l], v.h.Process(int(inv)), died, v.h.Time(int(inv)), fails, v.h.Time(int(first)), v.h.Time(int(last))),
	}
}

// span is a time interval [from, to].
type span struct{ from, to int64 }

// faultWindows returns the intervals during which a fault was in force: from
// the invocation of an injection to the completion of the next heal (the
// schedule runs one fault at a time), or to end when no heal came. They are
// in time order and do not overlap.
func faultWindows(h *history.Table, end int64) []span {
	var out []span
	open := int64(-1)
	for i := range h.Len() {
		if h.Process(i) >= 0 {
			continue
		}
		o := h.At(i)
		heal := history.IsHeal(o.F) // every other nemesis op begins a fault
		switch {
		case !heal && o.Type == history.Invoke && open < 0:
			open = o.Time
		case heal && o.Type != history.Invoke && open >= 0:
			out = append(out, span{open, max(open, o.Time)})
			open = -1
		}
	}
	if open >= 0 {
		out = append(out, span{open, max(open, end)})
	}
	return out
}

// effective counts the fault windows that overlap a critical section as its
// holder believed it: an injection that had a chance to matter, after
// Antithesis's "sometimes" assertions. A fault in force while no process
// held a lock could not have broken mutual exclusion, so a run whose every
// fault fell between critical sections tested nothing of them.
func effective(v *view, faults []span) int {
	// Holds are in start order; reach[j] is the latest end of holds[0..j].
	reach := make([]int64, len(v.holds))
	for j, hd := range v.holds {
		reach[j] = hd.end
		if j > 0 {
			reach[j] = max(reach[j], reach[j-1])
		}
	}
	n := 0
	for _, f := range faults {
		// The last hold that began before the window closed.
		j := sort.Search(len(v.holds), func(j int) bool { return v.holds[j].start > f.to }) - 1
		if j >= 0 && reach[j] >= f.from {
			n++
		}
	}
	return n
}

// longestOutside returns the longest stretch of time from start to the end
// of the history with no acquire ok and no fault in force.
func longestOutside(v *view, start int64, faults []span) int64 {
	// The quiet spans: the complement of the fault windows.
	var quiet []span
	prev := start
	for _, f := range faults {
		if f.from > prev {
			quiet = append(quiet, span{prev, f.from})
		}
		prev = max(prev, f.to)
	}
	if v.maxTime > prev {
		quiet = append(quiet, span{prev, v.maxTime})
	}
	// Cut each quiet span at the acquire oks in it (holds are in start
	// order) and keep the longest piece.
	longest := int64(0)
	j := 0
	for _, q := range quiet {
		for j < len(v.holds) && v.holds[j].start < q.from {
			j++
		}
		last := q.from
		for k := j; k < len(v.holds) && v.holds[k].start <= q.to; k++ {
			longest = max(longest, v.holds[k].start-last)
			last = v.holds[k].start
		}
		longest = max(longest, q.to-last)
	}
	return longest
}

// recovery measures, for each fault window, the time from its heal to the
// first acquire ok after it: the worst and the sum over the n heals that
// were followed by one, and how many were never followed by one.
func recovery(v *view, faults []span) (worst, sum int64, n, never int) {
	for _, f := range faults {
		j := sort.Search(len(v.holds), func(j int) bool { return v.holds[j].start >= f.to })
		if j == len(v.holds) {
			never++
			continue
		}
		d := v.holds[j].start - f.to
		worst, sum, n = max(worst, d), sum+d, n+1
	}
	return worst, sum, n, never
}
