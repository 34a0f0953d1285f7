package matrix

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// safetyCheckers are the checkers whose verdict must be known for a run
// without violations to count as showing that mutual exclusion held. The
// linearizability checker is left out: it may time out on a long history
// of session locks, and the mutual-exclusion checker decides the same
// question from the holds.
var safetyCheckers = []string{"mutual-exclusion", "resource", "fencing-tokens"}

// Safety is what one stored run says about mutual exclusion under its
// faults.
type Safety struct {
	// Conclusive is true when the run shows either a violation or, with its
	// faults applied and every safety checker decided, none.
	Conclusive bool
	// Violated is true when the run holds an anomaly of checker.SafetyKinds.
	Violated bool
	// Kinds counts the violations by anomaly kind.
	Kinds map[string]int
	// Faults is how many faults the nemesis applied; Effective how many of
	// their windows overlapped a critical section (a fault in force while
	// no one held the lock could not break it), -1 when the results do not
	// say (runs stored before it was counted).
	Faults, Effective int
	// NA is true when the fault does not apply to the backend at all (its
	// reason says "not applicable"), as opposed to a machine that could not
	// make it.
	NA bool
	// Reason says why the run is inconclusive or not applicable; for a
	// conclusive run it is empty.
	Reason string
	// SameHolderTokens counts the re-grants of a token that continued one
	// hold (the fencing-tokens checker's continued_holds): a fencing token
	// repeated to one holder, not two holders.
	SameHolderTokens int
	// FirstViolation is the time, in seconds from the run's start, of the
	// earliest op of a safety anomaly (-1 without one, or when the history
	// was not read); Workload the time of the run's last recorded op (0
	// without a history). They give the run's time to failure, or the
	// time a clean run lasted (SurvivalTimes).
	FirstViolation, Workload float64
	// FirstOf is, for each kind of anomaly the run holds (of
	// checker.AnomalyKinds, the stuck lock included), the time in seconds
	// from the workload's first op to the first anomaly of that kind: when
	// the streaming checkers, reading the history in its order as the
	// run's violation watch does, confirmed it (checker.FirstConfirmed),
	// and for the kinds they do not confirm, the earliest op of its
	// anomalies. Nil without a history or an anomaly. Unlike
	// FirstViolation, it leaves out the cluster's start, which a loaded
	// machine stretches.
	FirstOf map[string]float64
}

// SurvivalTimes sets s's time to its first violation, to the first
// anomaly of each kind, and its workload's length from the run's results
// and history h. The first violation is the earliest op of any anomaly of
// checker.SafetyKinds.
func (s Safety) SurvivalTimes(r runstore.Results, h history.History) Safety {
	s.FirstViolation, s.Workload = reports.TimeToFailure(r, h, func(kind string) bool { return slices.Contains(checker.SafetyKinds, kind) })
	if h == nil || len(h) == 0 {
		return s
	}
	var confirmed map[string]int64
	for _, c := range r.Checkers {
		for _, a := range c.Anomalies {
			if _, done := s.FirstOf[a.Kind]; done || !checker.IsAnomalyKind(a.Kind) {
				continue
			}
			if confirmed == nil {
				confirmed = checker.FirstConfirmed(h, r.Run.Mode)
			}
			t, ok := float64(confirmed[a.Kind])/1e9, false
			if _, ok = confirmed[a.Kind]; !ok {
				t, _ = reports.TimeToFailure(r, h, func(kind string) bool { return kind == a.Kind })
				ok = t >= 0
			}
			if ok {
				if s.FirstOf == nil {
					s.FirstOf = map[string]float64{}
				}
				s.FirstOf[a.Kind] = max(t-float64(h[0].Time)/1e9, 0)
			}
		}
	}
	return s
}

// ClassifySafety reads a run's results as the matrix's mutual-exclusion
// cells do. A violation is conclusive whatever else went wrong; a run
// without violations is conclusive only when it has no problems (run
// errors, unavailable faults, faults never applied, no acquire) and every
// safety checker gave a verdict. It never calls a run that tested nothing
// safe, nor a run whose faults were all applied while no client held the
// lock (none was effective).
//
// A re-grant of the same token to a process whose release had an unknown
// outcome, with no other grant in between (a session that acquired again
// the key it still had), is one hold going on: the fencing-tokens checker
// leaves it out of its anomalies and counts it in its "continued_holds"
// stat, which Safety.SameHolderTokens carries. Every duplicate-token the
// checker does report is a violation, also when one process had both
// grants (a late release ended the hold between them).
func ClassifySafety(r runstore.Results) Safety {
	s := Safety{Kinds: map[string]int{}, Faults: int(r.Stats["faults_injected"]), Effective: r.EffectiveFaults()}
	for _, c := range r.Checkers {
		if c.Checker == "fencing-tokens" {
			s.SameHolderTokens += int(c.Stats["continued_holds"])
		}
		for _, a := range c.Anomalies {
			if slices.Contains(checker.SafetyKinds, a.Kind) {
				s.Kinds[a.Kind]++
			}
		}
	}
	if len(s.Kinds) > 0 {
		s.Violated, s.Conclusive = true, true
		return s
	}
	if len(r.Problems) > 0 {
		// A fault that does not apply to the backend makes the rest of the
		// problems (no fault applied) its consequences: say only why.
		var na []string
		for _, p := range r.Problems {
			if strings.Contains(p, "not applicable") {
				na = append(na, p)
			}
		}
		s.Reason, s.NA = strings.Join(r.Problems, "; "), len(na) > 0
		if s.NA {
			s.Reason = strings.Join(na, "; ")
		}
		return s
	}
	for _, name := range safetyCheckers {
		found := false
		for _, c := range r.Checkers {
			if c.Checker != name {
				continue
			}
			found = true
			if c.Valid != checker.Valid {
				s.Reason = fmt.Sprintf("the %s checker gave %s", name, reports.VerdictWord(c.Valid))
				if c.Error != "" {
					s.Reason += ": " + c.Error
				}
				return s
			}
		}
		if !found {
			s.Reason = "the results have no " + name + " checker"
			return s
		}
	}
	if why := r.Ineffective(); why != "" {
		s.Reason = why
		return s
	}
	s.Conclusive = true
	return s
}

// Latency returns the 50th and 99th percentile, in milliseconds, of the
// time from each acquire's invocation to its ok, and how many acquires
// succeeded; with none the percentiles are NaN.
func Latency(h history.History) (p50, p99 float64, n int) {
	pair := h.Pair()
	var lat []float64
	for i, o := range h {
		if o.F != history.Acquire || o.Type != history.OK || o.IsNemesis() || pair[i] < 0 {
			continue
		}
		lat = append(lat, float64(o.Time-h[pair[i]].Time)/1e6)
	}
	return stats.Percentile(lat, 50), stats.Percentile(lat, 99), len(lat)
}

// Throughput returns the critical sections (acquire oks) per second over
// the workload's span: from the first client op to the last one. It is 0
// when the history has fewer than two client ops.
func Throughput(h history.History) float64 {
	first, last, n := int64(math.MaxInt64), int64(math.MinInt64), 0
	for _, o := range h {
		if o.IsNemesis() {
			continue
		}
		first, last = min(first, o.Time), max(last, o.Time)
		if o.F == history.Acquire && o.Type == history.OK {
			n++
		}
	}
	if last <= first {
		return 0
	}
	return float64(n) / (float64(last-first) / 1e9)
}

// Tokens counts the acquire oks that carry a fencing token.
func Tokens(h history.History) int {
	n := 0
	for _, o := range h {
		if o.F == history.Acquire && o.Type == history.OK && !o.IsNemesis() && o.Value.Token != nil {
			n++
		}
	}
	return n
}

// Recovery is what followed one kill of a lock holder.
type Recovery struct {
	// Kill is the history index of the kill-client ok.
	Kill    int
	Process int
	Lock    string
	// Died is when the holder was dead for sure: the kill's ok, in ns.
	Died int64
	// After is the time from Died to the next acquire ok of Lock by
	// another process; negative when there was none before the history
	// ended.
	After time.Duration
	// Observed is the time from Died to the end of the history.
	Observed time.Duration
}

// Recovered reports whether another process got the lock after the death.
func (r Recovery) Recovered() bool { return r.After >= 0 }

// Recoveries measures deadlock freedom after a holder's death: for every
// kill-client ok whose target ("p<N>") held a lock when it was killed (its
// latest acquire of that lock completed ok and it had not invoked a
// release of it since), the time from the kill's ok until another process's
// next acquire ok of the same lock. Kills of processes that held no lock
// are left out.
func Recoveries(h history.History) []Recovery {
	var out []Recovery
	end := int64(0)
	for _, o := range h {
		end = max(end, o.Time)
	}
	// held[p] is the lock process p holds, as far as its ops say.
	held := map[int]string{}
	var pending []*Recovery
	for i, o := range h {
		if o.IsNemesis() {
			if !history.Kills(o) || len(o.Value.Targets) != 1 {
				continue
			}
			var p int
			if _, err := fmt.Sscanf(o.Value.Targets[0], "p%d", &p); err != nil {
				continue
			}
			lock, ok := held[p]
			if !ok {
				continue
			}
			delete(held, p)
			out = append(out, Recovery{Kill: i, Process: p, Lock: lock, Died: o.Time, After: -1, Observed: time.Duration(end - o.Time)})
			pending = append(pending, &out[len(out)-1])
			continue
		}
		switch {
		case o.F == history.Acquire && o.Type == history.OK:
			held[o.Process] = o.Value.Lock
			for _, r := range pending {
				if r.After < 0 && r.Lock == o.Value.Lock && r.Process != o.Process && o.Time >= r.Died {
					r.After = time.Duration(o.Time - r.Died)
				}
			}
		case o.F == history.Release && o.Type == history.Invoke:
			delete(held, o.Process)
		}
	}
	return out
}

// StuckLocks counts the stuck-lock anomalies of a run's liveness checker.
func StuckLocks(r runstore.Results) int {
	n := 0
	for _, c := range r.Checkers {
		for _, a := range c.Anomalies {
			if a.Kind == checker.KindStuckLock {
				n++
			}
		}
	}
	return n
}

// Availability compares acquires while a fault was in force with the rest
// of the workload.
type Availability struct {
	// Windows is how many fault windows the history has.
	Windows int
	// During* count client acquire invocations inside the windows, those
	// of them that completed ok, and the windows' total length in seconds.
	DuringAttempts, DuringOK int
	DuringSeconds            float64
	// Outside* are the same for the rest of the workload's span.
	OutsideAttempts, OutsideOK int
	OutsideSeconds             float64
}

// SuccessDuring is the fraction of acquires invoked during the fault that
// succeeded, NaN without any.
func (a Availability) SuccessDuring() float64 { return ratio(a.DuringOK, a.DuringAttempts) }

// SuccessOutside is the same for acquires invoked outside the fault.
func (a Availability) SuccessOutside() float64 { return ratio(a.OutsideOK, a.OutsideAttempts) }

// RateDuring is the critical sections per second during the fault.
func (a Availability) RateDuring() float64 { return float64(a.DuringOK) / a.DuringSeconds }

// RateOutside is the critical sections per second outside it.
func (a Availability) RateOutside() float64 { return float64(a.OutsideOK) / a.OutsideSeconds }

func ratio(k, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return float64(k) / float64(n)
}

// MeasureAvailability measures the workload of h while a node was lost:
// the windows run from each ok of the nemesis op fault (e.g. "kill-node")
// to the invocation of the next op heal (e.g. "restart-node"), or to the
// end of the history. An acquire belongs to the window its invocation falls
// in and counts as successful when it completed ok. The span outside the
// windows runs from the first to the last client op.
func MeasureAvailability(h history.History, fault, heal string) Availability {
	type span struct{ from, to int64 }
	var wins []span
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	open := int64(-1)
	for _, o := range h {
		if !o.IsNemesis() {
			first, last = min(first, o.Time), max(last, o.Time)
			continue
		}
		switch {
		case o.F == fault && o.Type == history.OK && open < 0:
			open = o.Time
		case o.F == heal && o.Type == history.Invoke && open >= 0:
			wins = append(wins, span{open, o.Time})
			open = -1
		}
	}
	var a Availability
	if last <= first {
		return a
	}
	if open >= 0 {
		wins = append(wins, span{open, max(open, last)})
	}
	a.Windows = len(wins)
	in := func(t int64) bool {
		for _, w := range wins {
			if t >= w.from && t < w.to {
				return true
			}
		}
		return false
	}
	for _, w := range wins {
		a.DuringSeconds += float64(min(w.to, last)-max(w.from, first)) / 1e9
	}
	a.OutsideSeconds = float64(last-first)/1e9 - a.DuringSeconds
	pair := h.Pair()
	for i, o := range h {
		if o.IsNemesis() || o.F != history.Acquire || o.Type != history.Invoke {
			continue
		}
		ok := pair[i] >= 0 && h[pair[i]].Type == history.OK
		if in(o.Time) {
			a.DuringAttempts++
			if ok {
				a.DuringOK++
			}
		} else {
			a.OutsideAttempts++
			if ok {
				a.OutsideOK++
			}
		}
	}
	return a
}

// RestartExposure is what the kills of one kill/restart run gave a
// violation a chance at.
type RestartExposure struct {
	// Restarts counts the kills of a node that completed ok and were
	// followed by the node's restart (a restart-node ok).
	Restarts int
	// Across counts those of them that a holder lived through: a client
	// was granted the lock before the kill completed and still held it
	// (it had not invoked its release, its lease had not run out, it had
	// not died) when the restart completed.
	Across int
	// Holds are the lengths of the run's holds that ended (from an
	// acquire ok to the holder's release invocation, lease end or death),
	// ascending.
	Holds []time.Duration
}

// HoldsText renders the holds' lengths as "holds of 2.0–3.1 s (median
// 2.5 s)", or "" without a hold.
func HoldsText(holds []time.Duration) string {
	if len(holds) == 0 {
		return ""
	}
	s := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }
	med := holds[len(holds)/2]
	if len(holds)%2 == 0 {
		med = (holds[len(holds)/2-1] + med) / 2
	}
	return fmt.Sprintf("holds of %s–%s s (median %s s)", s(holds[0]), s(holds[len(holds)-1]), s(med))
}

// restartOp is the f of the op that heals the faults that kill a node.
const restartOp = "restart-node"

// MeasureRestarts measures, for a kill/restart run, which restarts of the
// killed node came while a holder still held the lock it had been granted
// before the kill. A crash is the ok of a node fault that restart-node
// heals (kill-node, kill-on-grant, power-loss); its restart is the first restart-node ok
// after it. A hold runs from an acquire ok to the first of the holder's
// next release or acquire invocation, its valid_until (when set) and its
// death (a "worker exited" info of it, or the ok of a fault that kills it);
// one still open at the end of the history ends there and is not counted
// among Holds.
func MeasureRestarts(h history.History) RestartExposure {
	ops := slices.Clone(h)
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	type hold struct{ start, end int64 }
	var holds []hold
	open := map[int]int{} // process → index in holds of its open hold
	end := func(p int, at int64) {
		if i, ok := open[p]; ok {
			holds[i].end = min(holds[i].end, at)
			delete(open, p)
		}
	}
	type crash struct{ killed, back int64 }
	var crashes []crash
	for _, o := range ops {
		if o.IsNemesis() {
			switch {
			case o.Type == history.OK && o.F == restartOp:
				for i := range crashes {
					if crashes[i].back == 0 {
						crashes[i].back = o.Time
					}
				}
			case o.Type == history.OK:
				if k, ok := history.FaultOfOp(o.F); ok && k.Family == history.FamilyNode && k.Heal == restartOp {
					crashes = append(crashes, crash{killed: o.Time})
				}
				if history.Kills(o) {
					for _, t := range o.Value.Targets {
						var p int
						if _, err := fmt.Sscanf(t, "p%d", &p); err == nil {
							end(p, o.Time)
						}
					}
				}
			}
			continue
		}
		switch {
		case o.Type == history.Invoke && (o.F == history.Release || o.F == history.Acquire):
			end(o.Process, o.Time)
		case o.Type == history.Info && strings.HasPrefix(o.Error, "worker exited"):
			end(o.Process, o.Time)
		}
		if o.F == history.Acquire && o.Type == history.OK {
			e := int64(math.MaxInt64)
			if o.Value.ValidUntil > 0 {
				e = o.Value.ValidUntil
			}
			open[o.Process] = len(holds)
			holds = append(holds, hold{start: o.Time, end: e})
		}
	}
	var x RestartExposure
	for _, c := range crashes {
		if c.back == 0 {
			continue
		}
		x.Restarts++
		for _, hd := range holds {
			if hd.start <= c.killed && hd.end > c.back {
				x.Across++
				break
			}
		}
	}
	stillOpen := map[int]bool{}
	for _, i := range open {
		stillOpen[i] = true
	}
	for i, hd := range holds {
		if !stillOpen[i] && hd.end >= hd.start {
			x.Holds = append(x.Holds, time.Duration(hd.end-hd.start))
		}
	}
	slices.Sort(x.Holds)
	return x
}

// Takeover is one hold that another process's hold began inside, and its
// dual-holder window (checker.HoldNotice).
type Takeover struct {
	Process int
	// Window is the time from the other process's acquire ok to the
	// moment this holder stopped believing it held the lock.
	Window time.Duration
	// Told is whether the holder's lost-lock notice came before its hold
	// ended.
	Told bool
}

// Takeovers returns the takeovers of h (checker.HoldNotices), nil for
// none or for a history the checker cannot read.
func Takeovers(h history.History) []Takeover {
	if len(h) == 0 {
		return nil
	}
	rows, err := checker.HoldNotices(context.Background(), history.NewTable(h))
	if err != nil {
		return nil
	}
	var out []Takeover
	for _, r := range rows {
		if r.Overlapped() {
			out = append(out, Takeover{Process: r.Process, Window: time.Duration(r.DualHolder),
				Told: r.Told() && r.NoticeAt <= r.TakenOverAt+r.DualHolder})
		}
	}
	return out
}
