package shrink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Trial is what one replay of a candidate showed.
type Trial struct {
	// Run is where the replay is stored.
	Run string `json:"run"`
	// Verdict is the replay's verdict: valid, invalid or unknown.
	Verdict string `json:"verdict"`
	// Failed says the replay failed the way the search looks for: the
	// same checker found an anomaly of the same kind.
	Failed bool `json:"failed"`
	// FirstViolation is, when Failed, when the first such anomaly was
	// proven (the last of its ops), from the start of the replay's fault
	// phase.
	FirstViolation time.Duration `json:"first_violation_ns,omitempty"`
}

// Runner replays candidate c once and says what it showed; id names the
// candidate ("c007") for the replay's place in the store. An error that
// wraps ErrCannotRun says that c cannot be run at all (a pin the smaller
// run does not have): the search leaves c out and goes on. Any other
// error ends the search.
type Runner func(ctx context.Context, id string, c Candidate) (Trial, error)

// ErrCannotRun is the error of a candidate that cannot be run.
var ErrCannotRun = errors.New("the candidate cannot run")

// ErrBudget is the error of a search that ran out of its time budget; its
// Result holds the smallest failing candidate found so far.
var ErrBudget = errors.New("the budget is spent")

// Options are how the search judges and bounds itself.
type Options struct {
	// Need and Replays: a candidate counts as failing when Need of
	// Replays replays fail. Replays stop as soon as the count is decided
	// (Need failures, or more than Replays − Need passes).
	Need, Replays int
	// Grace is how long a cut run goes on after its first violation.
	Grace time.Duration
	// Deadline, when not zero, is when the search starts no more
	// replays: the budget. A replay that started before it ends.
	Deadline time.Time
	// Progress, when set, is told of every candidate the search decided.
	Progress func(Step)
	// Now is the clock of the budget; nil means time.Now.
	Now func() time.Time
}

// Step is one candidate the search tried, with its replays.
type Step struct {
	// ID numbers the candidate in the order tried: c001, c002, ...
	ID     string  `json:"id"`
	Change string  `json:"change"`
	Size   Size    `json:"-"`
	Trials []Trial `json:"trials"`
	// Accepted says it failed in Need of Replays and became the smallest
	// so far.
	Accepted bool `json:"accepted"`
	// NotRun says why it was not replayed (it cannot run), or is empty.
	NotRun string `json:"not_run,omitempty"`
}

// Failures counts the step's failed replays.
func (s Step) Failures() int {
	n := 0
	for _, t := range s.Trials {
		if t.Failed {
			n++
		}
	}
	return n
}

// Result is what a search found.
type Result struct {
	// From is the candidate the search started from (the stored run's
	// schedule), Smallest the smallest one that counted as failing.
	From, Smallest Candidate
	// SmallestID is the ID of the step that accepted Smallest; empty
	// when no candidate was accepted and Smallest is From.
	SmallestID string
	// FirstViolation is when Smallest's first violation came in its
	// failed replays, at the latest.
	FirstViolation time.Duration
	// Steps are every candidate tried, in order; Replays counts their
	// replays.
	Steps   []Step
	Replays int
}

// search is one search's state.
type search struct {
	ctx    context.Context
	opt    Options
	run    Runner
	res    Result
	tested map[string]bool // candidate key → counted as failing
	// rejected holds, for a candidate's key without its time, the
	// longest time at which it was rejected: the same faults in a run no
	// longer are taken as rejected too, since a run that ends sooner has
	// no more chance to fail.
	rejected map[string]time.Duration
	// moves holds the changes (Candidate.Change) rejected so far. Every
	// accepted candidate is smaller or weaker than the ones before it, so
	// a move rejected on a larger candidate is taken as rejected on a
	// smaller one: fewer or weaker faults fail no more often.
	moves map[string]bool
}

// Lead is how long the workload runs before the first fault of a
// candidate the search moved its faults sooner in (Sooner): time for
// every client to start and contend.
const Lead = time.Second

// Search looks for the smallest candidate that still fails, starting from
// from, whose first violation came at first (from the start of its fault
// phase). Its moves, repeated until a round of them changes nothing:
//   - end the run Grace after its first violation (Cut), again after
//     every change that moves the first violation;
//   - drop faults, by delta debugging (ddmin) over the schedule, after
//     trying none at all;
//   - move the faults sooner, the first Lead after the start (Sooner);
//   - fewer clients (1, 2, 3, half), then one lock;
//   - weaken each fault that stays (Weakenings), one step at a time.
//
// A candidate is accepted when Need of its Replays fail (Options); no
// candidate is replayed twice, and no move that was rejected is tried
// again on a smaller candidate. Search returns what it found with a nil
// error, or with ErrBudget when the budget ran out, ctx's error when ctx
// ended, or the Runner's error; the Result is the search so far in every
// case.
func Search(ctx context.Context, from Candidate, first time.Duration, run Runner, opt Options) (Result, error) {
	if opt.Need < 1 || opt.Replays < opt.Need {
		return Result{}, fmt.Errorf("need %d of %d replays: want 1 ≤ need ≤ replays", opt.Need, opt.Replays)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	s := &search{ctx: ctx, opt: opt, run: run, tested: map[string]bool{key(from): true}, rejected: map[string]time.Duration{}, moves: map[string]bool{},
		res: Result{From: from, Smallest: from, FirstViolation: first}}
	err := s.rounds()
	return s.res, err
}

func (s *search) rounds() error {
	for {
		before := len(s.accepted())
		if err := s.cut(); err != nil {
			return err
		}
		if err := s.ddmin(); err != nil {
			return err
		}
		if err := s.cut(); err != nil {
			return err
		}
		if c, ok := Sooner(s.res.Smallest, Lead); ok {
			if _, err := s.try(c); err != nil {
				return err
			}
		}
		if err := s.fewerClients(); err != nil {
			return err
		}
		if n := intOf(s.res.Smallest.Plan, KeyLocks); n > 1 {
			if _, err := s.try(Locks(s.res.Smallest, 1)); err != nil {
				return err
			}
		}
		if err := s.weaken(); err != nil {
			return err
		}
		if len(s.accepted()) == before {
			return nil
		}
	}
}

func (s *search) accepted() []Step {
	var out []Step
	for _, st := range s.res.Steps {
		if st.Accepted {
			out = append(out, st)
		}
	}
	return out
}

// cut tries ending the smallest run soon after its first violation.
func (s *search) cut() error {
	c, ok := Cut(s.res.Smallest, s.res.FirstViolation, s.opt.Grace)
	if !ok {
		return nil
	}
	_, err := s.try(c)
	return err
}

// ddmin drops faults of the smallest candidate by delta debugging (Zeller
// and Hildebrandt, 2002): it tries no fault at all, then, with the faults
// in n chunks, each chunk alone and then each chunk's complement, keeps
// the first that fails, and splits finer when none does, until the faults
// cannot be split further. The result is 1-minimal: dropping any one
// fault it keeps does not fail (as far as Need of Replays can tell).
func (s *search) ddmin() error {
	base := s.res.Smallest
	all := make([]int, len(base.Plan.Faults))
	for i := range all {
		all[i] = i
	}
	if len(all) == 0 {
		return nil
	}
	if ok, err := s.try(Subset(base, nil)); ok || err != nil {
		return err
	}
	cur, n := all, 2
	for len(cur) >= 2 {
		chunks := split(cur, n)
		reduced := false
		for _, ch := range chunks {
			ok, err := s.try(Subset(base, ch))
			if err != nil {
				return err
			}
			if ok {
				cur, n, reduced = ch, 2, true
				break
			}
		}
		if !reduced && n > 2 {
			for i := range chunks {
				comp := complement(cur, chunks[i])
				ok, err := s.try(Subset(base, comp))
				if err != nil {
					return err
				}
				if ok {
					cur, n, reduced = comp, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(cur) {
				return nil
			}
			n = min(2*n, len(cur))
		}
	}
	return nil
}

// split cuts xs into n chunks of sizes that differ by at most one.
func split(xs []int, n int) [][]int {
	var out [][]int
	start := 0
	for i := 0; i < n; i++ {
		end := start + (len(xs)-start)/(n-i)
		out = append(out, xs[start:end])
		start = end
	}
	return out
}

func complement(xs, drop []int) []int {
	var out []int
	for _, x := range xs {
		if !slices.Contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

// fewerClients tries 1, 2, 3 and half the clients, fewest first, and
// keeps the first that fails.
func (s *search) fewerClients() error {
	cur := intOf(s.res.Smallest.Plan, KeyClients)
	var ns []int
	for _, n := range []int{1, 2, 3, cur / 2} {
		if n >= 1 && n < cur && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	for _, n := range ns {
		c, ok := Clients(s.res.Smallest, n)
		if !ok {
			continue
		}
		ok, err := s.try(c)
		if ok || err != nil {
			return err
		}
	}
	return nil
}

// weaken tries the weakenings of the smallest candidate one at a time,
// and after each that fails starts over from the new smallest: a
// weakening that failed once is not tried again (the search replays no
// candidate twice), one that was accepted is weakened further.
func (s *search) weaken() error {
	for {
		progress := false
		for _, c := range Weakenings(s.res.Smallest) {
			ok, err := s.try(c)
			if err != nil {
				return err
			}
			if ok {
				progress = true
				break
			}
		}
		if !progress {
			return nil
		}
	}
}

// try replays c until Need failures or too many passes decide it, and
// makes it the smallest when it counts as failing. A candidate tried
// before gives its earlier answer without a replay.
func (s *search) try(c Candidate) (bool, error) {
	k := key(c)
	if failed, seen := s.tested[k]; seen {
		return failed, nil
	}
	shape, long := untimed(c), durationOf(c.Plan, KeyTime)
	if at, ok := s.rejected[shape]; ok && long <= at {
		return false, nil
	}
	if c.Change != "" && s.moves[c.Change] {
		return false, nil
	}
	st := Step{ID: fmt.Sprintf("c%03d", len(s.res.Steps)+1), Change: c.Change, Size: SizeOf(c)}
	for {
		fails := st.Failures()
		passes := len(st.Trials) - fails
		if fails >= s.opt.Need || passes > s.opt.Replays-s.opt.Need {
			break
		}
		if err := s.ctx.Err(); err != nil {
			return false, err
		}
		if !s.opt.Deadline.IsZero() && !s.opt.Now().Before(s.opt.Deadline) {
			return false, ErrBudget
		}
		t, err := s.run(s.ctx, st.ID, c)
		if errors.Is(err, ErrCannotRun) {
			st.NotRun = err.Error()
			break
		}
		if err != nil {
			return false, err
		}
		s.res.Replays++
		st.Trials = append(st.Trials, t)
	}
	st.Accepted = st.NotRun == "" && st.Failures() >= s.opt.Need
	s.tested[k] = st.Accepted
	if !st.Accepted && st.NotRun == "" {
		s.rejected[shape] = max(s.rejected[shape], long)
		s.moves[c.Change] = true
	}
	s.res.Steps = append(s.res.Steps, st)
	if st.Accepted {
		s.res.Smallest = c
		s.res.SmallestID = st.ID
		s.res.FirstViolation = 0
		for _, t := range st.Trials {
			if t.Failed {
				s.res.FirstViolation = max(s.res.FirstViolation, t.FirstViolation)
			}
		}
	}
	if s.opt.Progress != nil {
		s.opt.Progress(st)
	}
	return st.Accepted, nil
}
