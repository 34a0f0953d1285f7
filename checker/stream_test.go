package checker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/locktest/locktest/history"
)

var streamRuns = flag.Int("stream-runs", 1000, "random histories TestStreamMutexAgrees checks")

// expectExercised fails t for each of names (every key of counts when
// none is given) whose count in counts is below one in per of the
// streamRuns histories: a random generator that hardly makes a case
// leaves the rule that judges it untested.
func expectExercised(t *testing.T, per int, counts map[string]int, names ...string) {
	t.Helper()
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(counts))
	}
	for _, k := range names {
		if counts[k] < *streamRuns/per {
			t.Errorf("%s in %d of %d histories: the generator hardly makes it", k, counts[k], *streamRuns)
		}
	}
}

// kindCounts counts a result's anomalies by kind.
func kindCounts(r Result) map[string]int { return countKinds(r.Anomalies) }

// countKinds counts anomalies or notes by kind.
func countKinds(as []Anomaly) map[string]int {
	out := map[string]int{}
	for _, a := range as {
		out[a.Kind]++
	}
	return out
}

// streamDiffers says how got, the Result of a streaming checker fed a
// history, differs from batch, the Result on that history of the batch
// checker it streams, or returns "" when they agree as they must: the
// same verdict, anomalies and notes by kind and count, and stats; no more
// anomalies confirmed before the end (early) than at it; and no op that
// came late (late, the stream's Late).
func streamDiffers(got, batch Result, early []Anomaly, late int) string {
	switch {
	case got.Valid != batch.Valid:
		return fmt.Sprintf("verdict %s, batch %s (stream %v; batch %v)", got.Valid, batch.Valid, got.Anomalies, batch.Anomalies)
	case !maps.Equal(kindCounts(got), kindCounts(batch)):
		return fmt.Sprintf("anomalies %v, batch %v (stream: %v; batch: %v)", kindCounts(got), kindCounts(batch), got.Anomalies, batch.Anomalies)
	case !maps.Equal(countKinds(got.Notes), countKinds(batch.Notes)):
		return fmt.Sprintf("notes %v, batch %v (stream: %v; batch: %v)", countKinds(got.Notes), countKinds(batch.Notes), got.Notes, batch.Notes)
	case !maps.Equal(got.Stats, batch.Stats):
		return fmt.Sprintf("stats %v, batch %v", got.Stats, batch.Stats)
	case len(early) > len(got.Anomalies):
		return fmt.Sprintf("%d anomalies confirmed early, %d at the end", len(early), len(got.Anomalies))
	case late > 0:
		return fmt.Sprintf("%d ops came late", late)
	}
	return ""
}

// streamDisagrees compares MutualExclusion on h with StreamMutex fed h's
// ops in index order (the order they were recorded), and says how they
// differ (streamDiffers).
func streamDisagrees(h history.History, revives ...revival) string {
	batch := MutualExclusion{}.Check(context.Background(), history.NewTable(h))
	s := NewStreamMutex()
	early := feed(s, h, revives)
	return streamDiffers(s.Finish(), batch, early, s.Late())
}

// feed gives s the ops of h in their order, reviving the ids revives
// names, as a driver does (it knows its workers from the start), and
// returns the anomalies s confirmed on the way.
func feed(s Stream, h history.History, revives []revival) []Anomaly {
	for _, op := range h {
		if op.Process >= 0 {
			s.Expect(op.Process)
		}
	}
	var early []Anomaly
	for _, op := range h {
		for _, r := range revives {
			if r.before == op.Index {
				s.Revive(r.proc, r.at)
			}
		}
		s.Add(op)
		early = append(early, s.Confirmed()...)
	}
	return early
}

// goldenFile is a golden history of testdata/ and its file's name.
type goldenFile struct {
	name string
	h    history.History
}

// goldenFiles reads every golden history of testdata/ (of a truncated
// one, the ops before its cut), and fails t if one cannot be read or there
// are fewer than ten.
func goldenFiles(t *testing.T) []goldenFile {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if len(files) < 10 {
		t.Fatalf("only %d golden histories", len(files))
	}
	var gs []goldenFile
	for _, f := range files {
		h, err := history.ReadFile(f)
		if err != nil && !errors.Is(err, history.ErrTruncated) {
			t.Fatal(err)
		}
		gs = append(gs, goldenFile{filepath.Base(f), h})
	}
	return gs
}

// TestStreamMutexAgreesOnTheGoldenHistories: on every golden history of
// testdata/, the streaming checker agrees with MutualExclusion.
func TestStreamMutexAgreesOnTheGoldenHistories(t *testing.T) {
	for _, g := range goldenFiles(t) {
		if d := streamDisagrees(g.h); d != "" {
			t.Errorf("%s: %s", g.name, d)
		}
	}
}

// TestStreamMutexAgrees: on random lease histories (valid_until, release,
// acquire again, kills proved by the nemesis and by the pool, ids used
// again, foreign releases, grants of a held lock, ties in time), recorded
// in the order a driver receives them (a worker's ops late behind
// others', in its own order; the nemesis's and the pool's as they
// happen), the streaming checker agrees with MutualExclusion.
func TestStreamMutexAgrees(t *testing.T) {
	violations := 0
	for seed := range uint64(*streamRuns) {
		h, revives := genLeases(rand.New(rand.NewPCG(seed, 7)))
		if d := streamDisagrees(h, revives...); d != "" {
			t.Fatalf("seed %d: %s\n%s", seed, d, dump(h))
		}
		if r := (MutualExclusion{}).Check(context.Background(), history.NewTable(h)); r.Valid == Invalid {
			violations++
		}
	}
	// The generator must exercise both verdicts.
	if violations < *streamRuns/10 || violations > *streamRuns*9/10 {
		t.Errorf("%d of %d histories invalid: the generator is lopsided", violations, *streamRuns)
	}
}

// TestStreamMutexConfirmsEarly: an overlap is confirmed as soon as no op
// to come can undo it, long before the history ends, and not before.
func TestStreamMutexConfirmsEarly(t *testing.T) {
	s := NewStreamMutex()
	s.Expect(0)
	s.Expect(1)
	ops := []history.Op{
		{Index: 0, Type: history.Invoke, Process: 0, F: history.Acquire, Time: 10, Value: history.Value{Lock: "l"}},
		{Index: 1, Type: history.OK, Process: 0, F: history.Acquire, Time: 20, Value: history.Value{Lock: "l", ValidUntil: 100}},
		{Index: 2, Type: history.Invoke, Process: 1, F: history.Acquire, Time: 30, Value: history.Value{Lock: "l"}},
		{Index: 3, Type: history.OK, Process: 1, F: history.Acquire, Time: 40, Value: history.Value{Lock: "l", ValidUntil: 200}},
	}
	for _, op := range ops {
		s.Add(op)
	}
	if got := s.Confirmed(); len(got) != 0 {
		t.Fatalf("confirmed %v while process 0 could still have released at 40", got)
	}
	// Process 0's next op, at 50: process 1 may still send an op at 40.
	s.Add(history.Op{Index: 4, Type: history.Invoke, Process: 0, F: history.Release, Time: 50, Value: history.Value{Lock: "l"}})
	if got := s.Confirmed(); len(got) != 0 {
		t.Fatalf("confirmed %v before process 1 moved past 40", got)
	}
	// Process 1's next op, at 45, moves the watermark past 40: process
	// 0's lease was in force at 40, whatever comes.
	s.Add(history.Op{Index: 5, Type: history.Invoke, Process: 1, F: history.Release, Time: 45, Value: history.Value{Lock: "l"}})
	if got := s.Confirmed(); len(got) != 1 || got[0].Kind != KindOverlappingHolds {
		t.Fatalf("confirmed %v, want the overlap", got)
	}
	// A kill under way holds the decision back: it may prove a death
	// from its invocation on.
	s2 := NewStreamMutex()
	s2.Expect(0)
	s2.Expect(1)
	for _, op := range ops[:2] {
		s2.Add(op)
	}
	s2.Add(history.Op{Index: 2, Type: history.Invoke, Process: history.NemesisProcess, F: "kill-client", Time: 25})
	for _, op := range ops[2:] {
		op.Index++
		s2.Add(op)
	}
	s2.Add(history.Op{Index: 5, Type: history.Invoke, Process: 0, F: history.Release, Time: 50, Value: history.Value{Lock: "l"}})
	s2.Add(history.Op{Index: 6, Type: history.Invoke, Process: 1, F: history.Release, Time: 60, Value: history.Value{Lock: "l"}})
	if got := s2.Confirmed(); len(got) != 0 {
		t.Fatalf("confirmed %v with a kill under way since 25", got)
	}
}

// genLeases returns a random history of a lease lock as a driver records
// it, and the revivals of dead workers' ids; see TestStreamMutexAgrees.
func genLeases(rng *rand.Rand) (history.History, []revival) {
	s := newSim(rng)
	grant := func(p int, st *worker, hd, r int) {
		if hd >= 0 && r != 1 { // r == 1: a grant of a held lock
			s.refuse(p)
			return
		}
		s.grant(p)
		var until int64
		if rng.IntN(3) != 0 {
			until = s.now + rng.Int64N(12)
		}
		s.add(history.OK, p, history.Acquire, history.Value{Lock: st.lock, LockValue: st.value, ValidUntil: until}, "")
		st.state = holding
	}
	s.run(10+rng.IntN(60), 10, grant, func(p int, st *worker) {
		switch st.state {
		case holding:
			if rng.IntN(6) == 0 {
				st.state = acquiring // acquire again, holding
				s.add(history.Invoke, p, history.Acquire, history.Value{Lock: st.lock}, "")
				return
			}
			s.release(p)
		case releasing:
			removed := st.value
			if other := s.holder[st.lock]; other >= 0 && other != p && rng.IntN(2) == 0 {
				removed = s.ws[other].value // a release that deletes another's lock
			}
			if s.holder[st.lock] == p || removed != st.value {
				s.holder[st.lock] = -1
			}
			if rng.IntN(8) == 0 {
				s.timeout(p, history.Release)
			} else {
				s.add(history.OK, p, history.Release, history.Value{Lock: st.lock, Removed: removed}, "")
			}
			st.state = idle
		}
	})
	return s.received()
}

// dump renders a history one op a line, for a failure's message.
func dump(h history.History) string {
	var b []byte
	for _, op := range h {
		b = fmt.Appendf(b, "%s\n", op.String())
	}
	return string(b)
}

// clock feeds a streaming checker a long made-up history, as the tests of
// its memory do: each op it adds is numbered in order and stamped with the
// time now, and now then moves on by step ns.
type clock struct {
	s         Stream
	idx       int
	now, step int64
}

// newClock returns a clock that feeds s from start on, having told s of
// the processes 0 to procs-1 (Expect).
func newClock(s Stream, procs int, start, step int64) *clock {
	for p := range procs {
		s.Expect(p)
	}
	return &clock{s: s, now: start, step: step}
}

// add gives op to the checker as the next op, at now.
func (c *clock) add(op history.Op) {
	op.Index, op.Time = c.idx, c.now
	c.idx++
	c.now += c.step
	c.s.Add(op)
}

// TestStreamMutexMemoryIsBounded: over a long history of a lease lock,
// the checker keeps only what is still open: its kept holds, undecided
// holds, held-back ops and remembered lock values stay a handful however
// many ops have gone by.
func TestStreamMutexMemoryIsBounded(t *testing.T) {
	s := NewStreamMutex()
	const procs = 4
	clk := newClock(s, procs, 1, 1)
	most := 0
	for i := range 50000 {
		p := i % procs
		v := fmt.Sprintf("v%d", i)
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Acquire, Value: history.Value{Lock: "l"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Acquire, Value: history.Value{Lock: "l", LockValue: v, ValidUntil: clk.now + 10}})
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Release, Value: history.Value{Lock: "l", LockValue: v}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Release, Value: history.Value{Lock: "l", Removed: v}})
		kept := len(s.pending) + s.r.buf.Len() + len(s.lockValues)
		for _, hs := range s.holds {
			kept += len(hs)
		}
		most = max(most, kept)
	}
	if r := s.Finish(); r.Valid != Valid || r.Stats["holds"] != 50000 {
		t.Fatalf("verdict %s, %v holds", r.Valid, r.Stats["holds"])
	}
	if most > 40 {
		t.Errorf("the checker kept up to %d things at once over 200000 ops, want a handful", most)
	}
}

// TestReorderCountsOnlyLateOpsThatMatter: a nemesis op stamped before a
// worker's op but recorded after it (the nemesis stamps, then records,
// and a loaded machine may run a worker in between) is late only when it
// could change a decision: a kill's op, not a pause's.
func TestReorderCountsOnlyLateOpsThatMatter(t *testing.T) {
	for _, tc := range []struct {
		f    string
		late int
	}{{"pause-client", 0}, {"kill-client", 1}} {
		r := newReorder()
		r.expect(0)
		r.push(history.Op{Index: 0, Type: history.Invoke, Process: 0, F: history.Acquire, Time: 10})
		r.push(history.Op{Index: 1, Type: history.OK, Process: 0, F: history.Acquire, Time: 20})
		r.ready(false, func(history.Op) {})
		r.push(history.Op{Index: 2, Type: history.Invoke, Process: history.NemesisProcess, F: tc.f, Time: 5})
		if r.late != tc.late {
			t.Errorf("%s recorded late: %d late ops counted, want %d", tc.f, r.late, tc.late)
		}
	}
}
