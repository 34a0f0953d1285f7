package workloads

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
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
