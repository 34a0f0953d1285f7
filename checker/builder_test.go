package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/testkit/genhist"
)

// ms converts milliseconds to ns on the history clock.
func ms(n int64) int64 { return n * 1_000_000 }

// builder appends ops to a hand-built history, numbering them in the order
// they are added. Times are given in ms.
type builder struct{ h history.History }

func (b *builder) add(t history.Type, p int, f string, at int64, v history.Value, errText string) int {
	i := len(b.h)
	b.h = append(b.h, history.Op{Index: i, Type: t, Process: p, F: f, Time: ms(at), Value: v, Error: errText})
	return i
}

func (b *builder) invoke(p int, f string, at int64, v history.Value) int {
	return b.add(history.Invoke, p, f, at, v, "")
}

func (b *builder) ok(p int, f string, at int64, v history.Value) int {
	return b.add(history.OK, p, f, at, v, "")
}

func (b *builder) fail(p int, f string, at int64, v history.Value, errText string) int {
	return b.add(history.Fail, p, f, at, v, errText)
}

func (b *builder) info(p int, f string, at int64, v history.Value) int {
	return b.add(history.Info, p, f, at, v, "")
}

// notice appends a lost-lock notice of p about the lease value of lock
// (both "" when it names none), with the client's reason.
func (b *builder) notice(p int, at int64, lock, value, reason string) int {
	return b.add(history.Notice, p, history.Lost, at, history.Value{Lock: lock, LockValue: value}, reason)
}

// fault appends a nemesis fault f of process p, such as "pause-client",
// invoked at at ms and applied 1 ms later to last dur ms.
func (b *builder) fault(f string, p int, at, dur int64) pair {
	target := fmt.Sprintf("p%d", p)
	inv := b.invoke(history.NemesisProcess, f, at, history.Value{Targets: []string{target}})
	return pair{inv, b.ok(history.NemesisProcess, f, at+1, history.Value{Targets: []string{target}, Duration: ms(dur)})}
}

// pair is the indexes of an invocation and its completion.
type pair struct{ inv, done int }

// tok returns a token pointer, or nil for 0 (no token).
func tok(t uint64) *uint64 {
	if t == 0 {
		return nil
	}
	return history.Tok(t)
}

// lv is the lock value of process p's k-th hold.
func lv(p, k int) string { return fmt.Sprintf("p%d-%d", p, k) }

// acquire appends an acquire by p invoked at inv and granted at ok with
// token t (0: none), lock value lv(p, t) and valid_until until ms (0: never
// expires).
func (b *builder) acquire(p int, lock string, inv, ok int64, t uint64, until int64) pair {
	i := b.invoke(p, history.Acquire, inv, history.Value{Lock: lock})
	d := b.ok(p, history.Acquire, ok, history.Value{Lock: lock, Token: tok(t), LockValue: lv(p, int(t)), ValidUntil: ms(until)})
	return pair{i, d}
}

// read appends a read by p that returned n, stored at ok.
func (b *builder) read(p int, lock string, inv, ok int64, n int64) pair {
	i := b.invoke(p, history.Read, inv, history.Value{Lock: lock})
	d := b.ok(p, history.Read, ok, history.Value{Lock: lock, N: history.Num(n), StoreTime: ms(ok)})
	return pair{i, d}
}

// claim appends a check-and-set claim of the resource by p with the lock
// value of its hold with token t, stored at ok.
func (b *builder) claim(p int, lock string, inv, ok int64, t uint64) pair {
	i := b.invoke(p, history.Claim, inv, history.Value{Lock: lock, Token: tok(t), LockValue: lv(p, int(t))})
	d := b.ok(p, history.Claim, ok, history.Value{Lock: lock, Token: tok(t), LockValue: lv(p, int(t)), StoreTime: ms(ok)})
	return pair{i, d}
}

// write appends an accepted write of n by p with token t, stored at store.
func (b *builder) write(p int, lock string, inv, ok int64, n int64, t uint64, store int64) pair {
	i := b.invoke(p, history.Write, inv, history.Value{Lock: lock, N: history.Num(n), Token: tok(t), LockValue: lv(p, int(t))})
	d := b.ok(p, history.Write, ok, history.Value{Lock: lock, N: history.Num(n), Token: tok(t), LockValue: lv(p, int(t)), StoreTime: ms(store)})
	return pair{i, d}
}

// release appends a release by p of its hold with token t that removed
// removed.
func (b *builder) release(p int, lock string, inv, ok int64, t uint64, removed string) pair {
	i := b.invoke(p, history.Release, inv, history.Value{Lock: lock, Token: tok(t), LockValue: lv(p, int(t))})
	d := b.ok(p, history.Release, ok, history.Value{Lock: lock, Removed: removed})
	return pair{i, d}
}

// section is the ops of one clean critical section.
type section struct{ acq, read, write, rel pair }

// section appends a clean critical section of p starting at t ms: acquire
// (token tk, valid for 1s), read n, write n+1, release, 10 ms in all.
func (b *builder) section(p int, lock string, t int64, tk uint64, n int64) section {
	var s section
	s.acq = b.acquire(p, lock, t, t+1, tk, t+1000)
	s.read = b.read(p, lock, t+2, t+3, n)
	s.write = b.write(p, lock, t+4, t+5, n+1, tk, t+5)
	s.rel = b.release(p, lock, t+6, t+7, tk, lv(p, int(tk)))
	return s
}

// cleanHistory is three processes taking lock "x" in turn six times with
// increasing tokens, a failed and an unknown acquire attempt, and a nemesis
// pause in between.
func cleanHistory() history.History {
	var b builder
	b.invoke(history.NemesisProcess, "pause-client", 0, history.Value{Targets: []string{"p2"}})
	b.info(history.NemesisProcess, "pause-client", 1, history.Value{Targets: []string{"p2"}})
	for k := range 6 {
		p := k % 3
		t := int64(100 * (k + 1))
		b.section(p, "x", t, uint64(k+1), int64(k))
		q := (p + 1) % 3
		b.invoke(q, history.Acquire, t+20, history.Value{Lock: "x"})
		if k == 2 {
			b.info(q, history.Acquire, t+30, history.Value{Lock: "x"})
		} else {
			b.fail(q, history.Acquire, t+30, history.Value{Lock: "x"}, "not acquired")
		}
	}
	return b.h
}

// check runs c on h and fails the test if the verdict is unexpected.
func check(t *testing.T, c Checker, h history.History, want Verdict) Result {
	t.Helper()
	r := c.Check(context.Background(), history.NewTable(h))
	if r.Valid != want {
		t.Fatalf("%s: verdict %s, want %s; result %+v", c.Name(), r.Valid, want, r)
	}
	if r.Checker != c.Name() {
		t.Errorf("result names checker %q, want %q", r.Checker, c.Name())
	}
	if r.Anomalies == nil {
		t.Errorf("%s: Anomalies is nil, want empty", c.Name())
	}
	return r
}

// want is an expected anomaly or note: its kind and exact ops.
type want struct {
	kind string
	ops  []int
}

// expect compares got with ws in order.
func expect(t *testing.T, what string, got []Anomaly, ws []want) {
	t.Helper()
	if len(got) != len(ws) {
		t.Fatalf("%s: got %d, want %d: %+v", what, len(got), len(ws), got)
	}
	for i, w := range ws {
		if got[i].Kind != w.kind || !slices.Equal(got[i].Ops, w.ops) {
			t.Errorf("%s[%d]: got %s %v, want %s %v (%s)", what, i, got[i].Kind, got[i].Ops, w.kind, w.ops, got[i].Explanation)
		}
		if got[i].Explanation == "" {
			t.Errorf("%s[%d]: empty explanation", what, i)
		}
	}
}

// expectResult checks r against a table-driven test's wants: its anomalies
// and notes, each stat of stats (-1: the stat must be absent) and, when
// explained is set, the explanation of its first anomaly, or else of its
// first note.
func expectResult(t *testing.T, r Result, anomalies, notes []want, stats map[string]float64, explained string) {
	t.Helper()
	expect(t, "anomalies", r.Anomalies, anomalies)
	expect(t, "notes", r.Notes, notes)
	for k, v := range stats {
		got, ok := r.Stats[k]
		if v < 0 && ok {
			t.Errorf("stat %s = %v, want none", k, got)
		}
		if v >= 0 && got != v {
			t.Errorf("stat %s = %v, want %v", k, got, v)
		}
	}
	if explained == "" {
		return
	}
	got := ""
	switch {
	case len(r.Anomalies) > 0:
		got = r.Anomalies[0].Explanation
	case len(r.Notes) > 0:
		got = r.Notes[0].Explanation
	}
	if got != explained {
		t.Errorf("explanation\n got %s\nwant %s", got, explained)
	}
}

// builtCase is a case of a table-driven test of a checker on a hand-built
// history: what build appends to the history, and what the checker must
// find on it.
type builtCase struct {
	name      string
	mode      string // Resource.Mode, for Resource's cases
	build     func(b *builder) (anomalies, notes []want)
	verdict   Verdict
	stats     map[string]float64 // -1: the stat must be absent
	explained string             // the first anomaly's (or else note's) explanation, when set
}

// runBuilt runs each case of tests as a subtest: the checker that checker
// returns for the case must give, on the history the case builds, its
// verdict, anomalies, notes, stats and explanation (see expectResult).
func runBuilt(t *testing.T, tests []builtCase, checker func(builtCase) Checker) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b builder
			as, ns := tt.build(&b)
			r := check(t, checker(tt), b.h, tt.verdict)
			expectResult(t, r, as, ns, tt.stats, tt.explained)
		})
	}
}

// ops is a readable []int literal.
func ops(is ...int) []int { return is }

func TestGeneratedHistoriesAreValid(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		h := genhist.Valid(seed, 20_000, 16)
		for _, r := range Run(context.Background(), history.NewTable(h), All()...) {
			if r.Valid != Valid {
				t.Errorf("seed %d: %s: %s %v %s", seed, r.Checker, r.Valid, r.Anomalies[:min(3, len(r.Anomalies))], r.Error)
			}
		}
	}
}

// An overlapping generated history has, in every every-th critical
// section, a second holder that the checkers catch: overlapping holds and
// lost updates, one per second holder, and duplicate tokens.
func TestGeneratedOverlapsAreCaught(t *testing.T) {
	const every = 5
	h := genhist.Overlapping(4, 20_000, 16, every)
	rogues := 0
	for _, o := range h {
		if o.F == history.Acquire && o.Type == history.OK && strings.HasSuffix(o.Value.LockValue, "-rogue") {
			rogues++
		}
	}
	if rogues == 0 {
		t.Fatal("no second holder in the history")
	}
	kinds := map[string]int{}
	for _, r := range Run(context.Background(), history.NewTable(h), All()...) {
		for _, a := range r.Anomalies {
			kinds[a.Kind]++
		}
	}
	if kinds[KindOverlappingHolds] != rogues || kinds[KindLostUpdate] != rogues || kinds[KindDuplicateToken] == 0 {
		t.Errorf("%d second holders; anomalies %v", rogues, kinds)
	}
}
