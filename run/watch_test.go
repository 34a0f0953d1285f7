package run

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// TestWatchStopsOnEachStreamingCheck: the watch of a --stop-on-violation
// run stops it after a violation that only one of the streaming checks
// sees: an overlap of holds (mutual exclusion), a stale write (the
// resource), a token that went back between holds that never overlapped
// (fencing tokens). A history without one does not stop it, nor does a
// violation other than the one the run stops on (Config.StopOnly).
func TestWatchStopsOnEachStreamingCheck(t *testing.T) {
	tok := func(t uint64) *uint64 { return &t }
	n := func(x int64) *int64 { return &x }
	type op = history.Op
	acq := func(p int, at int64, token *uint64, until int64) []op {
		return []op{
			{Type: history.Invoke, Process: p, F: history.Acquire, Time: at, Value: history.Value{Lock: "l"}},
			{Type: history.OK, Process: p, F: history.Acquire, Time: at + 1, Value: history.Value{Lock: "l", LockValue: "v", Token: token, ValidUntil: until}},
		}
	}
	rel := func(p int, at int64) []op {
		return []op{
			{Type: history.Invoke, Process: p, F: history.Release, Time: at, Value: history.Value{Lock: "l", LockValue: "v"}},
			{Type: history.OK, Process: p, F: history.Release, Time: at + 1, Value: history.Value{Lock: "l", Removed: "v"}},
		}
	}
	write := func(p int, at int64, token *uint64, v int64) []op {
		return []op{
			{Type: history.Invoke, Process: p, F: history.Write, Time: at, Value: history.Value{Lock: "l", Token: token, N: n(v)}},
			{Type: history.OK, Process: p, F: history.Write, Time: at + 1, Value: history.Value{Lock: "l", N: n(v), StoreTime: at}},
		}
	}
	cat := func(parts ...[]op) []op {
		var out []op
		for _, p := range parts {
			out = append(out, p...)
		}
		// Both processes move on, so that the watermark passes it all.
		last := out[len(out)-1].Time
		for p := range 2 {
			out = append(out, op{Type: history.Invoke, Process: p, F: history.Acquire, Time: last + 10 + int64(p), Value: history.Value{Lock: "m"}})
		}
		return out
	}
	for _, tc := range []struct {
		name, mode, want string
		only             StopTarget
		ops              []op
	}{
		{"none", "none", "", StopTarget{}, cat(acq(0, 10, tok(1), 0), rel(0, 20), acq(1, 30, tok(2), 0), rel(1, 40))},
		{"overlap", "none", checker.KindOverlappingHolds, StopTarget{}, cat(acq(0, 10, tok(1), 0), acq(1, 20, tok(2), 0), rel(0, 30))},
		{"stale write", "fenced", checker.KindStaleWrite, StopTarget{}, cat(acq(0, 10, tok(1), 15), acq(1, 20, tok(2), 0), write(0, 30, nil, 1), rel(1, 40))},
		{"token regression", "none", checker.KindTokenRegression, StopTarget{}, cat(acq(0, 10, tok(5), 0), rel(0, 20), acq(1, 30, tok(3), 0), rel(1, 40))},
		// Only the violation named stops the run: an overlap does not stop
		// a run that stops on stale writes, and does stop one that stops
		// on what mutual-exclusion finds.
		{"overlap, only stale writes", "none", "", StopTarget{Checker: "resource", Kind: checker.KindStaleWrite}, cat(acq(0, 10, tok(1), 0), acq(1, 20, tok(2), 0), rel(0, 30))},
		{"overlap, only mutual exclusion", "none", checker.KindOverlappingHolds, StopTarget{Checker: "mutual-exclusion"}, cat(acq(0, 10, tok(1), 0), acq(1, 20, tok(2), 0), rel(0, 30))},
		{"stale write, only stale writes", "fenced", checker.KindStaleWrite, StopTarget{Checker: "resource", Kind: checker.KindStaleWrite}, cat(acq(0, 10, tok(1), 15), acq(1, 20, tok(2), 0), write(0, 30, nil, 1), rel(1, 40))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The workers start (the watch waits for their ops from the
			// clock's now on) before the history's time 0.
			clock := history.ClockAt(history.Monotonic() + int64(time.Hour))
			w := newViolationWatch(tc.mode, time.Millisecond, tc.only, clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
			w.starting(0)
			w.starting(1)
			for i, o := range tc.ops {
				o.Index = i
				w.add(o)
			}
			w.close()
			w.mu.Lock()
			first := w.first
			w.mu.Unlock()
			switch {
			case tc.want == "" && first != nil:
				t.Errorf("stopped on %s: %s", first.Kind, first.Explanation)
			case tc.want != "" && first == nil:
				t.Errorf("not stopped (gave up: %q), want a stop on %s", w.gaveUp, tc.want)
			case tc.want != "" && first.Kind != tc.want:
				t.Errorf("stopped on %s (%s), want %s", first.Kind, first.Explanation, tc.want)
			}
		})
	}
}
