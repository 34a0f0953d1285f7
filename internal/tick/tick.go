// Package tick runs a function at a steady period until it is told to
// stop: the loop of the harness's background flushers, pollers and
// keep-alives.
//
// It is written here rather than taken from k8s.io/apimachinery's
// wait.Until, whose first call comes at once: every loop of locktest
// waits a period first (a keep-alive renews a lease a third of its TTL
// after the grant, not at the grant).
package tick

import "time"

// Every calls f every d until done is closed, and then returns. The first
// call comes d after Every starts. A call that takes longer than d delays
// the next one rather than queueing more (a time.Ticker drops the ticks a
// slow reader misses). Once done is closed no new call starts, though a
// tick that is ready at the same moment may still win the race, as in any
// select; the call under way, if any, finishes first.
func Every(d time.Duration, done <-chan struct{}, f func()) {
	Until(d, done, func() bool { f(); return true })
}

// Until is Every with an end of f's own: it also returns as soon as a
// call of f returns false (the lease could not be renewed, the node was
// found gone), without calling f again.
func Until(d time.Duration, done <-chan struct{}, f func() (more bool)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if !f() {
				return
			}
		}
	}
}
