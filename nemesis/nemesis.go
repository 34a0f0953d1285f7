// Package nemesis injects faults on a seeded schedule and records each
// injection and each heal as ops of process -1 in the history. Every fault
// has an exact inverse, and the schedule heals whatever is still broken when
// it stops, also when its context is cancelled.
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
	"time"

	"github.com/locktest/locktest/history"
)

// ErrUnavailable is wrapped by the error of a fault that the provider or the
// platform cannot apply. Such a fault is refused before the run starts,
// never skipped silently.
var ErrUnavailable = errors.New("fault unavailable")

// Fault is one kind of fault. Inject applies it once and says what it hit;
// Heal undoes whatever Inject did and is idempotent (healing nothing is a
// no-op that returns an empty value and no error).
type Fault interface {
	// Name is the f of the injection op, e.g. "pause-client".
	Name() string
	// HealName is the f of the healing op, e.g. "resume-client".
	HealName() string
	// Duration is how long the fault stays before the schedule heals it.
	Duration() time.Duration
	Inject(ctx context.Context, rng *rand.Rand) (history.Value, error)
	Heal(ctx context.Context) (history.Value, error)
}

// Schedule runs faults one at a time: it waits a random interval, injects a
// fault chosen at random, keeps it for the fault's duration, and heals it.
// The random choices come from one seeded source, so a seed names the
// sequence of faults and targets.
type Schedule struct {
	Faults []Fault
	// Interval is the mean quiet time between a heal and the next
	// injection; each wait is uniform in [Interval/2, 3·Interval/2],
	// except the first, from the start, which is that less Interval/2:
	// uniform in [0, Interval].
	Interval time.Duration
	Seed     int64
	Recorder *history.Recorder
	Clock    history.Clock
	Logger   *slog.Logger
	// Steps, when set, replace the seeded choice: Run injects exactly
	// these planned faults (BuildPlan) at their offsets, and Faults and
	// Interval are not used.
	Steps *PlanSteps

	mu      sync.Mutex
	applied int
	plan    planRecord
	// act makes the schedule's ops one at a time, invocation to
	// completion, as the history needs of a process (the nemesis is
	// process -1): a replay's heals and injections run on timers of
	// their own, and one that comes due while another acts waits for it.
	act sync.Mutex
}

// Run injects faults until ctx is done, then heals every fault, recording
// each step. A fault that would still be in at ctx's deadline is not
// started, so every fault lasts its whole duration, unless ctx is
// cancelled early or its injection (a pause waiting for its point) takes
// that long. It returns the errors of heals that failed, in one line (a
// fault left in place is a bug worth reporting loudly).
//
// Every injection is also an entry of the schedule's plan (Planned), so
// that the run can be replayed; with Steps, Run replays a plan instead.
func (s *Schedule) Run(ctx context.Context) error {
	s.plan.begin(s.Clock)
	lg := s.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if s.Steps != nil {
		err := s.replay(ctx, lg)
		<-ctx.Done()
		return err
	}
	if len(s.Faults) == 0 {
		<-ctx.Done()
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x6e656d65736973))
	var healErrs []error
	for first := true; ; first = false {
		wait := s.Interval/2 + time.Duration(rng.Int64N(int64(s.Interval)+1))
		if first {
			// The first fault comes within one interval of the start.
			// The draws stay those of every other wait, so a seed names
			// the same faults and targets as before.
			wait -= s.Interval / 2
		}
		lg.Debug("quiet before the next fault", "wait", wait)
		if !sleep(ctx, wait) {
			break
		}
		f := s.Faults[rng.IntN(len(s.Faults))]
		parts, stagger := []Fault{f}, time.Duration(0)
		if c, ok := f.(*combined); ok {
			parts, stagger = c.parts, c.stagger
		}
		// A fault lasts the time it was asked to: one that would still be
		// in when the fault phase ends (ctx's deadline) is not started,
		// and the phase ends here, rather than have it cut short.
		lasts := span(parts, stagger)
		if end, ok := ctx.Deadline(); ok && time.Now().Add(lasts).After(end) {
			lg.Info("last fault left out: it would outlast the fault phase", "fault", f.Name(), "lasts", lasts, "phase_left", time.Until(end).Round(time.Millisecond))
			<-ctx.Done()
			break
		}
		// The parts go in one after another; a part that failed, or a
		// cancelled run, stops the rest. Each part stays for its own
		// duration, counted from its injection, but at least until the last
		// part went in; ties heal in reverse order of injection.
		type inForce struct {
			f        Fault
			deadline time.Time
			entry    int       // of the plan
			injected time.Time // when its injection ended
		}
		var in []inForce
		for i, p := range parts {
			if i > 0 && !sleep(ctx, stagger) {
				break
			}
			ok, entry := s.injectPlanned(ctx, p, rng, lg, time.Now())
			now := time.Now()
			if !ok {
				// A part that failed is healed too, at once: it may have
				// half happened.
				in = append(in, inForce{p, now, entry, now})
				break
			}
			in = append(in, inForce{p, now.Add(p.Duration()), entry, now})
		}
		last := time.Now()
		for i := range in {
			if in[i].deadline.Before(last) {
				in[i].deadline = last
			}
		}
		slices.Reverse(in)
		slices.SortStableFunc(in, func(a, b inForce) int { return a.deadline.Compare(b.deadline) })
		for _, p := range in {
			sleep(ctx, time.Until(p.deadline))
			if err := s.heal(p.f); err != nil {
				healErrs = append(healErrs, err)
			}
			s.plan.healed(p.entry, p.injected)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(healErrs) == 0 {
		return nil
	}
	return healErrors(healErrs)
}

// healErrors are the heals of a schedule that failed: one line, each
// heal's error in turn, so that the run's problem is a single line; it
// unwraps to each error (errors.Is, errors.As).
type healErrors []error

func (e healErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	return strings.Join(msgs, "; ")
}

func (e healErrors) Unwrap() []error { return e }

// span is how long a fault of parts, injected stagger apart, stays in:
// each part for its own duration from its injection.
func span(parts []Fault, stagger time.Duration) time.Duration {
	var d time.Duration
	for i, p := range parts {
		d = max(d, time.Duration(i)*stagger+p.Duration())
	}
	return d
}

// injectPlanned injects one fault, whose injection began at began,
// recording it in the history and in the plan; it reports whether it
// applied, and returns the index of its plan entry.
func (s *Schedule) injectPlanned(ctx context.Context, f Fault, rng *rand.Rand, lg *slog.Logger, began time.Time) (bool, int) {
	s.act.Lock()
	defer s.act.Unlock()
	s.record(history.Invoke, f.Name(), history.Value{}, nil)
	v, err := f.Inject(ctx, rng)
	s.record(completion(err), f.Name(), v, err)
	entry := s.plan.injected(f, began, v, err)
	if err != nil {
		return false, entry
	}
	s.mu.Lock()
	s.applied++
	s.mu.Unlock()
	lg.Info("fault injected", "fault", f.Name(), "targets", strings.Join(v.Targets, ","))
	return true, entry
}

// healTimeout bounds one heal. It is longer than a provider's own bounds
// on the steps of a heal (a restart's start command and its readiness
// wait over SSH, on a loaded host), so that a slow heal ends with the
// provider's error, which names the step that took the time, rather than
// with this one's.
const healTimeout = 2 * time.Minute

// heal heals f with a context of its own, so a cancelled run still heals.
func (s *Schedule) heal(f Fault) error {
	s.act.Lock()
	defer s.act.Unlock()
	hctx, cancel := context.WithTimeout(context.Background(), healTimeout)
	defer cancel()
	s.record(history.Invoke, f.HealName(), history.Value{}, nil)
	v, err := f.Heal(hctx)
	s.record(completion(err), f.HealName(), v, err)
	if err != nil {
		return fmt.Errorf("heal %s: %w", f.Name(), err)
	}
	return nil
}

// Applied returns how many injections succeeded.
func (s *Schedule) Applied() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

func completion(err error) history.Type {
	var unknown unknownOutcome
	switch {
	case err == nil:
		return history.OK
	case errors.As(err, &unknown):
		return history.Info
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, errNotApplied):
		return history.Fail
	}
	return history.Info
}

// errNotApplied marks an injection that certainly changed nothing.
var errNotApplied = errors.New("not applied")

func (s *Schedule) record(t history.Type, f string, v history.Value, err error) {
	op := history.Op{Type: t, Process: history.NemesisProcess, F: f, Time: int64(s.Clock.Now()), Value: v}
	if err != nil {
		op.Error = err.Error()
	}
	if _, rerr := s.Recorder.Record(op); rerr != nil && s.Logger != nil {
		s.Logger.Error("nemesis record", "err", rerr)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
