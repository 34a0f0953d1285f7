// Package tick runs a function at a steady period until it is told to
// stop: the loop of the harness's background flushers and pollers.
package tick

import "time"

// Every calls f every d until done is closed, and then returns. The first
// call comes d after Every starts. A call that takes longer than d delays
// the next one rather than queueing more (a time.Ticker drops the ticks a
// slow reader misses). Once done is closed no new call starts, though a
// tick that is ready at the same moment may still win the race, as in any
// select; the call under way, if any, finishes first.
func Every(d time.Duration, done <-chan struct{}, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			f()
		}
	}
}
