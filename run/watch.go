package run

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// watchQueue is how many recorded ops the watch may be behind before it
// gives up: the recorder never waits for it.
const watchQueue = 1 << 16

// watchItem is an op recorded, or a worker about to start (expect >= 0).
type watchItem struct {
	op     history.Op
	expect int
}

// violationWatch checks the run's ops as they are recorded, with the
// streaming checkers (checker.StreamMutex, checker.StreamResource,
// checker.StreamFencing), and
// closes stop a grace after the first violation they confirm: the
// workload of a --stop-on-violation run ends there, and the run's final
// check (every checker, on the whole history) gives its verdict. It is a
// history.Sink before the run's own, and never holds the recorder up: an
// op it cannot take at once (it fell watchQueue ops behind) makes it give
// up stopping the run, which then runs its whole time.
type violationWatch struct {
	ch    chan watchItem
	grace time.Duration
	only  StopTarget
	clock history.Clock
	lg    *slog.Logger
	stop  chan struct{}
	done  chan struct{}

	// sending guards ch against a send after close: the recorder may
	// record after the run is over (the last workers' infos).
	sending sync.RWMutex
	closed  bool
	mu      sync.Mutex
	// first is the first violation confirmed, and at its history time;
	// gaveUp says why the watch stopped watching.
	first   *checker.Anomaly
	firstAt time.Duration
	gaveUp  string
	timer   *time.Timer
}

// StopTarget names a violation: an anomaly of kind Kind found by the
// checker called Checker; an empty field matches any.
type StopTarget struct{ Checker, Kind string }

// matches reports whether anomaly a, found by the checker called name, is
// the violation t names.
func (t StopTarget) matches(name string, a checker.Anomaly) bool {
	return (t.Checker == "" || t.Checker == name) && (t.Kind == "" || t.Kind == a.Kind)
}

// namedStream is a streaming checker and the name of the checker whose
// result it gives.
type namedStream struct {
	name string
	checker.Stream
}

// newViolationWatch starts a watch of a run of resource mode mode, which
// stops the run grace after the first violation that only matches.
func newViolationWatch(mode string, grace time.Duration, only StopTarget, clock history.Clock, lg *slog.Logger) *violationWatch {
	w := &violationWatch{ch: make(chan watchItem, watchQueue), grace: grace, only: only, clock: clock, lg: lg,
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop(
		namedStream{checker.MutualExclusion{}.Name(), checker.NewStreamMutex()},
		namedStream{checker.Resource{}.Name(), checker.NewStreamResource(mode)},
		namedStream{checker.FencingTokens{}.Name(), checker.NewStreamFencing()})
	return w
}

// streamsOf returns the streams of ns, sharing one reorder buffer.
func streamsOf(ns []namedStream) *checker.Streams {
	ss := make([]checker.Stream, len(ns))
	for i, n := range ns {
		ss[i] = n.Stream
	}
	return checker.NewStreams(ss...)
}

// starting tells the watch that worker process is about to start: its
// ops are waited for from now on.
func (w *violationWatch) starting(process int) { w.send(watchItem{expect: process}) }

// add takes an op just recorded.
func (w *violationWatch) add(op history.Op) { w.send(watchItem{op: op, expect: -1}) }

// send queues it for the watch, unless the watch is closed; it never
// waits.
func (w *violationWatch) send(it watchItem) {
	w.sending.RLock()
	defer w.sending.RUnlock()
	if w.closed {
		return
	}
	select {
	case w.ch <- it:
	default:
		w.giveUp("it fell behind the recorder")
	}
}

// giveUp stops the watch from stopping the run.
func (w *violationWatch) giveUp(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gaveUp == "" && w.first == nil {
		w.gaveUp = why
	}
}

// close ends the watch once the recording is over; it may be called more
// than once.
func (w *violationWatch) close() {
	w.sending.Lock()
	if w.closed {
		w.sending.Unlock()
		return
	}
	w.closed = true
	close(w.ch)
	w.sending.Unlock()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *violationWatch) loop(streams ...namedStream) {
	defer close(w.done)
	all := streamsOf(streams)
	for it := range w.ch {
		if it.expect >= 0 {
			all.Revive(it.expect, int64(w.clock.Now()))
			continue
		}
		all.Add(it.op)
		var found []checker.Anomaly
		for _, s := range streams {
			for _, a := range s.Confirmed() {
				if w.only.matches(s.name, a) {
					found = append(found, a)
				}
			}
		}
		if len(found) == 0 {
			continue
		}
		if all.Late() > 0 {
			// An op came after ops of later times had been checked: a
			// confirmation may rest on an order that was not the
			// history's. Never stop a run on it.
			w.giveUp("an op reached the driver after the watch had passed its time")
			continue
		}
		w.mu.Lock()
		if w.first == nil && w.gaveUp == "" {
			a := found[0]
			w.first, w.firstAt = &a, w.clock.Now()
			w.lg.Info("first violation confirmed while the run runs; it stops after the grace", "kind", a.Kind, "at", w.firstAt.Round(time.Millisecond), "grace", w.grace, "explanation", a.Explanation)
			w.timer = time.AfterFunc(w.grace, func() { close(w.stop) })
		}
		w.mu.Unlock()
	}
}

// stopped says how the run was stopped, or why it was not, for its
// results ("" when the watch saw no violation and did not give up).
func (w *violationWatch) stopped(ended bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.first != nil && ended:
		return fmt.Sprintf("stopped %s after its first violation (%s, confirmed at %s while the run ran)", w.grace, w.first.Kind, secsOf(w.firstAt))
	case w.first != nil:
		return fmt.Sprintf("its first violation (%s) was confirmed at %s while the run ran", w.first.Kind, secsOf(w.firstAt))
	case w.gaveUp != "":
		return "not stopped at its first violation: the watch gave up, " + w.gaveUp
	}
	return ""
}

func secsOf(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }
