package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/testkit/genhist"
)

// mutexLin is the porcupine mutex checker without a timeout.
var mutexLin = Linearizability{Model: MutexModel}

func TestLinearizableMutex(t *testing.T) {
	tests := []struct {
		name    string
		build   func(b *builder) []want
		verdict Verdict
	}{
		{"sequential holds", func(b *builder) []want {
			b.section(0, "x", 100, 0, 0)
			b.section(1, "x", 200, 0, 1)
			return nil
		}, Valid},
		{"overlapping holds", func(b *builder) []want {
			a := b.acquire(0, "x", 0, 10, 0, 0)
			c := b.acquire(1, "x", 20, 30, 0, 0)
			b.release(0, "x", 40, 50, 0, "")
			b.release(1, "x", 60, 70, 0, "")
			return []want{{"not-linearizable", ops(a.inv, a.done, c.inv, c.done)}}
		}, Invalid},
		{"an acquire granted while a release is in flight", func(b *builder) []want {
			b.acquire(0, "x", 0, 10, 0, 0)
			b.invoke(0, history.Release, 20, history.Value{Lock: "x"})
			b.acquire(1, "x", 15, 25, 0, 0) // p0's release may have taken effect at 20
			b.ok(0, history.Release, 30, history.Value{Lock: "x"})
			return nil
		}, Valid},
		{"holds that touch at one ns", func(b *builder) []want {
			b.acquire(0, "x", 0, 10, 0, 0)
			b.release(0, "x", 20, 30, 0, "")
			b.acquire(1, "x", 5, 20, 0, 0)
			return nil
		}, Valid},
		{"two locks are separate", func(b *builder) []want {
			b.acquire(0, "x", 0, 10, 0, 0)
			b.acquire(1, "y", 0, 10, 0, 0)
			return nil
		}, Valid},
		{"a failed acquire had no effect", func(b *builder) []want {
			b.invoke(0, history.Acquire, 0, history.Value{Lock: "x"})
			b.fail(0, history.Acquire, 10, history.Value{Lock: "x"}, "not acquired")
			b.acquire(1, "x", 20, 30, 0, 0)
			return nil
		}, Valid},
		{"an unknown release may have freed the lock", func(b *builder) []want {
			b.acquire(0, "x", 0, 10, 0, 0)
			b.invoke(0, history.Release, 20, history.Value{Lock: "x"})
			b.info(0, history.Release, 30, history.Value{Lock: "x"})
			b.acquire(1, "x", 100, 110, 0, 0)
			return nil
		}, Valid},
		{"a failed release left the lock held", func(b *builder) []want {
			a := b.acquire(0, "x", 0, 10, 0, 0)
			b.invoke(0, history.Release, 20, history.Value{Lock: "x"})
			b.fail(0, history.Release, 30, history.Value{Lock: "x"}, "refused")
			c := b.acquire(1, "x", 100, 110, 0, 0)
			return []want{{"not-linearizable", ops(a.inv, a.done, c.inv, c.done)}}
		}, Invalid},
		{"an unknown acquire that would explain a release by its process", func(b *builder) []want {
			b.invoke(0, history.Acquire, 0, history.Value{Lock: "x"})
			b.info(0, history.Acquire, 10, history.Value{Lock: "x"})
			b.release(0, "x", 20, 30, 0, "")
			b.acquire(1, "x", 40, 50, 0, 0)
			return nil
		}, Valid},
		{"a release by a process that does not hold the lock", func(b *builder) []want {
			b.acquire(0, "x", 0, 10, 0, 0)
			r := b.release(1, "x", 20, 30, 0, "")
			return []want{{"not-linearizable", ops(0, 1, r.inv, r.done)}}
		}, Invalid},
		{"an acquire that never completed is of unknown outcome", func(b *builder) []want {
			b.acquire(0, "x", 0, 10, 0, 0)
			b.release(0, "x", 20, 30, 0, "")
			b.invoke(1, history.Acquire, 40, history.Value{Lock: "x"})
			b.acquire(2, "x", 50, 60, 0, 0)
			return nil
		}, Valid},
	}
	for _, tt := range tests {
		for _, size := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/window=%d", tt.name, size), func(t *testing.T) {
				var b builder
				ws := tt.build(&b)
				c := mutexLin
				c.WindowOps = size
				r := check(t, c, b.h, tt.verdict)
				if size == 1 {
					// A window may start after the ops that prove it.
					for i := range ws {
						ws[i].ops = r.Anomalies[i].Ops
					}
				}
				expect(t, "anomalies", r.Anomalies, ws)
			})
		}
	}
}

func TestLinearizableRegister(t *testing.T) {
	reg := Linearizability{Model: RegisterModel}
	tests := []struct {
		name    string
		build   func(b *builder)
		verdict Verdict
	}{
		{"clean sections", func(b *builder) { b.h = cleanHistory() }, Valid},
		{"a read of a value never written", func(b *builder) {
			b.read(0, "x", 0, 10, 5)
		}, Invalid},
		{"a read of an overwritten value", func(b *builder) {
			b.write(0, "x", 0, 10, 1, 0, 5)
			b.write(1, "x", 20, 30, 2, 0, 25)
			b.read(2, "x", 40, 50, 1)
		}, Invalid},
		{"a read concurrent with a write sees either", func(b *builder) {
			b.write(0, "x", 0, 10, 1, 0, 5)
			b.invoke(1, history.Write, 20, history.Value{Lock: "x", N: history.Num(2)})
			b.read(2, "x", 21, 22, 1)
			b.ok(1, history.Write, 30, history.Value{Lock: "x", N: history.Num(2)})
		}, Valid},
		{"a write of unknown outcome may apply late", func(b *builder) {
			b.invoke(0, history.Write, 0, history.Value{Lock: "x", N: history.Num(7)})
			b.info(0, history.Write, 10, history.Value{Lock: "x", N: history.Num(7)})
			b.read(1, "x", 20, 30, 0)
			b.read(1, "x", 40, 50, 7)
		}, Valid},
		{"a rejected write had no effect", func(b *builder) {
			b.invoke(0, history.Write, 0, history.Value{Lock: "x", N: history.Num(7)})
			b.fail(0, history.Write, 10, history.Value{Lock: "x", N: history.Num(7)}, "rejected: token 1 < 2")
			b.read(1, "x", 20, 30, 7)
		}, Invalid},
	}
	for _, tt := range tests {
		for _, size := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/window=%d", tt.name, size), func(t *testing.T) {
				var b builder
				tt.build(&b)
				c := reg
				c.WindowOps = size
				r := check(t, c, b.h, tt.verdict)
				if tt.verdict == Invalid && (len(r.Anomalies) != 1 || r.Anomalies[0].Kind != "not-linearizable") {
					t.Errorf("anomalies %+v, want one not-linearizable", r.Anomalies)
				}
			})
		}
	}
}

func TestLinearizableCutsWindows(t *testing.T) {
	h := genhist.Valid(3, 20_000, 8)
	c := Linearizability{Model: MutexModel, WindowOps: 500}
	r := check(t, c, h, Valid)
	if r.Stats["windows"] < 5 || r.Stats["largest_window"] > 1000 {
		t.Errorf("stats %v: want many windows of about 500 ops", r.Stats)
	}
	// Every window cut must lose nothing: an overlap planted late in the
	// history is still found.
	p := plantOverlap(h)
	r = check(t, c, p, Invalid)
	if len(r.Anomalies) != 1 || !strings.Contains(r.Anomalies[0].Explanation, `"planted"`) {
		t.Errorf("anomalies %+v, want one on lock planted", r.Anomalies)
	}
}

// plantOverlap returns h with two overlapping session holds of lock
// "planted" by two new processes appended after everything else.
func plantOverlap(h history.History) history.History {
	h = append(history.History(nil), h...)
	end := int64(0)
	for _, o := range h {
		end = max(end, o.Time)
	}
	add := func(typ history.Type, p int, f string, at int64, v history.Value) {
		h = append(h, history.Op{Index: len(h), Type: typ, Process: p, F: f, Time: end + at, Value: v})
	}
	v := history.Value{Lock: "planted"}
	add(history.Invoke, 1000, history.Acquire, 1, v)
	add(history.OK, 1000, history.Acquire, 2, v)
	add(history.Invoke, 1001, history.Acquire, 3, v)
	add(history.OK, 1001, history.Acquire, 4, v)
	return h
}

func TestLinearizableNeverValidWhenItCannotFinish(t *testing.T) {
	// Too long to cut: p0's release of unknown outcome may take effect
	// whenever p0 holds the lock again, and p0 goes on taking it, so the
	// state is never certain after it.
	var b builder
	b.acquire(0, "x", 0, 1, 0, 0)
	u := b.invoke(0, history.Release, 2, history.Value{Lock: "x"})
	b.info(0, history.Release, 3, history.Value{Lock: "x"})
	for k := range 50 {
		b.section(k%3, "x", int64(10+10*k), 0, 0)
	}
	c := Linearizability{Model: MutexModel, WindowOps: 10, MaxWindowOps: 100}
	r := check(t, c, b.h, Unknown)
	if want := fmt.Sprintf("every cut tried was prevented by op %d (process 0's release (invoked at 0.002s, of unknown outcome))", u); !strings.Contains(r.Error, "could not be cut") || !strings.Contains(r.Error, want) {
		t.Errorf("error %q, want one naming op %d: %q", r.Error, u, want)
	}

	// A search porcupine cannot finish in time: 24 concurrent writes of
	// distinct values, each read back by a concurrent read, and a final
	// read of a value nobody wrote, which only the exhaustive search
	// refutes.
	b = builder{}
	for p := range 24 {
		b.invoke(p, history.Write, 0, history.Value{Lock: "x", N: history.Num(int64(p + 1))})
	}
	for p := range 24 {
		b.ok(p, history.Write, 100, history.Value{Lock: "x", N: history.Num(int64(p + 1))})
	}
	for p := range 24 {
		b.invoke(p, history.Read, 100, history.Value{Lock: "x"})
	}
	for p := range 24 {
		b.ok(p, history.Read, 100, history.Value{Lock: "x", N: history.Num(int64((p+7)%24 + 1))})
	}
	b.read(99, "x", 200, 210, 1000)
	start := time.Now()
	r = check(t, Linearizable(RegisterModel, 200*time.Millisecond), b.h, Unknown)
	if !strings.Contains(r.Error, "did not finish") {
		t.Errorf("error %q", r.Error)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a 200ms timeout took %s", d)
	}

	// And a done ctx stops it at once.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r = Linearizable(RegisterModel, 0).Check(ctx, history.NewTable(b.h))
	if r.Valid != Unknown || !strings.Contains(r.Error, "cancel") {
		t.Errorf("with a done ctx: %s %q", r.Valid, r.Error)
	}
}

// disagree reports whether the fast checker and porcupine's mutex model
// give different definite verdicts on h.
func disagree(h history.History, window int) (bool, string) {
	fast := MutualExclusion{}.Check(context.Background(), history.NewTable(h))
	lin := Linearizability{Model: MutexModel, WindowOps: window, Timeout: 10 * time.Second}.Check(context.Background(), history.NewTable(h))
	if lin.Valid == Unknown || fast.Valid == Unknown {
		return false, ""
	}
	return fast.Valid != lin.Valid, fmt.Sprintf("mutual-exclusion %s %v, linearizable-mutex %s %v", fast.Valid, fast.Anomalies, lin.Valid, lin.Anomalies)
}

// inDomain reports whether h is in the domain where both mutex checkers
// apply: no process invokes an acquire of a lock it holds (the fast checker
// would end its hold there, the mutex model would refuse the second
// acquire), and none releases a lock it does not hold.
func inDomain(h history.History) bool {
	type pl struct {
		p int
		l string
	}
	holds := map[pl]bool{}
	pair := h.Pair()
	for i, o := range h {
		if o.Type != history.Invoke {
			continue
		}
		k := pl{o.Process, o.Value.Lock}
		switch o.F {
		case history.Acquire:
			if holds[k] {
				return false
			}
			holds[k] = pair[i] >= 0 && h[pair[i]].Type == history.OK
		case history.Release:
			if !holds[k] {
				return false
			}
			holds[k] = false
		}
	}
	return true
}

// shrink returns a smallest history it can find, by removing whole ops
// (an invocation with its completion, or a completion alone) from h, for
// which bad still holds. The result is well-formed and re-indexed.
func shrink(h history.History, bad func(history.History) bool) history.History {
	for {
		progress := false
		pair := h.Pair()
		for i := len(h) - 1; i >= 0 && !progress; i-- {
			drop := map[int]bool{i: true}
			if h[i].Type == history.Invoke && pair[i] >= 0 {
				drop[pair[i]] = true
			}
			var c history.History
			for j, o := range h {
				if !drop[j] {
					o.Index = len(c)
					c = append(c, o)
				}
			}
			if wellFormed(c) && bad(c) {
				h, progress = c, true
			}
		}
		if !progress {
			return h
		}
	}
}

// wellFormed reports whether the recorder accepts h: no double invoke, no
// completion without its invoke.
func wellFormed(h history.History) bool {
	r := history.NewRecorder(nil)
	for _, o := range h {
		if _, err := r.Record(o); err != nil {
			return false
		}
	}
	return true
}

// shrunkFailures counts the failures a property test finds on random
// histories; the third stops the test.
type shrunkFailures int

// report fails t with what was wrong with h, shown on min, the smallest
// history h shrank to that still has it; the third report stops t.
func (f *shrunkFailures) report(t *testing.T, what string, h, min history.History) {
	t.Helper()
	t.Errorf("%s; shrunk from %d to %d ops:%s", what, len(h), len(min), render(min))
	if *f++; *f == 3 {
		t.Fatal("stopping after 3 failures")
	}
}

// render renders h one op a line, each on a new indented line.
func render(h history.History) string {
	var b strings.Builder
	for _, o := range h {
		b.WriteString("\n\t" + o.String())
	}
	return b.String()
}

// TestMutexCheckersAgree is the differential test: on thousands of seeded
// random small histories, some with a planted violation, the fast
// mutual-exclusion checker and the porcupine mutex model (with windows of
// every size) give the same verdict. A disagreement is shrunk to a minimal
// history and printed.
func TestMutexCheckersAgree(t *testing.T) {
	n := 5000
	if testing.Short() {
		n = 500
	}
	rng := rand.New(rand.NewPCG(6, 6))
	invalid := 0
	var failures shrunkFailures
	for i := range n {
		plant := rng.IntN(3) == 0
		window := []int{0, 1, 3}[i%3]
		h := genSmall(rng, plant)
		bad, why := disagree(h, window)
		if (MutualExclusion{}).Check(context.Background(), history.NewTable(h)).Valid == Invalid {
			invalid++
		}
		if !bad {
			continue
		}
		min := shrink(h, func(c history.History) bool { b, _ := disagree(c, window); return b && inDomain(c) })
		_, why = disagree(min, window)
		failures.report(t, fmt.Sprintf("history %d (window %d): %s", i, window, why), h, min)
	}
	if invalid < n/20 {
		t.Errorf("only %d of %d histories had a violation: the generator plants too few", invalid, n)
	}
	t.Logf("%d histories, %d with a violation", n, invalid)
}

func TestShrinkFindsAMinimalHistory(t *testing.T) {
	// With "has an overlap" as the property, a planted overlap shrinks to
	// its two acquires.
	h := plantOverlap(genhist.Valid(9, 300, 4))
	bad := func(c history.History) bool {
		return MutualExclusion{}.Check(context.Background(), history.NewTable(c)).Valid == Invalid
	}
	min := shrink(h, bad)
	if len(min) != 4 || !bad(min) {
		t.Fatalf("shrunk to %d ops:%s", len(min), render(min))
	}
	if _, err := history.Decode(strings.NewReader(lines(min))); err != nil {
		t.Fatalf("the shrunk history is malformed: %v", err)
	}
}

// lines renders h as a JSON-lines file.
func lines(h history.History) string {
	var b strings.Builder
	for _, o := range h {
		b.WriteString(o.String() + "\n")
	}
	return b.String()
}
