package checker

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/history"
)

var windowRuns = flag.Int("window-runs", 3000, "random histories TestWindowsLoseNothing checks per model")

// genSessionLock returns a small random history of a simulated blocking
// session lock over one or two locks: processes acquire (an acquire waits
// while the lock is held, and ends ok, failed or of unknown outcome), hold,
// and release (ok, or of unknown outcome); the nemesis kills processes
// (kill-client, which may fail), whose open op the pool then completes as
// "worker exited", and whose lock the service frees; now and then a
// process dies with no kill, or a killed process's id is used again. Times
// often tie. With plant, the service now and then grants a held lock or
// accepts a release by a process that does not hold it.
func genSessionLock(rng *rand.Rand, plant bool) history.History {
	return genLocks(rng, plant, true)
}

// genSmall returns a small random history in the domain where the fast
// mutual-exclusion checker and the porcupine mutex model both apply: as
// genSessionLock's, but with no kills or deaths and no release by a
// process that did not acquire, and every acquire answered (ok, failed or
// unknown) at its process's next step, so every hold ends by its holder's
// release (ok or info) and no acquire outcome is believed by a process that
// holds the lock. With plant, the service now and then grants a held lock.
func genSmall(rng *rand.Rand, plant bool) history.History {
	return genLocks(rng, plant, false)
}

// genLocks is genSessionLock with session, genSmall without.
func genLocks(rng *rand.Rand, plant, session bool) history.History {
	s := newSim(rng)
	var b builder
	now := int64(0)
	kill := -1 // the target of the kill in progress
	die := func(p int, why string) {
		st := &s.ws[p]
		if st.state == acquiring || st.state == releasing {
			f := history.Acquire
			if st.state == releasing {
				f = history.Release
			}
			b.add(history.Info, p, f, now, history.Value{Lock: st.lock}, why)
		}
		s.free(p)
		st.state = dead
		if rng.IntN(5) == 0 {
			st.state = idle // the id is used again
		}
	}
	steps := 8 + rng.IntN(40)
	if !session {
		steps = 6 + rng.IntN(20)
	}
	for range steps {
		if rng.IntN(3) != 0 {
			now++ // now and then two events share a ns
		}
		if session && rng.IntN(8) == 0 {
			switch {
			case kill < 0:
				kill = rng.IntN(len(s.ws))
				b.invoke(history.NemesisProcess, "kill-client", now, history.Value{})
			case rng.IntN(6) == 0:
				b.fail(history.NemesisProcess, "kill-client", now, history.Value{Targets: []string{fmt.Sprintf("p%d", kill)}}, "not applied")
				kill = -1
			default:
				if s.ws[kill].state != dead {
					die(kill, "worker exited: signal: killed")
				}
				b.ok(history.NemesisProcess, "kill-client", now, history.Value{Targets: []string{fmt.Sprintf("p%d", kill)}})
				kill = -1
			}
			continue
		}
		p := rng.IntN(len(s.ws))
		st := &s.ws[p]
		if session && st.state != dead && rng.IntN(40) == 0 {
			die(p, "worker exited: exit status 1")
			continue
		}
		v := history.Value{Lock: st.lock}
		switch st.state {
		case idle:
			st.lock = s.locks[rng.IntN(len(s.locks))]
			f := history.Acquire
			if session && plant && rng.IntN(10) == 0 {
				f = history.Release // by a process that does not hold it
				st.state = releasing
			} else {
				st.state = acquiring
			}
			b.invoke(p, f, now, history.Value{Lock: st.lock})
		case acquiring:
			h := s.holder[st.lock]
			switch r := rng.IntN(10); {
			case r == 0:
				if h < 0 && rng.IntN(2) == 0 {
					s.holder[st.lock] = p
				}
				b.info(p, history.Acquire, now, v)
				st.state = idle
			case h < 0 || (plant && h != p && (r == 1 || !session && r < 4)):
				s.holder[st.lock] = p
				b.ok(p, history.Acquire, now, v)
				st.state = holding
			case r < 4 || !session:
				b.fail(p, history.Acquire, now, v, "not acquired")
				st.state = idle
			default: // it goes on waiting
			}
		case holding:
			b.invoke(p, history.Release, now, v)
			st.state = releasing
		case releasing:
			if rng.IntN(8) == 0 {
				if rng.IntN(2) == 0 && s.holder[st.lock] == p {
					s.holder[st.lock] = -1
				}
				b.info(p, history.Release, now, v)
			} else {
				if s.holder[st.lock] == p {
					s.holder[st.lock] = -1
				}
				b.ok(p, history.Release, now, v)
			}
			st.state = idle
		}
	}
	return b.h
}

// genRegister returns a small random history of a simulated register per
// lock, read and written by several processes at once with values from a
// small range (so that values repeat): a write ok takes effect at its
// completion or a little before, one of unknown outcome now, later or
// never, a rejected one never. With plant, a read now and then returns a
// value the register did not hold.
func genRegister(rng *rand.Rand, plant bool) history.History {
	procs := 2 + rng.IntN(3)
	locks := []string{"x", "y"}[:1+rng.IntN(2)]
	type proc struct {
		open bool
		f    string
		lock string
		n    int64
	}
	ps := make([]proc, procs)
	reg := map[string]int64{}
	var late []func() // unknown writes that may still take effect
	var b builder
	now := int64(0)
	steps := 8 + rng.IntN(40)
	for range steps {
		if rng.IntN(3) != 0 {
			now++
		}
		if len(late) > 0 && rng.IntN(6) == 0 {
			i := rng.IntN(len(late))
			late[i]()
			late = slices.Delete(late, i, i+1)
		}
		p := rng.IntN(procs)
		st := &ps[p]
		if !st.open {
			st.open, st.lock = true, locks[rng.IntN(len(locks))]
			st.f, st.n = history.Read, 0
			v := history.Value{Lock: st.lock}
			if rng.IntN(2) == 0 {
				st.f, st.n = history.Write, int64(rng.IntN(4))
				v.N = history.Num(st.n)
				if rng.IntN(3) == 0 {
					reg[st.lock] = st.n // taken before its reply
				}
			}
			b.invoke(p, st.f, now, v)
			continue
		}
		st.open = false
		v := history.Value{Lock: st.lock}
		if st.f == history.Read {
			n := reg[st.lock]
			if plant && rng.IntN(8) == 0 {
				n = int64(rng.IntN(5))
			}
			v.N = history.Num(n)
			b.ok(p, history.Read, now, v)
			continue
		}
		v.N = history.Num(st.n)
		switch r := rng.IntN(8); {
		case r == 0:
			b.fail(p, history.Write, now, v, "rejected: token")
		case r <= 2:
			lock, n := st.lock, st.n
			if rng.IntN(2) == 0 {
				late = append(late, func() { reg[lock] = n })
			}
			b.info(p, history.Write, now, v)
		default:
			reg[st.lock] = st.n
			b.ok(p, history.Write, now, v)
		}
	}
	return b.h
}

// windowRunCount is how many random histories a property of the windows
// checks: -window-runs, or a tenth of it with -short.
func windowRunCount() int {
	if testing.Short() {
		return *windowRuns / 10
	}
	return *windowRuns
}

// expectBalanced fails t unless invalid, the histories of n that are not
// linearizable, are between a tenth and nine tenths of them: a generator
// must exercise both verdicts.
func expectBalanced(t *testing.T, invalid, n int) {
	t.Helper()
	if invalid < n/10 || invalid > n*9/10 {
		t.Errorf("%d of %d histories are not linearizable: the generator is off balance", invalid, n)
	}
}

// unwindowed is the reference verdict of m on h: porcupine on each lock's
// ops whole, from the model's initial state, with no window and no op
// left out.
func unwindowed(t testing.TB, m Model, h history.History) Verdict {
	t.Helper()
	tab := history.NewTable(h)
	byLock, err := m.allOps(context.Background(), tab, true)
	if err != nil {
		t.Fatal(err)
	}
	model := m.porcupineModel(new(atomic.Bool))
	for l, ops := range byLock {
		if len(ops) == 0 {
			continue
		}
		if !porcupine.CheckOperations(model, window{lock: l, init: init0(m), ops: ops}.porcupineOps(tab, 0)) {
			return Invalid
		}
	}
	return Valid
}

// windowsDisagree reports whether m's checker with windows of size ops
// gives h another verdict than the unwindowed reference, and how.
func windowsDisagree(t testing.TB, m Model, h history.History, size int) (bool, string) {
	want := unwindowed(t, m, h)
	r := Linearizability{Model: m, WindowOps: size}.Check(context.Background(), history.NewTable(h))
	if r.Valid == want {
		return false, ""
	}
	return true, fmt.Sprintf("windows of %d: %s (%s, %v), unwindowed: %s", size, r.Valid, r.Error, r.Stats, want)
}

// TestWindowsLoseNothing is the property the windows rest on: on many
// random small histories — session locks with waiters, unknown outcomes,
// kills and planted violations; registers with concurrent and unknown
// writes of repeating values — the verdict with windows of 1 to 4 ops,
// cut wherever a cut is allowed, is the verdict of porcupine on the whole
// history. A disagreement is shrunk to a minimal history and printed.
func TestWindowsLoseNothing(t *testing.T) {
	for _, m := range []Model{MutexModel, RegisterModel} {
		t.Run(string(m), func(t *testing.T) {
			gen := genSessionLock
			if m == RegisterModel {
				gen = genRegister
			}
			rng := rand.New(rand.NewPCG(14, 1))
			n := windowRunCount()
			invalid, cut := 0, 0
			var failures shrunkFailures
			for i := range n {
				h := gen(rng, rng.IntN(3) == 0)
				if unwindowed(t, m, h) == Invalid {
					invalid++
				}
				if r := (Linearizability{Model: m, WindowOps: 1}).Check(context.Background(), history.NewTable(h)); r.Stats["windows"] > r.Stats["ops"]/4 {
					cut++
				}
				for size := 1; size <= 4; size++ {
					bad, why := windowsDisagree(t, m, h, size)
					if !bad {
						continue
					}
					min := shrink(h, func(c history.History) bool { b, _ := windowsDisagree(t, m, c, size); return b })
					_, why = windowsDisagree(t, m, min, size)
					failures.report(t, fmt.Sprintf("history %d: %s", i, why), h, min)
					break
				}
			}
			// The generator must exercise both verdicts and the cuts.
			expectBalanced(t, invalid, n)
			if cut < n/4 {
				t.Errorf("only %d of %d histories were cut into many windows", cut, n)
			}
			t.Logf("%d histories, %d not linearizable, %d cut into many windows", n, invalid, cut)
		})
	}
}

// FuzzWindows checks the same property on fuzzed histories (see
// fuzzHistory), for both models: `go test -fuzz FuzzWindows ./checker/`.
func FuzzWindows(f *testing.F) {
	f.Add([]byte{1, 0, 0, 1, 1, 0, 0, 2, 2, 0, 0, 3, 2, 0, 0, 4})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox"))
	f.Add([]byte{5, 3, 0x19, 9, 5, 0x40, 0x19, 1, 0, 0xe3, 0x3f, 255, 0, 0x80, 2, 3})
	f.Add([]byte{0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 2, 0, 0, 1, 1, 1, 0, 1, 2, 0, 0, 1, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4*32 {
			t.Skip("the unwindowed search may take exponential time on long histories")
		}
		h := fuzzHistory(data)
		for _, m := range []Model{MutexModel, RegisterModel} {
			for size := 1; size <= 3; size++ {
				if bad, why := windowsDisagree(t, m, h, size); bad {
					t.Fatalf("%s: %s:%s", m, why, render(h))
				}
			}
		}
	})
}

// layout renders the windows of m's ops of h, cut at every op where a cut
// is allowed (windows of 1 op), one a line: the state it starts from and
// its ops — the history index of each op's invocation (a death: of the op
// that shows it) after a letter for its kind (a acquire, r release, d
// death, R read, W write) and a ? for an unknown outcome.
func layout(t *testing.T, m Model, h history.History) string {
	t.Helper()
	byLock, err := m.ops(context.Background(), history.NewTable(h))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range slices.Sorted(maps.Keys(byLock)) {
		for _, w := range m.windows(l, byLock[l], 1) {
			fmt.Fprintf(&b, "%s from %s:", l, m.describeState(w.init))
			for _, op := range w.ops {
				fmt.Fprintf(&b, " %c%d", op.in.kind, h[op.inv].Index)
				if op.out.unknown {
					b.WriteByte('?')
				}
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestWindowCuts checks where the mutex windows are cut in the golden
// histories of blocking session locks, against testdata/windows.golden
// (rewritten with -update-golden; review its diff): a blocking lock that
// always has an acquire waiting is cut at each holder; a killed holder's
// death is cut after once another's acquire proved it; a violation after
// cuts is found whatever the window size.
func TestWindowCuts(t *testing.T) {
	var out strings.Builder
	for _, tc := range []struct {
		file    string
		valid   Verdict
		windows int // at least, with windows of 1 op
	}{
		{"always-waiting.jsonl", Valid, 9},
		{"killed-holder.jsonl", Valid, 4},
		{"violation-after-cuts.jsonl", Invalid, 5},
	} {
		h, err := history.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		l := layout(t, MutexModel, h)
		fmt.Fprintf(&out, "%s\n%s\n", tc.file, l)
		if n := strings.Count(l, "\n"); n < tc.windows {
			t.Errorf("%s: %d windows of 1 op, want at least %d:\n%s", tc.file, n, tc.windows, l)
		}
		for _, size := range []int{1, 2, 3, 0} {
			r := Linearizability{Model: MutexModel, WindowOps: size}.Check(context.Background(), history.NewTable(h))
			if r.Valid != tc.valid {
				t.Errorf("%s, windows of %d: %s, want %s (%s)", tc.file, size, r.Valid, tc.valid, r.Error)
			}
		}
	}
	path := filepath.Join("testdata", "windows.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("the windows differ from %s (run with -update-golden and review the diff):\n%s", path, out.String())
	}
}

// TestWindowRuleGuards: hand-built histories, each where one guard of a
// cut rule (windows.go) is what keeps the cut sound — a cut taken without
// it gives a verdict the whole history does not have.
func TestWindowRuleGuards(t *testing.T) {
	x := history.Value{Lock: "x"}
	kill := func(b *builder, p int, inv, ok int64) {
		b.invoke(history.NemesisProcess, "kill-client", inv, history.Value{})
		b.ok(history.NemesisProcess, "kill-client", ok, history.Value{Targets: []string{fmt.Sprintf("p%d", p)}})
	}
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		want  Verdict
	}{
		{"an acquire ok pending at the cut, of a process whose death was not yet proven", func(b *builder) {
			// p1 is killed at 2 (its death proven only by p0's grant at
			// 6); its id acquires again from 4. Whole: p1's acquire, then
			// the death frees x, then p0's. At 8 (p2's call) p0 holds, but
			// p1's pending acquire may have been taken before p0's.
			kill(b, 1, 2, 3)
			b.invoke(1, history.Acquire, 4, x)
			b.acquire(0, "x", 5, 6, 0, 0)
			b.invoke(2, history.Acquire, 8, x)
			b.ok(1, history.Acquire, 10, x)
			b.release(0, "x", 20, 21, 0, "")
			b.ok(2, history.Acquire, 22, x)
		}, Valid},
		{"a release ok pending at the cut, whose process acquires again as it returns", func(b *builder) {
			// At 3 p0 holds and p1's release is pending; p1 acquires
			// again at the very ns its release returns, so the release
			// may be taken after that acquire, after the cut.
			b.acquire(0, "x", 0, 1, 0, 0)
			b.invoke(1, history.Release, 2, x)
			b.release(0, "x", 3, 4, 0, "")
			b.ok(1, history.Release, 10, x)
			b.acquire(1, "x", 10, 11, 0, 0)
		}, Valid},
		{"a death pending at the cut, of a process that acquires again", func(b *builder) {
			// p1 dies at 6 (killed; its id is used again); the death is
			// proven only by p2's grant at 14, and may free the lock p1
			// takes at 11.5: it cannot be put before the cut at 8.
			b.acquire(1, "x", 0, 1, 0, 0)
			b.release(1, "x", 2, 3, 0, "")
			b.acquire(0, "x", 4, 5, 0, 0)
			kill(b, 1, 6, 7)
			b.invoke(3, history.Acquire, 8, x)
			b.fail(3, history.Acquire, 9, x, "not acquired")
			b.invoke(1, history.Acquire, 9, x)
			b.release(0, "x", 10, 11, 0, "")
			b.ok(1, history.Acquire, 12, x)
			b.acquire(2, "x", 13, 14, 0, 0)
		}, Valid},
		{"an unknown acquire pending at the cut whose process releases ok later", func(b *builder) {
			// p1's acquire of unknown outcome is pending at every cut
			// while p0 holds; its release ok at 30 needs it to have
			// taken effect after p0's release: it cannot be put before.
			b.acquire(0, "x", 0, 1, 0, 0)
			b.invoke(1, history.Acquire, 2, x)
			b.info(1, history.Acquire, 3, x)
			b.invoke(2, history.Acquire, 4, x)
			b.fail(2, history.Acquire, 5, x, "not acquired")
			b.release(0, "x", 10, 11, 0, "")
			b.release(1, "x", 30, 31, 0, "")
		}, Valid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			tc.build(&b)
			if !wellFormed(b.h) {
				t.Fatalf("malformed:%s", render(b.h))
			}
			if got := unwindowed(t, MutexModel, b.h); got != tc.want {
				t.Fatalf("unwindowed: %s, want %s", got, tc.want)
			}
			for size := 1; size <= 3; size++ {
				if bad, why := windowsDisagree(t, MutexModel, b.h, size); bad {
					t.Errorf("%s:%s", why, render(b.h))
				}
			}
		})
	}
}
