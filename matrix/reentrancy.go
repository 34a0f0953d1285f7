package matrix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/run"
)

// Reentrancy is what the reentrancy probe of one impl found.
type Reentrancy struct {
	// Status is reports.StatusYes, StatusNo or StatusInconclusive.
	Status string
	// Value is the short form the table shows.
	Value string
	// Reason says what happened, step by step.
	Reason string
}

// Probe timeouts: the holder's first acquire, and every later attempt,
// which for a blocking impl waits this long for a lock it cannot get.
const (
	probeFirst   = 5 * time.Second
	probeAttempt = 1500 * time.Millisecond
	probeTTL     = 20 * time.Second
	probeLock    = "reentrancy"
)

// ProbeReentrancy measures reentrancy against a real cluster of cfg.Impl's
// backend, started through run.WithCluster on cfg's provider with its
// files under dir, and stopped before it returns: client A acquires the
// lock, then acquires it again. A second acquire that is refused (or still
// waiting at its deadline) is not reentrant. One that is granted is checked
// with a second client B: if B can take the lock while A holds both leases,
// A's second acquire gave up the first (not reentrant); A then releases its
// first lease: if the release says the lease was not held, the second
// acquire replaced the first (not reentrant); if B can then take the lock,
// it was granted twice but one release frees it (reentrant, nesting not
// counted); otherwise it is reentrant with nesting counted.
func ProbeReentrancy(ctx context.Context, cfg run.Config, dir string) Reentrancy {
	impl, err := impls.Lookup(cfg.Impl)
	if err != nil {
		return inconclusive("%v", err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var re Reentrancy
	err = run.WithCluster(startCtx, cfg, dir, func(_ context.Context, nodes []impls.Node) error {
		origin := time.Now()
		icfg := impls.Config{Nodes: nodes, Now: func() time.Duration { return time.Since(origin) }, Wall: time.Now}
		for _, n := range nodes {
			icfg.Addrs = append(icfg.Addrs, n.Addr)
		}
		a, err := impl.New(ctx, icfg)
		if err != nil {
			re = inconclusive("client A: %v", err)
			return nil
		}
		defer a.Close()
		icfg.Process = 1
		b, err := impl.New(ctx, icfg)
		if err != nil {
			re = inconclusive("client B: %v", err)
			return nil
		}
		defer b.Close()
		re = probe(ctx, a, b)
		return nil
	})
	if err != nil {
		return inconclusive("%v", err)
	}
	return re
}

func inconclusive(format string, args ...any) Reentrancy {
	return Reentrancy{Status: reports.StatusInconclusive, Reason: "the reentrancy probe could not run: " + fmt.Sprintf(format, args...)}
}

// letGo releases l of c, giving the release probeAttempt even when the
// probe's context has ended, and ignores its outcome: the probe already
// knows what it measured.
func letGo(c impls.Client, l impls.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), probeAttempt)
	defer cancel()
	_, _ = c.Release(ctx, l)
}

// attempt acquires the probe lock with c within d.
func attempt(ctx context.Context, c impls.Client, d time.Duration) (impls.Lease, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	l, err := c.Acquire(actx, probeLock, probeTTL)
	return l, time.Since(start), err
}

// refused reports whether an acquire's error means it did not get the
// lock: a certain refusal, or an attempt still waiting at its deadline.
func refused(err error, took time.Duration) bool {
	return errors.Is(err, impls.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) || took >= probeAttempt
}

// tryOther has client b, the other client, try the probe lock within
// probeAttempt while the holder A keeps its leases. It reports whether b
// got the lock (released again at once) and how long the attempt took; a
// refusal is got false with a nil error, and an acquire that failed any
// other way returns its error, which leaves the probe inconclusive.
func tryOther(ctx context.Context, b impls.Client) (got bool, took time.Duration, err error) {
	l, took, err := attempt(ctx, b, probeAttempt)
	switch {
	case err == nil:
		letGo(b, l)
		return true, took, nil
	case refused(err, took):
		return false, took, nil
	}
	return false, took, err
}

// probe runs the steps of ProbeReentrancy with two clients of one impl.
func probe(ctx context.Context, a, b impls.Client) Reentrancy {
	first, _, err := attempt(ctx, a, probeFirst)
	if err != nil {
		return inconclusive("client A's first acquire failed: %v", err)
	}
	held := []impls.Lease{first} // A's leases still to release at the end
	defer func() {
		for _, l := range held {
			letGo(a, l)
		}
	}()
	second, took, err := attempt(ctx, a, probeAttempt)
	switch {
	case err != nil && refused(err, took):
		return Reentrancy{Status: reports.StatusNo, Value: "no",
			Reason: fmt.Sprintf("measured: the holder's second acquire of the lock did not get it (%s after %s)", errText(err), took.Round(time.Millisecond))}
	case err != nil:
		return inconclusive("the holder's second acquire failed: %v", err)
	}
	held = append(held, second)
	switch got, took, err := tryOther(ctx, b); {
	case err != nil:
		return inconclusive("client B's acquire while A held the lock twice failed: %v", err)
	case got:
		return Reentrancy{Status: reports.StatusNo, Value: "no (second acquire drops the first)",
			Reason: fmt.Sprintf("measured: the holder's second acquire was granted, but another client then got the lock too (after %s): the second acquire gave up the first hold", took.Round(time.Millisecond))}
	}
	// Release the outer (first) lease: a reentrant lock is still held by
	// the inner one.
	rctx, cancel := context.WithTimeout(ctx, probeAttempt)
	_, rerr := a.Release(rctx, first)
	cancel()
	held = held[1:]
	switch {
	case errors.Is(rerr, impls.ErrNotHeld):
		return Reentrancy{Status: reports.StatusNo, Value: "no (second acquire replaces the first)",
			Reason: "measured: the holder's second acquire was granted, but its first lease was then no longer held (its release said not held): the second acquire ended the first"}
	case rerr != nil:
		return inconclusive("releasing the holder's first lease failed: %v", rerr)
	}
	switch got, took, err := tryOther(ctx, b); {
	case err != nil:
		return inconclusive("client B's acquire after A released its first lease failed: %v", err)
	case got:
		return Reentrancy{Status: reports.StatusYes, Value: "yes, one release frees it",
			Reason: fmt.Sprintf("measured: the holder's second acquire was granted at once, but releasing the first lease freed the lock: another client got it after %s while the second lease was still in use (nesting is not counted)", took.Round(time.Millisecond))}
	}
	return Reentrancy{Status: reports.StatusYes, Value: "yes",
		Reason: "measured: the holder's second acquire was granted, and after releasing the first lease the lock was still the holder's (another client could not get it): nesting is counted"}
}

func errText(err error) string {
	if errors.Is(err, impls.ErrNotAcquired) {
		return "refused"
	}
	return err.Error()
}
