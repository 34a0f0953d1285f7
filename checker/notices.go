package checker

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/locktest/locktest/history"
)

// HoldNotice is what a history says of one hold and of the lost-lock
// notices (history.Notice, f lost) its holder received: whether the
// holder was told that it lost the lock, how late, and whether it wrote
// after it was told. HoldNotices gives one for every hold that another
// process's hold overlapped and for every hold that was told.
type HoldNotice struct {
	// Process is the holder; Lock and Value the lock and the lease's lock
	// value.
	Process int    `json:"process"`
	Lock    string `json:"lock"`
	Value   string `json:"lock_value,omitempty"`
	// Acquire is the index of the hold's acquire ok, Start its time.
	Acquire int   `json:"acquire"`
	Start   int64 `json:"start"`
	// TakenOver is the index of the acquire ok of the first hold of
	// another process that began inside this one (the overlap mutual
	// exclusion reports), -1 when none did; TakenOverAt is its time.
	TakenOver   int   `json:"taken_over"`
	TakenOverAt int64 `json:"taken_over_at,omitempty"`
	// DualHolder is, for a hold that was taken over, the dual-holder
	// window in ns: from the takeover's acquire ok (the latest moment the
	// service may have granted the lock again) to the moment the holder
	// stopped believing it held the lock: the earlier of its first notice
	// and the end of its hold (its release or next acquire, its own
	// valid_until, or the end of the history). Both processes acted as
	// holders through it. It is 0 when the holder was told before the
	// takeover.
	DualHolder int64 `json:"dual_holder,omitempty"`
	// LostAt is when the hold was lost: the earlier of the holder's own
	// valid_until and the takeover's acquire ok; 0 when there is neither
	// (a session lock that nobody took over).
	LostAt int64 `json:"lost_at,omitempty"`
	// Notice is the index of the first notice about this hold, -1 when
	// the holder was never told; NoticeAt is its time and Reason the
	// reason it gave.
	Notice   int    `json:"notice"`
	NoticeAt int64  `json:"notice_at,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Latency is NoticeAt - LostAt in ns when the hold was both told and
	// lost: negative when the holder was told before it lost the lock.
	Latency    int64 `json:"latency,omitempty"`
	HasLatency bool  `json:"has_latency"`
	// WritesAfter are the indexes of the write invocations of this hold
	// made after the notice: writes of a holder that had been told.
	WritesAfter []int `json:"writes_after,omitempty"`
}

// Overlapped reports whether another process was granted the lock during
// the hold.
func (n HoldNotice) Overlapped() bool { return n.TakenOver >= 0 }

// Told reports whether the holder was told that it lost the lock.
func (n HoldNotice) Told() bool { return n.Notice >= 0 }

// HoldNotices returns, in the order of the holds' starts, a HoldNotice for
// every hold that another process's hold overlapped (it began while this
// one was held, as MutualExclusion reports) and for every hold that a
// notice was about. A notice is about the hold of its process whose lock
// value it names, the latest such hold that began before it; a notice
// that names no lock value is about the hold of its process (of the lock
// it names, if any) that was held when it came, from the acquire ok to
// the release or acquire invocation that ended it. A notice about no hold
// (news while nothing was held) is counted by NoticeStats only. It returns
// ctx's error if ctx ends first.
func HoldNotices(ctx context.Context, h *history.Table) ([]HoldNotice, error) {
	v, err := sharedOrBuild(ctx, h)
	if err != nil {
		return nil, err
	}
	rows, _ := v.holdNotices()
	return rows, nil
}

// sharedOrBuild returns the view of h shared by the checkers of one Run,
// or a view of its own.
func sharedOrBuild(ctx context.Context, h *history.Table) (*view, error) {
	if s, shared := ctx.Value(viewKey{}).(*sharedView); shared && s.h == h {
		s.once.Do(func() { s.v, s.err = buildView(ctx, h) })
		return s.v, s.err
	}
	return buildView(ctx, h)
}

// holdNotices is HoldNotices on v; it also returns how many notices were
// about no hold.
func (v *view) holdNotices() ([]HoldNotice, int) {
	if len(v.notices) == 0 && len(v.holds) == 0 {
		return nil, 0
	}
	h := v.h
	// The holds of each process, in start order.
	byProc := map[int][]int32{}
	for i := range v.holds {
		byProc[v.holds[i].proc] = append(byProc[v.holds[i].proc], int32(i))
	}
	first := map[int32]int32{} // hold → its first notice
	orphans := 0
	for _, n := range v.notices {
		hd := v.noticeHold(n, byProc[h.Process(int(n))])
		if hd < 0 {
			orphans++
			continue
		}
		if _, seen := first[hd]; !seen {
			first[hd] = n
		}
	}

	takers := v.takeovers()
	var rows []HoldNotice
	for i := range v.holds {
		hd := &v.holds[i]
		taker, overlapped := takers[int32(i)]
		notice, told := first[int32(i)]
		if !overlapped && !told {
			continue
		}
		row := HoldNotice{
			Process: hd.proc, Lock: v.locks[hd.lock], Value: h.LockValue(int(hd.ok)),
			Acquire: h.Index(int(hd.ok)), Start: hd.start, TakenOver: -1, Notice: -1,
		}
		if hd.validUntil != 0 {
			row.LostAt = hd.validUntil
		}
		if overlapped {
			row.TakenOver, row.TakenOverAt = h.Index(int(taker)), h.Time(int(taker))
			if row.LostAt == 0 || row.TakenOverAt < row.LostAt {
				row.LostAt = row.TakenOverAt
			}
			end := hd.end
			if told {
				end = min(end, h.Time(int(notice)))
			}
			row.DualHolder = max(0, end-row.TakenOverAt)
		}
		if told {
			row.Notice, row.NoticeAt, row.Reason = h.Index(int(notice)), h.Time(int(notice)), h.Error(int(notice))
			if row.LostAt != 0 {
				row.Latency, row.HasLatency = row.NoticeAt-row.LostAt, true
			}
			for _, w := range v.writes {
				if w.hold == int32(i) && h.Time(int(w.inv)) > row.NoticeAt {
					row.WritesAfter = append(row.WritesAfter, h.Index(int(w.inv)))
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, orphans
}

// noticeHold returns the hold (an index into v.holds) the notice n is
// about, among its process's holds procHolds, or -1; see HoldNotices.
func (v *view) noticeHold(n int32, procHolds []int32) int32 {
	h := v.h
	t := h.Time(int(n))
	lock, value := h.Lock(int(n)), h.LockValue(int(n))
	// The holds that began by t.
	k := sort.Search(len(procHolds), func(j int) bool { return v.holds[procHolds[j]].start > t })
	for j := k - 1; j >= 0; j-- {
		hd := &v.holds[procHolds[j]]
		if lock != "" && v.locks[hd.lock] != lock {
			continue
		}
		if value != "" {
			if h.LockValue(int(hd.ok)) == value {
				return procHolds[j]
			}
			continue
		}
		if hd.closer < 0 || h.Time(int(hd.closer)) >= t {
			return procHolds[j]
		}
		return -1 // the latest hold of that lock had ended
	}
	return -1
}

// takeovers returns, for every hold that another process's hold began
// inside, the acquire ok of the first such hold.
func (v *view) takeovers() map[int32]int32 {
	out := map[int32]int32{}
	for _, idx := range v.holdsByLock() {
		for a, ai := range idx {
			ha := &v.holds[ai]
			for _, bi := range idx[a+1:] {
				hb := &v.holds[bi]
				if hb.start >= ha.end && ha.why != endHistory {
					break
				}
				if hb.proc != ha.proc && v.overlaps(ha, hb) {
					out[ai] = hb.ok
					break
				}
			}
		}
	}
	return out
}

// NoticeStats returns the statistics of the lost-lock notices of rows
// (from HoldNotices), notices being the history's number of notices and
// orphans those about no hold: "notices", "notices_about_no_hold",
// "holds_overlapped", "holds_overlapped_told", "holds_told",
// "writes_after_notice" and, over the holds both told and lost, the
// notice latency "notice_latency_p50_s", "notice_latency_p99_s" and
// "notice_latency_max_s" (negative: told before the loss) and, over the
// holds taken over, the dual-holder window "dual_holder_p50_s",
// "dual_holder_p99_s" and "dual_holder_max_s" (HoldNotice.DualHolder). It
// returns nil for a history without notices, whose client may tell
// nothing.
func NoticeStats(rows []HoldNotice, notices, orphans int) map[string]float64 {
	if notices == 0 {
		return nil
	}
	st := map[string]float64{"notices": float64(notices), "notices_about_no_hold": float64(orphans)}
	var lat, dual []int64
	overlapped, overlappedTold, told, writes := 0, 0, 0, 0
	for _, r := range rows {
		if r.Overlapped() {
			overlapped++
			dual = append(dual, r.DualHolder)
			if r.Told() {
				overlappedTold++
			}
		}
		if r.Told() {
			told++
			writes += len(r.WritesAfter)
		}
		if r.HasLatency {
			lat = append(lat, r.Latency)
		}
	}
	st["holds_overlapped"] = float64(overlapped)
	st["holds_overlapped_told"] = float64(overlappedTold)
	st["holds_told"] = float64(told)
	st["writes_after_notice"] = float64(writes)
	if len(lat) > 0 {
		slices.Sort(lat)
		st["notice_latency_p50_s"] = float64(percentile(lat, 50)) / 1e9
		st["notice_latency_p99_s"] = float64(percentile(lat, 99)) / 1e9
		st["notice_latency_max_s"] = float64(lat[len(lat)-1]) / 1e9
	}
	if len(dual) > 0 {
		slices.Sort(dual)
		st["dual_holder_p50_s"] = float64(percentile(dual, 50)) / 1e9
		st["dual_holder_p99_s"] = float64(percentile(dual, 99)) / 1e9
		st["dual_holder_max_s"] = float64(dual[len(dual)-1]) / 1e9
	}
	return st
}

// noticeStats adds the notice statistics of v to r's.
func (v *view) noticeStats(r *Result) []HoldNotice {
	if len(v.notices) == 0 {
		return nil
	}
	rows, orphans := v.holdNotices()
	for k, x := range NoticeStats(rows, len(v.notices), orphans) {
		r.Stats[k] = x
	}
	return rows
}

// wroteAfterNotice explains that the holder of row wrote after it was told
// that its lease was lost.
func wroteAfterNotice(row HoldNotice) Anomaly {
	ops := append([]int{row.Acquire, row.Notice}, row.WritesAfter...)
	return Anomaly{
		Kind: KindWroteAfterNotice,
		Ops:  ops,
		Explanation: fmt.Sprintf("process %d was told at %s that its lease on lock %q (acquired at %s) was lost (%s), and wrote after that %d time(s), first at op %d: its code did not act on the notice",
			row.Process, secs(row.NoticeAt), row.Lock, secs(row.Start), row.Reason, len(row.WritesAfter), row.WritesAfter[0]),
	}
}
