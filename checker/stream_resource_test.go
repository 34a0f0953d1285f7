package checker

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/locktest/locktest/history"
)

// noticeKeys are the stats of NoticeStats.
var noticeKeys = []string{"notices", "notices_about_no_hold", "holds_overlapped", "holds_overlapped_told", "holds_told",
	"writes_after_notice", "notice_latency_p50_s", "notice_latency_p99_s", "notice_latency_max_s",
	"dual_holder_p50_s", "dual_holder_p99_s", "dual_holder_max_s"}

// withoutNotices returns r without the stats and notes of lost-lock
// notices, which only the check of the whole history gives.
func withoutNotices(r Result) Result {
	stats := map[string]float64{}
	for k, v := range r.Stats {
		if !slices.Contains(noticeKeys, k) {
			stats[k] = v
		}
	}
	r.Stats = stats
	r.Notes = slices.DeleteFunc(slices.Clone(r.Notes), func(n Anomaly) bool { return n.Kind == KindWroteAfterNotice })
	return r
}

// genResource returns a random history of a lease lock guarding a
// counter, as a driver records it.
func genResource(rng *rand.Rand) history.History {
	s := newSim(rng)
	counter := map[string]int64{}
	tokens := map[string]uint64{}
	n := func(x int64) *int64 { return &x }
	grant := func(p int, st *worker, hd, r int) {
		if hd >= 0 && r != 1 && hd != p {
			s.refuse(p)
			return
		}
		s.grant(p)
		tokens[st.lock]++
		st.token = tokens[st.lock]
		if rng.IntN(12) == 0 && st.token > 2 {
			st.token -= 2 // a token that goes back
		}
		st.until = 0
		if rng.IntN(4) != 0 {
			st.until = s.now + rng.Int64N(10)
		}
		s.add(history.OK, p, history.Acquire, history.Value{Lock: st.lock, LockValue: st.value, Token: tok(st.token), ValidUntil: st.until}, "")
		st.state = holding
	}
	s.run(10+rng.IntN(80), 0, grant, func(p int, st *worker) {
		switch st.state {
		case holding:
			switch r := rng.IntN(10); {
			case r < 5:
				st.state = reading
				s.add(history.Invoke, p, history.Read, history.Value{Lock: st.lock}, "")
			case r < 8:
				st.state, st.base = writing, -1 // a write without a read
				st.writeAt = s.now
				s.add(history.Invoke, p, history.Write, history.Value{Lock: st.lock, Token: tok(st.token), N: n(counter[st.lock] + 1)}, "")
			case r == 8:
				st.state = acquiring // acquire again, holding
				s.add(history.Invoke, p, history.Acquire, history.Value{Lock: st.lock}, "")
			default:
				s.release(p)
			}
		case reading:
			st.base = counter[st.lock]
			s.add(history.OK, p, history.Read, history.Value{Lock: st.lock, N: n(st.base), StoreTime: s.now}, "")
			st.state = writing
			st.writeAt = s.now
			s.add(history.Invoke, p, history.Write, history.Value{Lock: st.lock, Token: tok(st.token), N: n(st.base + 1)}, "")
		case writing:
			var nv int64
			if st.base >= 0 {
				nv = st.base + 1
			} else {
				nv = counter[st.lock] + 1
			}
			store := st.writeAt + rng.Int64N(s.now-st.writeAt+1)
			switch r := rng.IntN(10); {
			case r == 0:
				s.add(history.Info, p, history.Write, history.Value{Lock: st.lock}, "timeout")
			case r == 1:
				s.add(history.Fail, p, history.Write, history.Value{Lock: st.lock}, "connection refused")
			case r < 4:
				v := history.Value{Lock: st.lock}
				if rng.IntN(2) == 0 {
					v.StoreTime = store
				}
				s.add(history.Fail, p, history.Write, v, "rejected: token too old")
			default:
				counter[st.lock] = nv
				v := history.Value{Lock: st.lock, N: n(nv)}
				if rng.IntN(3) != 0 {
					v.StoreTime = store
				}
				if rng.IntN(2) == 0 {
					v.Token = tok(st.token)
				}
				s.add(history.OK, p, history.Write, v, "")
			}
			st.state = holding
			if rng.IntN(3) == 0 {
				s.release(p)
			}
		case releasing:
			if s.holder[st.lock] == p {
				s.holder[st.lock] = -1
			}
			s.add(history.OK, p, history.Release, history.Value{Lock: st.lock, Removed: st.value}, "")
			st.state = idle
			if rng.IntN(6) == 0 {
				// A write after its release, without a lease of its own.
				st.state, st.base = writing, -1
				st.writeAt = s.now
				s.add(history.Invoke, p, history.Write, history.Value{Lock: st.lock, N: n(counter[st.lock] + 1)}, "")
			}
		}
	})
	out, _ := s.received()
	return out
}

// TestStreamResourceMemoryIsBounded: over a long history of holders that
// read and write the counter, the checker keeps a handful of holds,
// writes and ops however many have gone by.
func TestStreamResourceMemoryIsBounded(t *testing.T) {
	s := NewStreamResource("fenced")
	const procs = 4
	clk := newClock(s, procs, 0, 1)
	most := 0
	n := func(x int64) *int64 { return &x }
	for i := range 20000 {
		p, c := i%procs, int64(i)
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Acquire, Value: history.Value{Lock: "l"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Acquire, Value: history.Value{Lock: "l", Token: tok(uint64(i + 1)), ValidUntil: clk.now + 20}})
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Read, Value: history.Value{Lock: "l"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Read, Value: history.Value{Lock: "l", N: n(c)}})
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Write, Value: history.Value{Lock: "l", N: n(c + 1), Token: tok(uint64(i + 1))}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Write, Value: history.Value{Lock: "l", N: n(c + 1), StoreTime: clk.now}})
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Release, Value: history.Value{Lock: "l"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Release, Value: history.Value{Lock: "l"}})
		kept := len(s.undecided) + s.r.buf.Len() + len(s.open)
		for _, hs := range s.watched {
			kept += len(hs)
		}
		for _, q := range s.ready {
			kept += q.Len()
		}
		for _, m := range s.unplaced {
			kept += len(m)
		}
		most = max(most, kept)
	}
	if r := s.Finish(); r.Valid != Valid || r.Stats["writes_accepted"] != 20000 {
		t.Fatalf("verdict %s, %v writes accepted: %v", r.Valid, r.Stats["writes_accepted"], r.Anomalies)
	}
	if most > 40 {
		t.Errorf("the checker kept up to %d things at once over 160000 ops, want a handful", most)
	}
}
