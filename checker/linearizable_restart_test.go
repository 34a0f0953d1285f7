package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/history"
)

// TestServerRestartCutsTheWindows checks that a crash of the one server of
// session locks, and its restart, let the mutex windows be cut after it:
// without ServerSessions, the release of unknown outcome that the holder
// began before the kill stays pending for ever, its process goes on taking
// the lock, and no cut after it is sound, so windows of at most 8 ops
// cannot be had and the verdict is unknown; with it, that release is over
// by the restart, and the verdict is valid. The holder that was still
// working when the server came back is found invalid either way.
func TestServerRestartCutsTheWindows(t *testing.T) {
	for _, tc := range []struct {
		file                 string
		sessions             bool
		want                 Verdict
		minWindows           float64
		errorHas, blockerHas string
	}{
		{"server-restart.jsonl", false, Unknown, 0, "could not be cut", "process 1's release (invoked at 0.020s, of unknown outcome)"},
		{"server-restart.jsonl", true, Valid, 6, "", ""},
		{"server-restart-holder-working.jsonl", false, Invalid, 0, "", ""},
		{"server-restart-holder-working.jsonl", true, Invalid, 0, "", ""},
	} {
		t.Run(fmt.Sprintf("%s/sessions=%v", strings.TrimSuffix(tc.file, ".jsonl"), tc.sessions), func(t *testing.T) {
			h, err := history.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			c := Linearizability{Model: MutexModel, WindowOps: 1, MaxWindowOps: 8, ServerSessions: tc.sessions}
			r := c.Check(context.Background(), history.NewTable(h))
			if r.Valid != tc.want || r.Stats["windows"] < tc.minWindows ||
				!strings.Contains(r.Error, tc.errorHas) || !strings.Contains(r.Error, tc.blockerHas) {
				t.Fatalf("%s in %v windows (%s), want %s in at least %v", r.Valid, r.Stats["windows"], r.Error, tc.want, tc.minWindows)
			}
		})
	}
}

// TestDecideToldOfServerSessions checks that Decide hands the run's
// ServerSessions to the mutex checker: a blocking session lock taken in
// turn by three processes for 12,000 holds, with a server crash after the
// 2,000th at which the holder's release ends of unknown outcome, has more
// mutex ops after the crash than a window may hold, so it is valid only
// when the restart lets the windows be cut.
func TestDecideToldOfServerSessions(t *testing.T) {
	var b builder
	x := history.Value{Lock: "x"}
	b.acquire(0, "x", 0, 1, 0, 0)
	b.invoke(1, history.Acquire, 2, x)
	b.invoke(2, history.Acquire, 3, x)
	at := int64(10)
	for k := range 12000 {
		h, n := k%3, (k+1)%3
		if k == 2000 {
			// h begins its release; the server dies; h's release and the
			// waiters' acquires end unknown; the server comes back.
			b.invoke(h, history.Release, at, x)
			b.invoke(history.NemesisProcess, "kill-node", at+1, history.Value{})
			b.add(history.Info, h, history.Release, at+2, x, "invalid connection")
			for _, w := range []int{n, 3 - h - n} {
				b.add(history.Info, w, history.Acquire, at+2, x, "invalid connection")
			}
			b.ok(history.NemesisProcess, "kill-node", at+3, history.Value{Targets: []string{"n1"}})
			b.invoke(history.NemesisProcess, "restart-node", at+1000, history.Value{})
			b.ok(history.NemesisProcess, "restart-node", at+1100, history.Value{Targets: []string{"n1"}})
			at += 1101
			b.invoke(n, history.Acquire, at, x)
			b.ok(n, history.Acquire, at+1, x)
			b.invoke(h, history.Acquire, at+2, x)
			b.invoke(3-h-n, history.Acquire, at+3, x)
			at += 10
			continue
		}
		b.release(h, "x", at, at+1, 0, "")
		b.ok(n, history.Acquire, at+2, x)
		b.invoke(h, history.Acquire, at+3, x)
		at += 10
	}
	tab := history.NewTable(b.h)
	for _, sessions := range []bool{false, true} {
		d := Decide(context.Background(), tab, RunFacts{Mode: "none", Faults: []string{"kill-node"}, ServerSessions: sessions}, 0)
		var lin Result
		for _, r := range d.Results {
			if r.Checker == "linearizable-mutex" {
				lin = r
			}
		}
		want := map[bool]Verdict{false: Unknown, true: Valid}[sessions]
		if d.Valid != want || lin.Valid != want {
			t.Errorf("server sessions %v: run %s, linearizable-mutex %s (%s %v), want %s", sessions, d.Valid, lin.Valid, lin.Error, lin.Stats, want)
		}
	}
}

// genRestarts returns a random session-lock history of genSessionLock with
// crashes of the server among its ops: a kill-node that completes ok (or,
// now and then, fails), and after it a restart-node, as the nemesis of a
// one-node session-lock backend records them.
func genRestarts(rng *rand.Rand, plant bool) history.History {
	h := genSessionLock(rng, plant)
	var out history.History
	add := func(o history.Op) {
		o.Index = len(out)
		out = append(out, o)
	}
	nem := func(t history.Type, f string, at int64, v history.Value) {
		add(history.Op{Type: t, Process: history.NemesisProcess, F: f, Time: at, Value: v})
	}
	down := false
	for _, o := range h {
		if o.Process != history.NemesisProcess && rng.IntN(10) == 0 {
			// Between two ops, at the earlier one's time.
			at := o.Time
			if !down {
				nem(history.Invoke, "kill-node", at, history.Value{})
				if rng.IntN(5) == 0 {
					nem(history.Fail, "kill-node", at, history.Value{Targets: []string{"n1"}})
				} else {
					nem(history.OK, "kill-node", at, history.Value{Targets: []string{"n1"}})
				}
			} else {
				nem(history.Invoke, "restart-node", at, history.Value{})
				nem(history.OK, "restart-node", at, history.Value{Targets: []string{"n1"}})
			}
			down = !down
		}
		add(o)
	}
	return out
}

// restartWhole is the reference verdict of the windows on a history with
// restarts: porcupine on each lock's ops whole — what the restarts prove
// applied, and the idle acquires left out, as the windowed check sees them.
func restartWhole(t testing.TB, h history.History) Verdict {
	t.Helper()
	tab := history.NewTable(h)
	byLock, err := MutexModel.collectOps(context.Background(), tab, false, true)
	if err != nil {
		t.Fatal(err)
	}
	model := MutexModel.porcupineModel(new(atomic.Bool))
	for l, ops := range byLock {
		if len(ops) > 0 && !porcupine.CheckOperations(model, window{lock: l, init: free, ops: ops}.porcupineOps(tab, 0)) {
			return Invalid
		}
	}
	return Valid
}

// TestWindowsLoseNothingAcrossRestarts is TestWindowsLoseNothing's
// property for what the restarts prove: on random session-lock histories
// with server crashes, the releases of unknown outcome that become deaths
// ending at a restart and the unknown acquires left out before a restart
// leave windows of 1 to 4 ops that give the verdict porcupine gives the
// same ops whole.
func TestWindowsLoseNothingAcrossRestarts(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	n := windowRunCount()
	ended, invalid := 0, 0
	var failures shrunkFailures

	for i := range n {
		h := genRestarts(rng, rng.IntN(3) == 0)
		want := restartWhole(t, h)
		if want == Invalid {
			invalid++
		}
		byLock, _ := MutexModel.collectOps(context.Background(), history.NewTable(h), true, true)
		for _, ops := range byLock {
			for _, op := range ops {
				if op.in.kind == 'd' && op.in.n == endedRelease {
					ended++
				}
			}
		}
		for size := 1; size <= 4; size++ {
			disagree := func(c history.History) bool {
				r := Linearizability{Model: MutexModel, WindowOps: size, ServerSessions: true}.Check(context.Background(), history.NewTable(c))
				return r.Valid != restartWhole(t, c)
			}
			if !disagree(h) {
				continue
			}
			failures.report(t, fmt.Sprintf("history %d, windows of %d: the windows disagree with the whole", i, size), h, shrink(h, disagree))
			break
		}
	}
	expectBalanced(t, invalid, n)
	if ended < n/20 {
		t.Errorf("only %d releases of unknown outcome were ended by a restart in %d histories", ended, n)
	}
	t.Logf("%d histories, %d not linearizable, %d releases ended by a restart", n, invalid, ended)
}

// genCrashing returns a random history of a correct blocking session lock
// on one server that crashes: processes acquire x (waiting while it is
// held; ok, failed, or of unknown outcome whether or not it took the
// lock), hold it and release it (ok, or of unknown outcome whether or not
// it freed it). The server is killed only while no process believes it
// holds x (a holder still working across a restart is a violation of the
// lock): every open op then ends of unknown outcome, having taken effect
// or not, the lock is freed, ops fail until the restart, and processes go
// on after it.
func genCrashing(rng *rand.Rand) history.History {
	const (
		idle = iota
		acquiring
		holding
		releasing
	)
	procs := 2 + rng.IntN(3)
	state := make([]int, procs)
	holder, down := -1, false
	var b builder
	now := int64(0)
	x := history.Value{Lock: "x"}
	for range 20 + rng.IntN(60) {
		now++
		if rng.IntN(12) == 0 {
			if down {
				b.invoke(history.NemesisProcess, "restart-node", now, history.Value{})
				b.ok(history.NemesisProcess, "restart-node", now, history.Value{Targets: []string{"n1"}})
				down = false
				continue
			}
			if !slices.Contains(state, holding) {
				b.invoke(history.NemesisProcess, "kill-node", now, history.Value{})
				for p := range state {
					switch state[p] {
					case acquiring:
						b.add(history.Info, p, history.Acquire, now, x, "invalid connection")
					case releasing:
						b.add(history.Info, p, history.Release, now, x, "invalid connection")
					}
					state[p] = idle
				}
				holder, down = -1, true
				b.ok(history.NemesisProcess, "kill-node", now, history.Value{Targets: []string{"n1"}})
				continue
			}
		}
		p := rng.IntN(procs)
		switch state[p] {
		case idle:
			b.invoke(p, history.Acquire, now, x)
			state[p] = acquiring
		case acquiring:
			switch r := rng.IntN(10); {
			case down:
				b.fail(p, history.Acquire, now, x, "connection refused")
				state[p] = idle
			case r == 0:
				// Of unknown outcome: it may have taken the lock, which then
				// stays its session's until the process releases it or the
				// server dies; the process carries on not believing it.
				if holder < 0 && rng.IntN(2) == 0 {
					holder = p
				}
				b.info(p, history.Acquire, now, x)
				state[p] = idle
			case holder < 0:
				holder = p
				b.ok(p, history.Acquire, now, x)
				state[p] = holding
			case r < 3:
				b.fail(p, history.Acquire, now, x, "not acquired")
				state[p] = idle
			}
		case holding:
			b.invoke(p, history.Release, now, x)
			state[p] = releasing
		case releasing:
			if rng.IntN(6) == 0 {
				if rng.IntN(2) == 0 {
					holder = -1
				}
				b.info(p, history.Release, now, x)
			} else {
				holder = -1
				b.ok(p, history.Release, now, x)
			}
			state[p] = idle
		}
	}
	return b.h
}

// TestRestartsOfACorrectLockAreValid checks that what the restarts prove
// is sound: on random histories of a correct session lock whose server
// crashes (genCrashing), the mutex checker told of ServerSessions, with
// windows of 1 to 4 ops and of the default size, finds no violation; and
// that it is then decided more often than without.
func TestRestartsOfACorrectLockAreValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 17))
	n := windowRunCount()
	decidedWith, decidedWithout := 0, 0
	var failures shrunkFailures
	for i := range n {
		h := genCrashing(rng)
		for _, size := range []int{1, 2, 3, 4, 0} {
			bad := func(c history.History) bool {
				r := Linearizability{Model: MutexModel, WindowOps: size, MaxWindowOps: 6, ServerSessions: true}.Check(context.Background(), history.NewTable(c))
				return r.Valid == Invalid
			}
			if !bad(h) {
				continue
			}
			failures.report(t, fmt.Sprintf("history %d, windows of %d: a correct lock found invalid", i, size), h, shrink(h, bad))
			break
		}
		for sessions, count := range map[bool]*int{true: &decidedWith, false: &decidedWithout} {
			r := Linearizability{Model: MutexModel, WindowOps: 1, MaxWindowOps: 6, ServerSessions: sessions}.Check(context.Background(), history.NewTable(h))
			if r.Valid == Valid {
				*count++
			}
		}
	}
	if decidedWith <= decidedWithout {
		t.Errorf("windows of at most 6 ops decided %d histories with the restarts, %d without", decidedWith, decidedWithout)
	}
	t.Logf("%d histories; windows of at most 6 ops decided %d with the restarts, %d without", n, decidedWith, decidedWithout)
}
