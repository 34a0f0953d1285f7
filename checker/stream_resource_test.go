package checker

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/locktest/locktest/history"
)

// noticeKeys are the stats of NoticeStats.
var noticeKeys = []string{"notices", "notices_about_no_hold", "holds_overlapped", "holds_overlapped_told", "holds_told",
	"writes_after_notice", "notice_latency_p50_s", "notice_latency_p99_s", "notice_latency_max_s"}

// withoutNotices returns r's stats and notes by kind but those of
// lost-lock notices, which only the check of the whole history gives.
func withoutNotices(r Result) (map[string]float64, map[string]int) {
	stats := map[string]float64{}
	for k, v := range r.Stats {
		if !slices.Contains(noticeKeys, k) {
			stats[k] = v
		}
	}
	notes := map[string]int{}
	for _, n := range r.Notes {
		if n.Kind != KindWroteAfterNotice {
			notes[n.Kind]++
		}
	}
	return stats, notes
}

// resourceDisagrees compares Resource of mode on h with StreamResource fed
// h's ops in index order, and says how they differ.
func resourceDisagrees(h history.History, mode string, revives ...revival) string {
	batch := Resource{Mode: mode}.Check(context.Background(), history.NewTable(h))
	s := NewStreamResource(mode)
	early := feed(s, h, revives)
	got := s.Finish()
	gs, gn := withoutNotices(got)
	bs, bn := withoutNotices(batch)
	switch {
	case got.Valid != batch.Valid:
		return fmt.Sprintf("verdict %s, batch %s (stream %v; batch %v)", got.Valid, batch.Valid, got.Anomalies, batch.Anomalies)
	case !maps.Equal(kindCounts(got), kindCounts(batch)):
		return fmt.Sprintf("anomalies %v, batch %v (stream: %v; batch: %v)", kindCounts(got), kindCounts(batch), got.Anomalies, batch.Anomalies)
	case !maps.Equal(gn, bn):
		return fmt.Sprintf("notes %v, batch %v (stream: %v; batch: %v)", gn, bn, got.Notes, batch.Notes)
	case !maps.Equal(gs, bs):
		return fmt.Sprintf("stats %v, batch %v", gs, bs)
	case len(early) > len(got.Anomalies):
		return fmt.Sprintf("%d anomalies confirmed early, %d at the end", len(early), len(got.Anomalies))
	}
	return ""
}

// TestStreamResourceAgreesOnTheGoldenHistories: on every golden history,
// in each resource mode, the streaming checker agrees with Resource.
func TestStreamResourceAgreesOnTheGoldenHistories(t *testing.T) {
	for _, g := range goldenFiles(t) {
		for _, mode := range []string{"none", "fenced", "check-and-set", "etcd-guarded"} {
			if d := resourceDisagrees(g.h, mode); d != "" {
				t.Errorf("%s, %s: %s", g.name, mode, d)
			}
		}
	}
}

// TestStreamResourceAgrees: on random histories of a lease lock guarding
// a counter (reads, writes accepted with a store time or without, rejected
// by the store, failed before it, of unknown outcome; writes after the
// lease ran out, after a release, without a lease; grants of a held lock;
// tokens that go back; acquires again while holding; ties), recorded out
// of order as a driver receives them, the streaming checker agrees with
// Resource in each mode.
func TestStreamResourceAgrees(t *testing.T) {
	kinds := map[string]int{}
	for seed := range uint64(*streamRuns) {
		h := genResource(rand.New(rand.NewPCG(seed, 11)))
		mode := []string{"none", "fenced", "check-and-set", "etcd-guarded"}[seed%4]
		if d := resourceDisagrees(h, mode); d != "" {
			t.Fatalf("seed %d (%s): %s\n%s", seed, mode, d, dump(h))
		}
		r := Resource{Mode: mode}.Check(context.Background(), history.NewTable(h))
		for k := range kindCounts(r) {
			kinds[k]++
		}
		for _, n := range r.Notes {
			kinds[n.Kind]++
		}
	}
	// The generator must exercise every rule.
	for _, k := range []string{KindStaleWrite, KindLostUpdate, KindTokenRegression, KindLateWrite, KindWriteRejected, KindLiveWriteRejected} {
		if kinds[k] < *streamRuns/50 {
			t.Errorf("%s in %d of %d histories: the generator hardly makes it", k, kinds[k], *streamRuns)
		}
	}
}

// genResource returns a random history of a lease lock guarding a
// counter, as a driver records it.
func genResource(rng *rand.Rand) history.History {
	s := newSim(rng)
	counter := map[string]int64{}
	tokens := map[string]uint64{}
	n := func(x int64) *int64 { return &x }
	for range 10 + rng.IntN(80) {
		s.tick()
		p, st := s.worker()
		switch st.state {
		case idle:
			s.acquire(p)
		case acquiring:
			hd := s.holder[st.lock]
			switch r := rng.IntN(10); {
			case r == 0:
				s.timeout(p, history.Acquire)
			case hd < 0 || r == 1 || hd == p:
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
			default:
				s.refuse(p)
			}
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
	}
	out, _ := s.received()
	return out
}

// TestStreamResourceMemoryIsBounded: over a long history of holders that
// read and write the counter, the checker keeps a handful of holds,
// writes and ops however many have gone by.
func TestStreamResourceMemoryIsBounded(t *testing.T) {
	s := NewStreamResource("fenced")
	const procs = 4
	for p := range procs {
		s.Expect(p)
	}
	most := 0
	now, idx := int64(0), 0
	add := func(op history.Op) {
		op.Index, op.Time = idx, now
		idx++
		now++
		s.Add(op)
	}
	n := func(x int64) *int64 { return &x }
	for i := range 20000 {
		p, c := i%procs, int64(i)
		add(history.Op{Type: history.Invoke, Process: p, F: history.Acquire, Value: history.Value{Lock: "l"}})
		add(history.Op{Type: history.OK, Process: p, F: history.Acquire, Value: history.Value{Lock: "l", Token: tok(uint64(i + 1)), ValidUntil: now + 20}})
		add(history.Op{Type: history.Invoke, Process: p, F: history.Read, Value: history.Value{Lock: "l"}})
		add(history.Op{Type: history.OK, Process: p, F: history.Read, Value: history.Value{Lock: "l", N: n(c)}})
		add(history.Op{Type: history.Invoke, Process: p, F: history.Write, Value: history.Value{Lock: "l", N: n(c + 1), Token: tok(uint64(i + 1))}})
		add(history.Op{Type: history.OK, Process: p, F: history.Write, Value: history.Value{Lock: "l", N: n(c + 1), StoreTime: now}})
		add(history.Op{Type: history.Invoke, Process: p, F: history.Release, Value: history.Value{Lock: "l"}})
		add(history.Op{Type: history.OK, Process: p, F: history.Release, Value: history.Value{Lock: "l"}})
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
