// Package checker decides, from a history alone, whether a lock kept its
// promises. Every checker is a pure function of a history:
// it reads no clock, no file and no network.
package checker

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/locktest/locktest/history"
)

// Verdict is a checker's answer. Verdicts combine as false > unknown > true.
type Verdict string

// The three verdicts.
const (
	Valid   Verdict = "true"
	Invalid Verdict = "false"
	Unknown Verdict = "unknown"
)

// Merge combines two verdicts: false beats unknown beats true.
func Merge(a, b Verdict) Verdict {
	switch {
	case a == Invalid || b == Invalid:
		return Invalid
	case a == Unknown || b == Unknown:
		return Unknown
	}
	return Valid
}

// Anomaly is one violation (or, in Result.Notes, one noteworthy event that is
// not a violation), with the ops that prove it.
type Anomaly struct {
	// Kind is a short stable name, e.g. "overlapping-holds".
	Kind string `json:"kind"`
	// Ops are the history indexes of the ops that prove it, in time order.
	Ops []int `json:"ops"`
	// Explanation says in one sentence what happened, naming processes,
	// tokens and times.
	Explanation string `json:"explanation"`
}

// Result is what a checker found.
type Result struct {
	Checker   string             `json:"checker"`
	Valid     Verdict            `json:"valid"`
	Anomalies []Anomaly          `json:"anomalies"`
	Notes     []Anomaly          `json:"notes,omitempty"`
	Stats     map[string]float64 `json:"stats,omitempty"`
	// Error says why the verdict is unknown, when it is for a reason other
	// than the history itself (a panic, a timeout).
	Error string `json:"error,omitempty"`
	// Elapsed is how long the check took, in ns.
	Elapsed int64 `json:"elapsed_ns"`
}

// Checker is a pure function of a history.
type Checker interface {
	Name() string
	Check(ctx context.Context, h *history.Table) Result
}

// All returns the lock checkers, in the order reports show them: mutual
// exclusion as the clients believed it, what the resource store accepted,
// fencing-token monotonicity and liveness. Its Resource has no Mode (the
// run's resource mode is unknown), so it checks accepted writes for token
// regressions; use ForMode when the mode is known.
func All() []Checker {
	return ForMode("")
}

// ForMode returns the checkers of All, in the same order, with the Resource
// checker told the run's resource mode ("none", "fenced", "check-and-set",
// any other mode, or "" when unknown); see Resource.Mode.
func ForMode(mode string) []Checker {
	return []Checker{MutualExclusion{}, Resource{Mode: mode}, FencingTokens{}, Liveness{}}
}

// For returns the checkers of a run: those of ForMode(mode); when the
// locks are not leases (leases false: database session locks, whose
// acquires carry no valid_until), the porcupine checker of MutexModel; and
// the porcupine checker of RegisterModel, in every resource mode: the
// resource store keeps one counter per lock (and in mode etcd-guarded the
// lock service keeps it, in one key per lock), which a read ok returns and
// a write it accepted sets — one register per lock. Both porcupine
// checkers are bounded by DefaultLinearizableTimeout. Leases reports from a
// stored history which case it is.
func For(mode string, leases bool) []Checker {
	cs := ForMode(mode)
	if !leases {
		cs = append(cs, Linearizable(MutexModel, DefaultLinearizableTimeout))
	}
	return append(cs, Linearizable(RegisterModel, DefaultLinearizableTimeout))
}

// Run runs every checker on h and returns their results in order. A checker
// that panics yields unknown, never valid; a checker that ignores a done ctx
// still runs to completion, but one that returns with ctx done yields
// unknown.
func Run(ctx context.Context, h *history.Table, cs ...Checker) []Result {
	out := make([]Result, len(cs))
	// Checkers only read h: they run side by side, as many at once as
	// there are cores, and share the view of h they build on (begin).
	ctx = context.WithValue(ctx, viewKey{}, &sharedView{h: h})
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, c := range cs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = runOne(ctx, h, c)
		})
	}
	wg.Wait()
	return out
}

func runOne(ctx context.Context, h *history.Table, c Checker) (r Result) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			r = Result{Checker: c.Name(), Valid: Unknown, Error: fmt.Sprintf("checker panicked: %v", p)}
		}
		r.Checker = c.Name()
		r.Elapsed = int64(time.Since(start))
		if r.Valid == "" {
			r.Valid = Unknown
		}
		if r.Anomalies == nil {
			r.Anomalies = []Anomaly{}
		}
	}()
	r = c.Check(ctx, h)
	if err := ctx.Err(); err != nil && r.Valid == Valid {
		r.Valid, r.Error = Unknown, "check cancelled: "+err.Error()
	}
	return r
}

// Overall merges the verdicts of results; no results is unknown.
func Overall(rs []Result) Verdict {
	if len(rs) == 0 {
		return Unknown
	}
	v := Valid
	for _, r := range rs {
		v = Merge(v, r.Valid)
	}
	return v
}
