package tick

import (
	"sync/atomic"
	"testing"
	"time"
)

// Every calls its function again and again while done is open, and
// returns once done is closed.
func TestEveryCallsUntilDone(t *testing.T) {
	done := make(chan struct{})
	var calls atomic.Int64
	returned := make(chan struct{})
	go func() {
		Every(time.Millisecond, done, func() { calls.Add(1) })
		close(returned)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls in 10s at a 1ms period, want 3 at least", calls.Load())
		}
		time.Sleep(time.Millisecond)
	}
	close(done)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return within 10s of done closing")
	}
}

// Every makes no call before its first period has passed, and none at all
// when done is closed before then.
func TestEveryWaitsAPeriodFirst(t *testing.T) {
	done := make(chan struct{})
	close(done)
	Every(time.Hour, done, func() { t.Error("called before the first period") })
}

// Until returns at the first call of f that returns false, with done
// still open, and calls f no more.
func TestUntilStopsWhenToldTo(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	var calls atomic.Int64
	returned := make(chan struct{})
	go func() {
		Until(time.Millisecond, done, func() bool { return calls.Add(1) < 3 })
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatalf("Until did not return within 10s; %d calls", calls.Load())
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls, want 3: the third returned false", n)
	}
}
