package workloads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
)

// A slow critical section: the work time stays inside [WorkMin, Work].
func TestSleepBetween(t *testing.T) {
	w := &worker{rng: rand.New(rand.NewPCG(1, 2))}
	for _, tt := range []struct{ lo, hi Duration }{
		{Duration(20 * time.Millisecond), Duration(30 * time.Millisecond)},
		{Duration(25 * time.Millisecond), Duration(25 * time.Millisecond)},
		{Duration(25 * time.Millisecond), 0}, // lo alone
	} {
		for i := 0; i < 3; i++ {
			start := time.Now()
			w.sleepBetween(context.Background(), tt.lo, tt.hi)
			if el := time.Since(start); el < time.Duration(tt.lo) {
				t.Errorf("sleepBetween(%v, %v) slept %v, under its minimum", time.Duration(tt.lo), time.Duration(tt.hi), el)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	w.sleepBetween(ctx, Duration(time.Hour), Duration(2*time.Hour))
	if time.Since(start) > time.Minute {
		t.Error("sleepBetween ignored its cancelled context")
	}
}

// An invocation goes out at once with the completions held back before
// it; a completion waits for the next write, a wait or the end.
func TestOpEventsAreHeldBackUntilTheNextRequest(t *testing.T) {
	var out bytes.Buffer
	w := &worker{out: json.NewEncoder(&out), raw: &out, rng: rand.New(rand.NewPCG(1, 2))}
	inv := history.Op{Type: history.Invoke, F: history.Acquire, Value: history.Value{Lock: "l"}}
	ok := history.Op{Type: history.OK, F: history.Acquire, Value: history.Value{Lock: "l", Token: history.Tok(3), LockValue: "v"}}
	lines := func() int { return strings.Count(out.String(), "\n") }
	w.sendOp(inv)
	if lines() != 1 {
		t.Fatalf("after an invocation: %d lines written, want 1", lines())
	}
	w.sendOp(ok)
	if lines() != 1 {
		t.Fatalf("after a completion: %d lines written, want it held back", lines())
	}
	w.sendOp(inv)
	if lines() != 3 {
		t.Fatalf("after the next invocation: %d lines written, want 3", lines())
	}
	w.sendOp(ok)
	w.sleepFor(context.Background(), time.Millisecond)
	if lines() != 4 {
		t.Fatalf("after a wait: %d lines written, want the completion out before it", lines())
	}
	w.sendOp(ok)
	w.send(Event{Point: PointAfterAcquire})
	if lines() != 6 || !strings.HasSuffix(out.String(), `{"point":"after-acquire"}`+"\n") {
		t.Fatalf("a pause point must follow the completion held back: %q", out.String())
	}
	// Every line decodes, on the pool's fast path, as encoding/json reads it.
	p := history.NewOpParser(8)
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[:5] {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Op == nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		var fast history.Op
		if !fastOp(p, []byte(line), &fast) || !reflect.DeepEqual(fast, *e.Op) {
			t.Errorf("line %d: fast path %+v, encoding/json %+v", i, fast, *e.Op)
		}
	}
}

func TestBackoff(t *testing.T) {
	ms := func(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	for _, tt := range []struct {
		b    Backoff
		n    int
		want time.Duration // the longest wait: Wait at r just below 1
	}{
		{Backoff{Policy: BackoffUniform, Retry: ms(5)}, 1, 5 * time.Millisecond},
		{Backoff{Policy: BackoffUniform, Retry: ms(5), Max: ms(100)}, 9, 5 * time.Millisecond},
		{Backoff{Policy: BackoffExponential, Retry: ms(5), Max: ms(100)}, 1, 5 * time.Millisecond},
		{Backoff{Policy: BackoffExponential, Retry: ms(5), Max: ms(100)}, 3, 20 * time.Millisecond},
		{Backoff{Policy: BackoffExponential, Retry: ms(5), Max: ms(100)}, 6, 100 * time.Millisecond},
		{Backoff{Policy: BackoffExponential, Retry: ms(5), Max: ms(100)}, 1000, 100 * time.Millisecond},
		{Backoff{Policy: BackoffExponential, Retry: ms(5), Max: ms(1)}, 4, 5 * time.Millisecond}, // Max below Retry
		{Backoff{Policy: BackoffExponential}, 3, 0},
	} {
		if got := tt.b.Wait(tt.n, 0.9999999); got < tt.want-time.Microsecond || got > tt.want {
			t.Errorf("%+v after %d failures: longest wait %v, want %v", tt.b, tt.n, got, tt.want)
		}
		if got := tt.b.Wait(tt.n, 0); got != 0 {
			t.Errorf("%+v: shortest wait %v, want 0 (full jitter)", tt.b, got)
		}
	}
}

// TestNotSent: an op is a certain failure, recorded with history.NotSent,
// when its request never left the client: a dial that failed, or an
// impl's error marked impls.NotSent, however wrapped. An impl's other
// errors, a refusal or a timeout after the request was sent, are not.
func TestNotSent(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"dial", fmt.Errorf("acquire: %w", dial), true},
		{"marked", fmt.Errorf("acquire: %w", impls.NotSent(errors.New("failed to connect: timeout"))), true},
		{"read", read, false},
		{"refused", impls.ErrNotAcquired, false},
		{"deadline", context.DeadlineExceeded, false},
	} {
		if got := notSent(tc.err); got != tc.want {
			t.Errorf("%s: notSent(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
