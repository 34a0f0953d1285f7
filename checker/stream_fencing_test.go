package checker

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/locktest/locktest/history"
)

// genTokens returns a random history of a lock that grants fencing
// tokens, as a driver records it, and the revivals of dead workers' ids:
// counters that restart, tokens granted twice, re-grants after releases
// of unknown outcome, kills and ids used again.
func genTokens(rng *rand.Rand) (history.History, []revival) {
	s := newSim(rng)
	counter := map[string]uint64{}
	tok := func(t uint64) *uint64 { return &t }
	grant := func(p int, st *worker, hd, r int) {
		switch {
		case hd == p && st.kept:
			// The service hands the lease it still holds back: the
			// same token and lock value.
			s.add(history.OK, p, history.Acquire, history.Value{Lock: st.lock, LockValue: st.value, Token: tok(st.token)}, "")
			st.state, st.kept = holding, false
		case hd < 0 || r == 1 || r == 2 && s.ws[hd].kept: // a grant of a held lock, also of a lease kept after a release of unknown outcome
			s.grant(p)
			switch r := rng.IntN(20); {
			case r == 0 && counter[st.lock] > 2:
				counter[st.lock] -= 3 // a counter that restarted
			case r == 1 && counter[st.lock] > 0:
				counter[st.lock]-- // the same token again
			}
			counter[st.lock]++
			st.token = counter[st.lock]
			v := history.Value{Lock: st.lock, LockValue: st.value, Token: tok(st.token)}
			if rng.IntN(12) == 0 {
				v.Token = nil
			}
			s.add(history.OK, p, history.Acquire, v, "")
			st.state, st.kept = holding, false
		default:
			s.refuse(p)
		}
	}
	s.run(10+rng.IntN(70), 12, grant, func(p int, st *worker) {
		switch st.state {
		case holding:
			switch r := rng.IntN(8); {
			case r == 0:
				st.state = acquiring // acquire again, holding
				s.add(history.Invoke, p, history.Acquire, history.Value{Lock: st.lock}, "")
				return
			case r == 1:
				s.add(history.Invoke, p, history.Read, history.Value{Lock: st.lock}, "")
				s.add(history.OK, p, history.Read, history.Value{Lock: st.lock, N: new(int64)}, "")
				return
			}
			s.release(p)
		case releasing:
			st.state = idle
			if rng.IntN(3) == 0 {
				s.timeout(p, history.Release)
				if s.holder[st.lock] == p && rng.IntN(3) != 0 {
					st.kept = true // it did not take effect
					return
				}
			} else {
				s.add(history.OK, p, history.Release, history.Value{Lock: st.lock, Removed: st.value}, "")
			}
			if s.holder[st.lock] == p {
				s.holder[st.lock] = -1
			}
		}
	})
	return s.received()
}

// TestStreamFencingConfirmsEarly: a token regression is confirmed as soon
// as its grant's outcome and every earlier invocation's are known, long
// before the history ends.
func TestStreamFencingConfirmsEarly(t *testing.T) {
	s := NewStreamFencing()
	s.Expect(0)
	s.Expect(1)
	ops := regressionStory()
	for i, op := range ops {
		op.Index = i
		s.Add(op)
	}
	if got := s.Confirmed(); len(got) != 0 {
		t.Fatalf("confirmed %v before the watermark passed process 1's grant", got)
	}
	// Both processes move on: the grant at 40 is read, its rule applied.
	s.Add(history.Op{Index: 4, Type: history.Invoke, Process: 0, F: history.Release, Time: 50, Value: history.Value{Lock: "l"}})
	s.Add(history.Op{Index: 5, Type: history.Invoke, Process: 1, F: history.Release, Time: 55, Value: history.Value{Lock: "l"}})
	got := s.Confirmed()
	if len(got) != 1 || got[0].Kind != KindTokenRegression {
		t.Fatalf("confirmed %v, want the token regression", got)
	}
	if r := s.Finish(); r.Valid != Invalid || r.Stats["token_regressions"] != 1 {
		t.Errorf("finish: %s %v", r.Valid, r.Stats)
	}
}

// regressionStory is process 0 granted token 7 of lock l at 20, and
// process 1, invoked after that, token 3 at 40.
func regressionStory() []history.Op {
	tok := func(t uint64) *uint64 { return &t }
	return []history.Op{
		{Type: history.Invoke, Process: 0, F: history.Acquire, Time: 10, Value: history.Value{Lock: "l"}},
		{Type: history.OK, Process: 0, F: history.Acquire, Time: 20, Value: history.Value{Lock: "l", Token: tok(7)}},
		{Type: history.Invoke, Process: 1, F: history.Acquire, Time: 30, Value: history.Value{Lock: "l"}},
		{Type: history.OK, Process: 1, F: history.Acquire, Time: 40, Value: history.Value{Lock: "l", Token: tok(3)}},
	}
}

// TestStreamFencingDoesNotWaitForAnAcquireNeverCompleted: an acquire
// whose completion never came (its process went on to invoke another op)
// granted nothing, and the regression of a later grant is confirmed
// without waiting for the end of the history.
func TestStreamFencingDoesNotWaitForAnAcquireNeverCompleted(t *testing.T) {
	s := NewStreamFencing()
	s.Expect(0)
	s.Expect(1)
	ops := append([]history.Op{{Type: history.Invoke, Process: 1, F: history.Acquire, Time: 5, Value: history.Value{Lock: "l"}}}, regressionStory()...)
	ops = append(ops,
		history.Op{Type: history.Invoke, Process: 0, F: history.Release, Time: 50, Value: history.Value{Lock: "l"}},
		history.Op{Type: history.Invoke, Process: 1, F: history.Release, Time: 55, Value: history.Value{Lock: "l"}})
	var early []Anomaly
	for i := range ops {
		ops[i].Index = i
		s.Add(ops[i])
		early = append(early, s.Confirmed()...)
	}
	if len(early) != 1 || early[0].Kind != KindTokenRegression {
		t.Fatalf("confirmed %v before the end, want the token regression", early)
	}
	if r := s.Finish(); r.Valid != Invalid || len(r.Anomalies) != 1 || r.Anomalies[0].Explanation != early[0].Explanation {
		t.Errorf("finish: %s %v, want the regression confirmed early", r.Valid, r.Anomalies)
	}
}

// TestStreamFencingMemoryIsBounded: over a long history of holders with
// increasing tokens, the checker keeps a handful of grants in its queue
// and a bounded number of remembered first grants, however many ops have
// gone by.
func TestStreamFencingMemoryIsBounded(t *testing.T) {
	s := NewStreamFencing()
	const procs = 4
	clk := newClock(s, procs, 1, 1)
	tok := func(t uint64) *uint64 { return &t }
	maxQueue := 0
	for i := range 50000 {
		p := i % procs
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Acquire, Value: history.Value{Lock: "l"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Acquire, Value: history.Value{Lock: "l", Token: tok(uint64(i + 1)), LockValue: fmt.Sprint(i)}})
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Release, Value: history.Value{Lock: "l"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Release, Value: history.Value{Lock: "l"}})
		maxQueue = max(maxQueue, len(s.queue))
	}
	lk := s.locks["l"]
	if maxQueue > 2*procs || len(lk.recent) > 2*recentTokens || len(s.r.buf) > 4*procs {
		t.Errorf("queue up to %d, %d first grants remembered, %d ops held back: not bounded by what is open", maxQueue, len(lk.recent), len(s.r.buf))
	}
	if b := lk.seen.GetSizeInBytes(); b > 50000 {
		t.Errorf("the set of 50000 dense tokens takes %d bytes", b)
	}
	if r := s.Finish(); r.Valid != Valid || r.Stats["tokens"] != 50000 {
		t.Errorf("finish: %s %v", r.Valid, r.Stats)
	}
}

// TestStreamsGiveWhatEachStreamGives: fed through one shared reorder
// buffer (Streams), the three streaming checkers confirm the same
// anomalies while the history goes on and give the same Results as each
// fed on its own, on random histories of leases, resources and tokens.
func TestStreamsGiveWhatEachStreamGives(t *testing.T) {
	fresh := func() []Stream {
		return []Stream{NewStreamMutex(), NewStreamResource("fenced"), NewStreamFencing()}
	}
	for seed := range uint64(*streamRuns / 3) {
		rng := rand.New(rand.NewPCG(seed, 13))
		var h history.History
		var revives []revival
		switch seed % 3 {
		case 0:
			h, revives = genLeases(rng)
		case 1:
			h = genResource(rng)
		default:
			h, revives = genTokens(rng)
		}
		alone, shared := fresh(), fresh()
		m := NewStreams(shared...)
		for _, op := range h {
			if op.Process >= 0 {
				m.Expect(op.Process)
				for _, s := range alone {
					s.Expect(op.Process)
				}
			}
		}
		var early [2][3]int
		for _, op := range h {
			for _, r := range revives {
				if r.before == op.Index {
					m.Revive(r.proc, r.at)
					for _, s := range alone {
						s.Revive(r.proc, r.at)
					}
				}
			}
			m.Add(op)
			for i := range alone {
				alone[i].Add(op)
				early[0][i] += len(alone[i].Confirmed())
				early[1][i] += len(shared[i].Confirmed())
			}
		}
		m.Finish()
		if early[0] != early[1] {
			t.Fatalf("seed %d: confirmed early %v alone, %v shared", seed, early[0], early[1])
		}
		for i := range alone {
			a, b := alone[i].Finish(), shared[i].Finish()
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("seed %d: %s alone\n%v\nshared\n%v\n%s", seed, a.Checker, a, b, dump(h))
			}
		}
		if m.Late() != alone[0].Late() {
			t.Fatalf("seed %d: %d late shared, %d alone", seed, m.Late(), alone[0].Late())
		}
	}
}
