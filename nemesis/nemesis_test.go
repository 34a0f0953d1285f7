package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
)

// hangGuard is how long runWithin lets a schedule run before it calls it
// hung. It guards against a hang, not a slow machine: a test process that
// the scheduler starves (the suite under stress-ng, beside a niced build)
// took 9 s for a run of a few hundred milliseconds, which a 5 s guard
// failed.
const hangGuard = 2 * time.Minute

// runWithin runs s until it returns or limit passes; on the limit it
// cancels ctx, waits for Run and fails the test.
func runWithin(t *testing.T, ctx context.Context, cancel context.CancelFunc, s *Schedule, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cancel()
		<-done
		t.Fatalf("Run did not return within %v", limit)
		return nil
	}
}

// wantOp checks the type, process and f of o.
func wantOp(t *testing.T, o history.Op, typ history.Type, f string) {
	t.Helper()
	if o.Type != typ || o.Process != history.NemesisProcess || o.F != f {
		t.Errorf("op %d = %s p%d %s, want %s p%d %s (%s)",
			o.Index, o.Type, o.Process, o.F, typ, history.NemesisProcess, f, o)
	}
}

// wantCycle checks that the four ops of a cycle are the injection of fault
// (invoked, then completed as inject) and its heal (invoked, then completed
// as heal).
func wantCycle(t *testing.T, cycle []history.Op, fault string, inject, heal history.Type) {
	t.Helper()
	wantOp(t, cycle[0], history.Invoke, fault)
	wantOp(t, cycle[1], inject, fault)
	wantOp(t, cycle[2], history.Invoke, "heal-"+fault)
	wantOp(t, cycle[3], heal, "heal-"+fault)
}

// wantCycles checks that h is n cycles of fault, each completed as inject
// and heal.
func wantCycles(t *testing.T, h history.History, n int, fault string, inject, heal history.Type) {
	t.Helper()
	if len(h) != 4*n {
		t.Fatalf("history has %d ops, want %d:\n%v", len(h), 4*n, h)
	}
	for k := range n {
		wantCycle(t, h[4*k:4*k+4], fault, inject, heal)
	}
}

func TestScheduleRecordsInjectAndHeal(t *testing.T) {
	const (
		interval = 20 * time.Millisecond
		duration = 30 * time.Millisecond
	)
	f := &fakeFault{name: "fake", duration: duration}
	s := newSchedule(interval, 1, f)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	h := s.Recorder.History()
	if len(h)%4 != 0 {
		t.Fatalf("history has %d ops, want groups of 4 (inject invoke/ok, heal invoke/ok):\n%v", len(h), h)
	}
	n := len(h) / 4
	// Each cycle takes 10–30 ms of wait plus 30 ms of fault: about 6 fit in
	// 300 ms; a loaded machine (-race) may fit fewer.
	if n < 2 {
		t.Fatalf("only %d injections in 300ms with interval %v and duration %v", n, interval, duration)
	}
	injects, heals := f.counts()
	if injects != n || heals != n {
		t.Errorf("Inject called %d times, Heal %d times, want %d each", injects, heals, n)
	}
	if got := s.Applied(); got != n {
		t.Errorf("Applied() = %d, want %d", got, n)
	}
	for k := range n {
		g := h[4*k : 4*k+4]
		wantCycle(t, g, "fake", history.OK, history.OK)
		if len(g[1].Value.Targets) != 1 || g[1].Value.Duration != int64(duration) {
			t.Errorf("inject ok %d does not carry the fault's value: %s", g[1].Index, g[1])
		}
		if !slices.Equal(g[3].Value.Targets, []string{"healed"}) {
			t.Errorf("heal ok %d does not carry the heal's value: %s", g[3].Index, g[3])
		}
		// Every wait after the first is at least Interval/2, counted
		// from the previous heal.
		if k > 0 {
			if quiet := time.Duration(g[0].Time - h[4*k-1].Time); quiet < interval/2 {
				t.Errorf("injection %d came %v after the previous heal, want at least %v", k, quiet, interval/2)
			}
		}
	}
	for i := 1; i < len(h); i++ {
		if h[i].Time <= h[i-1].Time {
			t.Errorf("op %d at %d is not after op %d at %d", i, h[i].Time, i-1, h[i-1].Time)
		}
		if h[i].Index != i {
			t.Errorf("op at position %d has index %d", i, h[i].Index)
		}
	}
}

// Every fault lasts its whole duration: one that would outlast the fault
// phase (ctx's deadline) is not started, and the phase ends with the last
// one that fits.
func TestScheduleNeverCutsAFaultShort(t *testing.T) {
	const duration = 100 * time.Millisecond
	f := &fakeFault{name: "fake", duration: duration}
	s := newSchedule(time.Millisecond, 1, f)
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	end, _ := ctx.Deadline()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if time.Now().Before(end) {
		t.Errorf("Run returned before its ctx's deadline")
	}
	h := s.Recorder.History()
	// Two faults of 100 ms fit in 250 ms with waits of 0.5-1.5 ms; a
	// third would end after the deadline. A loaded machine may start
	// the second too late to fit.
	n := len(h) / 4
	if len(h)%4 != 0 || n < 1 || n > 2 {
		t.Fatalf("history has %d ops, want 1 or 2 whole cycles:\n%v", len(h), h)
	}
	for k := range n {
		g := h[4*k : 4*k+4]
		wantCycle(t, g, "fake", history.OK, history.OK)
		if kept := time.Duration(g[2].Time - g[1].Time); kept < duration {
			t.Errorf("fault %d kept for %v, want its whole duration %v", k, kept, duration)
		}
	}

	// A fault longer than the whole phase never starts.
	long := &fakeFault{name: "long", duration: time.Second}
	s = newSchedule(time.Millisecond, 1, long)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := runWithin(t, ctx, cancel, s, hangGuard); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if injects, _ := long.counts(); injects != 0 || len(s.Recorder.History()) != 0 {
		t.Errorf("a 1 s fault in a 100 ms phase: %d injections, history %v", injects, s.Recorder.History())
	}
}

// The first fault comes within one interval of the start: its wait is the
// seeded draw of every wait less Interval/2.
func TestScheduleFirstFaultWithinOneInterval(t *testing.T) {
	const interval = 400 * time.Millisecond
	for _, seed := range []int64{1, 2, 3} {
		// The first draw of the schedule's source is its first wait.
		draw := time.Duration(rand.New(rand.NewPCG(uint64(seed), 0x6e656d65736973)).Int64N(int64(interval) + 1))
		ctx, cancel := context.WithCancel(context.Background())
		var at time.Time
		f := &fakeFault{name: "fake", onInject: func() { at = time.Now(); cancel() }}
		s := newSchedule(interval, seed, f)
		var waits waitLog
		s.Logger = slog.New(&waits)
		start := time.Now()
		if err := runWithin(t, ctx, cancel, s, hangGuard); err != nil {
			t.Fatalf("seed %d: Run: %v", seed, err)
		}
		cancel()
		if injects, _ := f.counts(); injects != 1 {
			t.Fatalf("seed %d: %d injections, want 1", seed, injects)
		}
		// The wait the schedule asked for is the draw (before, it was
		// Interval/2 + draw); the time it took is at least that, and more
		// on a loaded machine, which no bound of a test could foresee.
		if len(waits.waits) == 0 || waits.waits[0] != draw {
			t.Errorf("seed %d: the schedule's waits %v, want the first to be %v (the draw)", seed, waits.waits, draw)
		}
		if waited := at.Sub(start); waited < draw {
			t.Errorf("seed %d: the first fault came %v after the start, before its wait of %v", seed, waited, draw)
		}
	}
}

func TestScheduleNoFaultsWaitsForCtx(t *testing.T) {
	s := newSchedule(time.Millisecond, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := runWithin(t, ctx, cancel, s, hangGuard); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("Run without faults returned after %v, before its ctx was done", el)
	}
	if n := s.Recorder.Len(); n != 0 {
		t.Errorf("Run without faults recorded %d ops", n)
	}
}

func TestScheduleFailedInjection(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want history.Type
	}{
		{"not applied", fmt.Errorf("%w: no live client", errNotApplied), history.Fail},
		{"cancelled", context.Canceled, history.Fail},
		{"deadline wrapped", fmt.Errorf("kill n1: %w", context.DeadlineExceeded), history.Fail},
		{"other error", errors.New("kill n1: connection reset"), history.Info},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// A failed injection must not be kept for the fault's duration:
			// an hour would trip runWithin's limit. The heal ends the run.
			f := &fakeFault{name: "fake", duration: time.Hour, injectErr: tc.err, onHeal: cancel}
			s := newSchedule(time.Millisecond, 1, f)
			if err := runWithin(t, ctx, cancel, s, hangGuard); err != nil {
				t.Fatalf("Run: %v", err)
			}
			h := s.Recorder.History()
			wantCycles(t, h, 1, "fake", tc.want, history.OK)
			if h[1].Error != tc.err.Error() {
				t.Errorf("completion error %q, want %q", h[1].Error, tc.err.Error())
			}
			if injects, heals := f.counts(); injects != 1 || heals != 1 {
				t.Errorf("Inject called %d times, Heal %d times, want 1 each", injects, heals)
			}
			if got := s.Applied(); got != 0 {
				t.Errorf("Applied() = %d after a failed injection, want 0", got)
			}
		})
	}
}

func TestScheduleCancelDuringFaultHeals(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	injected := make(chan struct{})
	f := &fakeFault{name: "fake", duration: time.Hour, onInject: func() { close(injected) }}
	s := newSchedule(time.Millisecond, 1, f)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-injected:
	case <-time.After(5 * time.Second):
		cancel()
		<-done
		t.Fatal("no injection within 5s")
	}
	// Give Run time to record the ok and start waiting out the duration.
	time.Sleep(10 * time.Millisecond)
	cancel() // the fault lasts an hour: returning at all shows the wait was cut
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of its ctx being cancelled during a fault")
	}
	if injects, heals := f.counts(); injects != 1 || heals != 1 {
		t.Fatalf("Inject called %d times, Heal %d times, want 1 each", injects, heals)
	}
	if err := f.healCtxErrs[0]; err != nil {
		t.Errorf("Heal got a done ctx (%v); a cancelled run must still heal", err)
	}
	wantCycles(t, s.Recorder.History(), 1, "fake", history.OK, history.OK)
}

func TestScheduleReturnsHealErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	healErr := errors.New("restart n2: port taken")
	f := &fakeFault{name: "fake", healErr: healErr}
	// A failed heal does not stop the schedule; the second heal ends it.
	f.onHeal = func() {
		if _, heals := f.counts(); heals == 2 {
			cancel()
		}
	}
	s := newSchedule(time.Millisecond, 1, f)
	err := runWithin(t, ctx, cancel, s, hangGuard)
	if !errors.Is(err, healErr) {
		t.Fatalf("Run returned %v, want an error wrapping %v", err, healErr)
	}
	if c := strings.Count(err.Error(), "heal fake"); c != 2 {
		t.Errorf("Run's error names the fault %d times, want once per failed heal (2): %v", c, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("Run's error is not one line, as the run's problems must be: %q", err)
	}
	h := s.Recorder.History()
	wantCycles(t, h, 2, "fake", history.OK, history.Info)
	for _, i := range []int{3, 7} {
		if h[i].Error != healErr.Error() {
			t.Errorf("heal completion %d has error %q, want %q", i, h[i].Error, healErr)
		}
	}
}

// injections runs a schedule of three zero-duration faults with seed until
// it has made n injections, and returns what each injection chose: the
// fault's name and its target.
func injections(t *testing.T, seed int64, n int) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var count atomic.Int32
	onInject := func() {
		if count.Add(1) == int32(n) {
			cancel()
		}
	}
	var faults []Fault
	for _, name := range []string{"a", "b", "c"} {
		faults = append(faults, &fakeFault{name: name, onInject: onInject})
	}
	s := newSchedule(100*time.Microsecond, seed, faults...)
	if err := runWithin(t, ctx, cancel, s, hangGuard); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var out []string
	for _, o := range s.Recorder.History() {
		if o.Type == history.OK && !strings.HasPrefix(o.F, "heal-") {
			out = append(out, o.F+"/"+strings.Join(o.Value.Targets, ","))
		}
	}
	if len(out) != n {
		t.Fatalf("seed %d: %d injections recorded, want %d", seed, len(out), n)
	}
	return out
}

func TestScheduleSeedNamesTheSequence(t *testing.T) {
	const n = 12
	first := injections(t, 7, n)
	if again := injections(t, 7, n); !slices.Equal(first, again) {
		t.Errorf("seed 7 gave two sequences:\n%v\n%v", first, again)
	}
	names := map[string]bool{}
	for _, c := range first {
		names[c[:1]] = true
	}
	if len(names) < 2 {
		t.Errorf("%d injections of 3 faults all chose the same fault: %v", n, first)
	}
	for _, seed := range []int64{8, 9} {
		if other := injections(t, seed, n); slices.Equal(first, other) {
			t.Errorf("seeds 7 and %d gave the same sequence %v", seed, first)
		}
	}
}

// A combined fault goes in part by part, each recorded as its own op, and
// comes out in reverse order; a part that fails stops the rest, and what
// went in is still healed.
func TestCombinedFault(t *testing.T) {
	// Each test stops its schedule from the last heal of a round (onHeal),
	// so that a loaded machine cannot cut a round short.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// b is due 10ms after it went in, a 500ms after: b comes out first
	// unless b went in more than 490ms after a, which even a loaded
	// machine does not take for a 5ms stagger.
	a := &fakeFault{name: "a", duration: 500 * time.Millisecond, onHeal: cancel}
	b := &fakeFault{name: "b", duration: 10 * time.Millisecond}
	s := newSchedule(20*time.Millisecond, 1, &combined{parts: []Fault{a, b}, stagger: 5 * time.Millisecond})
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, o := range s.Recorder.History() {
		if o.Type == history.OK {
			seq = append(seq, o.F)
		}
	}
	if len(seq) < 4 {
		t.Fatalf("ops %v: want at least one whole round", seq)
	}
	for i := 0; i+4 <= len(seq); i += 4 {
		if got := strings.Join(seq[i:i+4], " "); got != "a b heal-b heal-a" {
			t.Fatalf("round %d: %s, want a b heal-b heal-a", i/4, got)
		}
	}
	if ai, ah := a.counts(); ai != ah {
		t.Errorf("a injected %d, healed %d", ai, ah)
	}

	// Each part is healed after its own duration, but not before the last
	// part went in: a partition of 0s comes out first, as soon as the kill
	// that follows it went in; the kill stays its own 300ms.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel3()
	p := &fakeFault{name: "p", duration: 0}
	k := &fakeFault{name: "k", duration: 300 * time.Millisecond, onHeal: cancel3}
	s = newSchedule(20*time.Millisecond, 1, &combined{parts: []Fault{p, k}, stagger: 10 * time.Millisecond})
	if err := s.Run(ctx3); err != nil {
		t.Fatal(err)
	}
	var ops []history.Op
	for _, o := range s.Recorder.History() {
		if o.Type == history.OK {
			ops = append(ops, o)
		}
	}
	if len(ops) < 4 || ops[0].F+ops[1].F+ops[2].F+ops[3].F != "pkheal-pheal-k" {
		t.Fatalf("ops %v, want p k heal-p heal-k", ops)
	}
	if held := time.Duration(ops[3].Time - ops[1].Time); held < 300*time.Millisecond {
		t.Errorf("k was healed %v after it went in, before its own 300ms", held)
	}
	if ops[2].Time > ops[3].Time {
		t.Errorf("p, of no duration, was healed after k")
	}

	// b fails: c, after it, never goes in; a and b are healed.
	a2 := &fakeFault{name: "a", duration: time.Millisecond}
	b2 := &fakeFault{name: "b", duration: time.Millisecond, injectErr: errors.New("boom")}
	c2 := &fakeFault{name: "c", duration: time.Millisecond}
	s = newSchedule(10*time.Millisecond, 1, &combined{parts: []Fault{a2, b2, c2}})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	a2.onHeal = cancel2
	_ = s.Run(ctx2)
	if ci, _ := c2.counts(); ci != 0 {
		t.Errorf("c injected %d times after b failed", ci)
	}
	ai, ah := a2.counts()
	bi, bh := b2.counts()
	if ai == 0 || ai != ah || bi != bh {
		t.Errorf("a %d/%d, b %d/%d injected/healed: every part that went in must be healed", ai, ah, bi, bh)
	}
}

// waitLog is a slog handler that keeps the waits the schedule logs
// ("quiet before the next fault").
type waitLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *waitLog) Enabled(context.Context, slog.Level) bool { return true }

func (w *waitLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "wait" && r.Message == "quiet before the next fault" {
			w.mu.Lock()
			w.waits = append(w.waits, a.Value.Duration())
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

func (w *waitLog) WithAttrs([]slog.Attr) slog.Handler { return w }

func (w *waitLog) WithGroup(string) slog.Handler { return w }
