package checker

import "github.com/locktest/locktest/history"

// FirstConfirmed returns, per kind of anomaly, when the streaming checkers
// of the safety properties (StreamMutex, StreamResource of resource mode
// mode, StreamFencing) first confirmed an anomaly of that kind, reading h
// in its order, as a run's violation watch reads the ops it records: the
// Time of the op at whose reading they confirmed it, which is when a
// watch could have known it. An anomaly they give only when the history
// ends is timed at its last op. Kinds that no streaming checker confirms
// (the stuck lock, a history that is not linearizable) are absent.
func FirstConfirmed(h history.History, mode string) map[string]int64 {
	var slack, high, end int64
	high = -1 << 63
	for _, op := range h {
		if op.Time < high {
			slack = max(slack, high-op.Time)
		}
		high = max(high, op.Time)
		end = max(end, op.Time)
	}
	ss := []Stream{NewStreamMutex(), NewStreamResource(mode), NewStreamFencing()}
	all := NewFileStreams(slack, ss...)
	first := map[string]int64{}
	saw := func(as []Anomaly, at int64) {
		for _, a := range as {
			if _, ok := first[a.Kind]; !ok {
				first[a.Kind] = at
			}
		}
	}
	for _, op := range h {
		all.Add(op)
		for _, s := range ss {
			saw(s.Confirmed(), op.Time)
		}
	}
	all.Finish()
	for _, s := range ss {
		saw(s.Finish().Anomalies, end)
	}
	return first
}
