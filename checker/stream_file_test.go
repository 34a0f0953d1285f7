package checker

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
)

// hasNotices reports whether h holds a lost-lock notice.
func hasNotices(h history.History) bool {
	return slices.ContainsFunc(h, func(op history.Op) bool { return op.Type == history.Notice && op.F == history.Lost })
}

// withFaults returns h, a history as a driver records it, with pauses of
// clients (pause-client, healed by resume-client) among its ops, where the
// nemesis has no op under way: each op is stamped when it is recorded, at
// the latest time before it, as the nemesis's ops are.
func withFaults(h history.History, revs []revival, rng *rand.Rand) (history.History, []revival) {
	var out history.History
	moved := make([]int, len(h)+1) // old index → new
	moved[len(h)] = -1
	var high int64
	open := false   // the nemesis has an invocation under way
	paused := false // a pause is in force
	for _, op := range h {
		high = max(high, op.Time)
		moved[op.Index] = len(out)
		out = append(out, op)
		if op.Process == history.NemesisProcess {
			open = op.Type == history.Invoke
		}
		if !open && rng.IntN(8) == 0 {
			f := "pause-client"
			if paused {
				f = "resume-client"
			}
			paused = !paused
			out = append(out, history.Op{Type: history.Invoke, Process: history.NemesisProcess, F: f, Time: high, Value: history.Value{Targets: []string{"p0"}}})
			typ := history.OK
			if rng.IntN(5) == 0 {
				typ = history.Fail
			}
			out = append(out, history.Op{Type: typ, Process: history.NemesisProcess, F: f, Time: high, Value: history.Value{Targets: []string{"p0"}}})
		}
	}
	moved[len(h)] = len(out)
	for i := range out {
		out[i].Index = i
	}
	var rs []revival
	for _, r := range revs {
		r.before = moved[r.before]
		rs = append(rs, r)
	}
	return out, rs
}

// registerDisagrees compares the register model's Linearizability c on h
// with StreamRegister fed h's ops in index order, and says how they
// differ: verdict and stats, and that an invalid verdict names a window.
func registerDisagrees(h history.History, c Linearizability) string {
	c.Model = RegisterModel
	tab := history.NewTable(h)
	batch := c.Check(context.Background(), tab)
	s := NewStreamRegister(context.Background(), c, registerFactsOf(h))
	feed(s, h, nil)
	got := s.Finish()
	switch {
	case got.Valid != batch.Valid:
		return fmt.Sprintf("verdict %s, batch %s (stream %v %q; batch %v %q)", got.Valid, batch.Valid, got.Anomalies, got.Error, batch.Anomalies, batch.Error)
	case !maps.Equal(got.Stats, batch.Stats):
		return fmt.Sprintf("stats differ:\nstream: %v\nbatch:  %v", got.Stats, batch.Stats)
	case got.Valid == Invalid && (len(got.Anomalies) == 0 || got.Anomalies[0].Kind != KindNotLinearizable):
		return fmt.Sprintf("invalid with anomalies %v", got.Anomalies)
	case got.Error != batch.Error:
		return fmt.Sprintf("error %q, batch %q", got.Error, batch.Error)
	}
	// Which window of a lock is explained depends, as when the history is
	// held, on which window's check found it first.
	for _, a := range got.Anomalies {
		if !strings.Contains(a.Explanation, "have no linearization as a register") || len(a.Ops) == 0 {
			return fmt.Sprintf("anomaly %+v explains nothing", a)
		}
	}
	return ""
}

// registerFactsOf is ScanFacts's RegisterFacts of h, through a file.
func registerFactsOf(h history.History) RegisterFacts {
	dir, err := os.MkdirTemp("", "register-facts")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "history.jsonl")
	if err := history.WriteFile(path, h); err != nil {
		panic(err)
	}
	ff, err := ScanFacts(context.Background(), path)
	if err != nil {
		panic(err)
	}
	return ff.Register
}

// genCounters returns a random history of reads and writes of a counter
// per lock, as a driver records it: writes that take effect or not, of
// unknown outcome either way, reads that overlap writes, and now and then
// a read of a value the counter no longer holds (not linearizable).
func genCounters(rng *rand.Rand) history.History {
	procs := 2 + rng.IntN(3)
	locks := []string{"x", "y"}[:1+rng.IntN(2)]
	counter := map[string]int64{}
	type proc struct {
		busy bool
		f    string
		lock string
		n    int64
	}
	ps := make([]proc, procs)
	var h history.History
	now := int64(0)
	n := func(x int64) *int64 { return &x }
	for range 10 + rng.IntN(120) {
		if rng.IntN(3) != 0 {
			now += 1 + rng.Int64N(3)
		}
		p := rng.IntN(procs)
		st := &ps[p]
		if !st.busy {
			st.busy, st.lock = true, locks[rng.IntN(len(locks))]
			if rng.IntN(2) == 0 {
				st.f = history.Read
				h = append(h, history.Op{Type: history.Invoke, Process: p, F: history.Read, Time: now, Value: history.Value{Lock: st.lock}})
			} else {
				st.f, st.n = history.Write, counter[st.lock]+1
				h = append(h, history.Op{Type: history.Invoke, Process: p, F: history.Write, Time: now, Value: history.Value{Lock: st.lock, N: n(st.n)}})
			}
			continue
		}
		st.busy = false
		v := history.Value{Lock: st.lock}
		switch {
		case st.f == history.Read && rng.IntN(20) == 0:
			v.N = n(max(0, counter[st.lock]-1-rng.Int64N(2))) // stale
			h = append(h, history.Op{Type: history.OK, Process: p, F: history.Read, Time: now, Value: v})
		case st.f == history.Read && rng.IntN(10) == 0:
			h = append(h, history.Op{Type: history.Info, Process: p, F: history.Read, Time: now, Value: v, Error: "timeout"})
		case st.f == history.Read:
			v.N = n(counter[st.lock])
			h = append(h, history.Op{Type: history.OK, Process: p, F: history.Read, Time: now, Value: v})
		default:
			switch r := rng.IntN(10); {
			case r < 2:
				if rng.IntN(2) == 0 {
					counter[st.lock] = st.n // it took effect
				}
				h = append(h, history.Op{Type: history.Info, Process: p, F: history.Write, Time: now, Value: v, Error: "timeout"})
			case r < 3:
				h = append(h, history.Op{Type: history.Fail, Process: p, F: history.Write, Time: now, Value: v, Error: "refused"})
			default:
				counter[st.lock] = st.n
				v.N = n(st.n)
				h = append(h, history.Op{Type: history.OK, Process: p, F: history.Write, Time: now, Value: v})
			}
		}
	}
	out, _ := received(h, rng)
	return out
}

// TestStreamRegisterAgreesOnTheGoldenHistories: on every golden history,
// with windows cut as small as they can be and at the defaults, the
// streaming register check agrees with Linearizability's.
func TestStreamRegisterAgreesOnTheGoldenHistories(t *testing.T) {
	for _, g := range goldenFiles(t) {
		for _, c := range []Linearizability{{}, {WindowOps: 1}} {
			if d := registerDisagrees(g.h, c); d != "" {
				t.Errorf("%s, windows of %d: %s", g.name, c.WindowOps, d)
			}
		}
	}
}

// TestStreamRegisterAgrees: on random histories of reads and writes of
// counters (writes of unknown outcome that took effect or not, reads of
// their values later, stale reads), recorded out of order as a driver
// receives them, the streaming register check agrees with
// Linearizability's, with windows of 1 to 8 ops and windows too long to
// check.
func TestStreamRegisterAgrees(t *testing.T) {
	invalid, cut, tooBig := 0, 0, 0
	for seed := range uint64(*streamRuns) {
		rng := rand.New(rand.NewPCG(seed, 31))
		h := genCounters(rng)
		c := Linearizability{WindowOps: 1 + int(seed%8)}
		if seed%10 == 0 {
			c.MaxWindowOps = 6
		}
		if d := registerDisagrees(h, c); d != "" {
			t.Fatalf("seed %d (%+v): %s\n%s", seed, c, d, dump(h))
		}
		c.Model = RegisterModel
		r := c.Check(context.Background(), history.NewTable(h))
		switch {
		case r.Valid == Invalid:
			invalid++
		case strings.Contains(r.Error, "could not be cut"):
			tooBig++
		}
		if r.Stats["windows"] > 2 {
			cut++
		}
	}
	expectExercised(t, 50, map[string]int{"invalid": invalid, "cut": cut, "too big": tooBig})
}

// TestStreamRegisterMemoryIsBounded: over a long history of reads and
// writes, the check keeps about a window of ops, however many have gone
// by.
func TestStreamRegisterMemoryIsBounded(t *testing.T) {
	s := NewStreamRegister(context.Background(), Linearizability{WindowOps: 100}, RegisterFacts{})
	n := func(x int64) *int64 { return &x }
	clk := newClock(s, 0, 0, 1)
	for i := range 200_000 {
		p := i % 3
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Write, Value: history.Value{Lock: "x", N: n(int64(i + 1))}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Write, Value: history.Value{Lock: "x", N: n(int64(i + 1))}})
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Read, Value: history.Value{Lock: "x"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Read, Value: history.Value{Lock: "x", N: n(int64(i + 1))}})
		if l := s.locks["x"]; l != nil && len(l.ops) > 1000 {
			t.Fatalf("after %d ops the check keeps %d ops of lock x", clk.idx, len(l.ops))
		}
	}
	r := s.Finish()
	if r.Valid != Valid || r.Stats["ops"] != 400_000 || r.Stats["windows"] < 1000 {
		t.Fatalf("got %s %v, want valid over 400,000 ops in at least 1,000 windows", r.Valid, r.Stats)
	}
}

// TestStreamLivenessMemoryIsBounded: over a long history of contended
// leases, the checker keeps a handful of holds and attempts however many
// have gone by, but one latency per acquire ok.
func TestStreamLivenessMemoryIsBounded(t *testing.T) {
	s := NewStreamLiveness(Liveness{})
	clk := newClock(s, 3, 0, 10)
	for i := range 100_000 {
		p := i % 3
		q := (i + 1) % 3
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Acquire, Value: history.Value{Lock: "x"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Acquire, Value: history.Value{Lock: "x", ValidUntil: clk.now + 1000}})
		clk.add(history.Op{Type: history.Invoke, Process: q, F: history.Acquire, Value: history.Value{Lock: "x"}})
		clk.add(history.Op{Type: history.Fail, Process: q, F: history.Acquire, Value: history.Value{Lock: "x"}, Error: "held"})
		clk.add(history.Op{Type: history.Invoke, Process: p, F: history.Release, Value: history.Value{Lock: "x"}})
		clk.add(history.Op{Type: history.OK, Process: p, F: history.Release, Value: history.Value{Lock: "x"}})
		attempts := 0
		if len(s.locks) > 0 {
			attempts = len(s.locks[0].attempts)
		}
		if len(s.live) > 10 || attempts > 10 || len(s.r.buf) > 20 {
			t.Fatalf("after %d ops: %d live holds, %d attempts, %d ops held back", clk.idx, len(s.live), attempts, len(s.r.buf))
		}
	}
	r := s.Finish()
	if r.Valid != Valid || r.Stats["acquire_ok"] != 100_000 || r.Stats["acquire_attempts"] != 200_000 {
		t.Fatalf("got %s %v", r.Valid, r.Stats)
	}
}

// decideDisagrees compares Decide on h with DecideFile on h written to a
// file: the verdict, the problems and stats, and each checker's verdict,
// stats and anomalies by kind (the register's verdict and stats only).
func decideDisagrees(t *testing.T, h history.History, facts RunFacts) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := history.WriteFile(path, h); err != nil {
		t.Fatal(err)
	}
	tab, err := history.ReadTable(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Decide(context.Background(), tab, facts, 0)
	ff, err := ScanFacts(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := ff.Streamable(); err != nil {
		return "not streamable: " + err.Error()
	}
	got, err := DecideFile(context.Background(), path, facts, ff, nil)
	if err != nil {
		return "DecideFile: " + err.Error()
	}
	switch {
	case got.Valid != want.Valid:
		return fmt.Sprintf("verdict %s, batch %s", got.Valid, want.Valid)
	case !slices.Equal(got.Problems, want.Problems):
		return fmt.Sprintf("problems %q, batch %q", got.Problems, want.Problems)
	case !maps.Equal(got.Stats, want.Stats):
		return fmt.Sprintf("stats %v, batch %v", got.Stats, want.Stats)
	case len(got.Results) != len(want.Results):
		return fmt.Sprintf("%d results, batch %d", len(got.Results), len(want.Results))
	}
	for i, g := range got.Results {
		w := want.Results[i]
		gs, ws := withoutNotices(g).Stats, withoutNotices(w).Stats
		switch {
		case g.Checker != w.Checker:
			return fmt.Sprintf("result %d is %s, batch %s", i, g.Checker, w.Checker)
		case g.Valid != w.Valid:
			return fmt.Sprintf("%s: %s, batch %s (%v; batch %v)", g.Checker, g.Valid, w.Valid, g.Anomalies, w.Anomalies)
		case !maps.Equal(gs, ws):
			return fmt.Sprintf("%s: stats %v, batch %v", g.Checker, gs, ws)
		case g.Checker != "linearizable-register" && !maps.Equal(kindCounts(g), kindCounts(w)):
			return fmt.Sprintf("%s: anomalies %v, batch %v", g.Checker, kindCounts(g), kindCounts(w))
		}
	}
	return ""
}

// TestDecideFileAgreesWithDecide: on random histories of leases guarding
// a counter, and of leases with kills and pauses, each in a file out of
// time order as a driver writes it, the check that streams the file
// decides as the check that holds it.
func TestDecideFileAgreesWithDecide(t *testing.T) {
	runs := max(*streamRuns/5, 20)
	tested := 0
	for seed := range uint64(runs) {
		rng := rand.New(rand.NewPCG(seed, 41))
		var h history.History
		facts := RunFacts{Mode: []string{"none", "fenced", "check-and-set"}[seed%3]}
		if seed%2 == 0 {
			h = genResource(rng)
		} else {
			h, _ = genLeases(rng)
			h, _ = withFaults(h, nil, rng)
			facts.Faults = []string{"pause-client", "kill-client"}
		}
		if !Leases(history.NewTable(h)) {
			continue
		}
		tested++
		if d := decideDisagrees(t, h, facts); d != "" {
			t.Fatalf("seed %d: %s\n%s", seed, d, dump(h))
		}
	}
	if tested < runs/2 {
		t.Errorf("only %d of %d histories were leases", tested, runs)
	}
}

// TestDecideFileAgreesOnTheGoldenHistories: on every golden history that
// DecideFile can stream, it decides as Decide; the others it refuses with
// their reason.
func TestDecideFileAgreesOnTheGoldenHistories(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	streamed, refused := 0, 0
	for _, f := range files {
		h, err := history.ReadFile(f)
		if err != nil {
			continue // a truncated history: ScanFacts stops at its cut line, as it should
		}
		d := decideDisagrees(t, h, RunFacts{})
		switch {
		case strings.HasPrefix(d, "not streamable: "):
			refused++
			if tab := history.NewTable(h); Leases(tab) && !hasNotices(h) {
				t.Errorf("%s: refused a history of leases without notices: %s", filepath.Base(f), d)
			}
		case d != "":
			t.Errorf("%s: %s", filepath.Base(f), d)
		default:
			streamed++
		}
	}
	if streamed < 5 || refused == 0 {
		t.Errorf("%d golden histories streamed and %d refused: too few of one", streamed, refused)
	}
}

// TestScanFactsFindsTheSlackAndTheUnknownWrites: the slack is the most an
// op's time falls below the highest time before it, and the register
// facts hold the latest read of each value a write of unknown outcome
// wrote, and only those.
func TestScanFactsFindsTheSlackAndTheUnknownWrites(t *testing.T) {
	n := func(x int64) *int64 { return &x }
	h := history.History{
		{Index: 0, Type: history.Invoke, Process: 0, F: history.Write, Time: 10, Value: history.Value{Lock: "x", N: n(1)}},
		{Index: 1, Type: history.Invoke, Process: 1, F: history.Write, Time: 30, Value: history.Value{Lock: "x", N: n(2)}},
		{Index: 2, Type: history.Info, Process: 0, F: history.Write, Time: 20, Value: history.Value{Lock: "x"}, Error: "timeout"},
		{Index: 3, Type: history.OK, Process: 1, F: history.Write, Time: 31, Value: history.Value{Lock: "x", N: n(2)}},
		{Index: 4, Type: history.Invoke, Process: 2, F: history.Read, Time: 40, Value: history.Value{Lock: "x"}},
		{Index: 5, Type: history.OK, Process: 2, F: history.Read, Time: 45, Value: history.Value{Lock: "x", N: n(1)}},
		{Index: 6, Type: history.Invoke, Process: 2, F: history.Read, Time: 50, Value: history.Value{Lock: "x"}},
		{Index: 7, Type: history.OK, Process: 2, F: history.Read, Time: 52, Value: history.Value{Lock: "x", N: n(2)}},
		{Index: 8, Type: history.Invoke, Process: 3, F: history.Write, Time: 53, Value: history.Value{Lock: "y", N: n(9)}},
	}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := history.WriteFile(path, h); err != nil {
		t.Fatal(err)
	}
	ff, err := ScanFacts(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	want := RegisterFacts{"x": {1: 45}}
	if ff.Ops != 9 || ff.Slack != 10 || ff.Leases || ff.Notices != 0 || fmt.Sprint(ff.Register) != fmt.Sprint(want) {
		t.Errorf("facts %+v, want 9 ops, slack 10, register %v", ff, want)
	}
	if err := ff.Streamable(); err == nil || !strings.Contains(err.Error(), "not leases") {
		t.Errorf("a history of no leases is streamable: %v", err)
	}
}

// TestLivenessEdges: on hand-built histories of the rules random ones
// seldom reach, Liveness finds what each history is built to show.
func TestLivenessEdges(t *testing.T) {
	op := func(i int, typ history.Type, p int, f string, at int64, v history.Value, e string) history.Op {
		return history.Op{Index: i, Type: typ, Process: p, F: f, Time: at, Value: v, Error: e}
	}
	l := history.Value{Lock: "l"}
	kill1 := history.Value{Targets: []string{"p1"}}
	refusals := func(from, n int, at int64) history.History {
		var h history.History
		for k := range n {
			h = append(h, op(from+2*k, history.Invoke, 2, history.Acquire, at+int64(2*k), l, ""),
				op(from+2*k+1, history.Fail, 2, history.Acquire, at+int64(2*k)+1, l, "held"))
		}
		return h
	}
	c := Liveness{MinAttempts: 1, MinWindow: 1}
	tests := []struct {
		name string
		h    history.History
		// want says what Liveness must find in h.
		want func(r Result) bool
	}{{
		// p1's acquire, invoked while p0 held the lock, timed out; p0
		// released it (ok) before p1 was killed: p1's acquire may have
		// taken the lock, and left it stuck.
		name: "an unknown acquire freed by a release ok before its death",
		h: append(history.History{
			op(0, history.Invoke, 0, history.Acquire, 1, l, ""),
			op(1, history.OK, 0, history.Acquire, 2, history.Value{Lock: "l", LockValue: "a"}, ""),
			op(2, history.Invoke, 1, history.Acquire, 3, l, ""),
			op(3, history.Invoke, 0, history.Release, 4, history.Value{Lock: "l", LockValue: "a"}, ""),
			op(4, history.OK, 0, history.Release, 5, history.Value{Lock: "l", Removed: "a"}, ""),
			op(5, history.Info, 1, history.Acquire, 6, l, "timeout"),
			op(6, history.Invoke, history.NemesisProcess, "kill-client", 7, history.Value{}, ""),
			op(7, history.OK, history.NemesisProcess, "kill-client", 8, kill1, ""),
		}, refusals(8, 4, 9)...),
		want: func(r Result) bool {
			return len(r.Anomalies) == 1 && strings.Contains(r.Anomalies[0].Explanation, "inside an acquire invoked at")
		},
	}, {
		// The kill's ok that shows p1 dead has the time of p1's acquire
		// ok and comes before it: a session hold that its death ended.
		name: "a death at the time of the hold's start, recorded before it",
		h: append(history.History{
			op(0, history.Invoke, 1, history.Acquire, 1, l, ""),
			op(1, history.Invoke, history.NemesisProcess, "kill-client", 1, history.Value{}, ""),
			op(2, history.OK, history.NemesisProcess, "kill-client", 2, kill1, ""),
			op(3, history.OK, 1, history.Acquire, 2, history.Value{Lock: "l", LockValue: "b"}, ""),
		}, refusals(4, 4, 3)...),
		want: func(r Result) bool {
			return len(r.Anomalies) == 1 && strings.Contains(r.Anomalies[0].Explanation, "it died at 0.000s")
		},
	}, {
		// An acquire ok at the very time a fault window opens, recorded
		// after the injection: it cuts the quiet span before the window.
		name: "an acquire ok at a fault window's start",
		h: history.History{
			op(0, history.Invoke, 0, history.Acquire, 1, l, ""),
			op(1, history.Invoke, history.NemesisProcess, "pause-client", 10, history.Value{}, ""),
			op(2, history.OK, 0, history.Acquire, 10, history.Value{Lock: "l", LockValue: "a", ValidUntil: 11}, ""),
			op(3, history.OK, history.NemesisProcess, "pause-client", 11, history.Value{Targets: []string{"p1"}}, ""),
			op(4, history.Invoke, history.NemesisProcess, "resume-client", 20, history.Value{}, ""),
			op(5, history.OK, history.NemesisProcess, "resume-client", 21, history.Value{Targets: []string{"p1"}}, ""),
			op(6, history.Invoke, 0, history.Release, 22, history.Value{Lock: "l", LockValue: "a"}, ""),
			op(7, history.OK, 0, history.Release, 24, history.Value{Lock: "l", Removed: "a"}, ""),
		},
		// The quiet spans are 1–10 (cut at 10) and 21–24: 9 ns.
		want: func(r Result) bool { return r.Stats["longest_no_acquire_outside_faults_s"] == 9e-9 },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := c.Check(context.Background(), history.NewTable(tt.h)); !tt.want(r) {
				t.Fatalf("Liveness found %v, %v: the history does not show its rule", r.Anomalies, r.Stats)
			}
		})
	}
}
