package run

import (
	"slices"
	"sync"
	"time"

	"github.com/locktest/locktest/runstore"
)

// The stall watch's settings: its timer's period, the lateness from which
// a wake-up counts as a stall, and how many of the longest stalls the
// results keep.
const (
	stallTick = 10 * time.Millisecond
	stallOver = 250 * time.Millisecond
	stallTop  = 5
)

// stallWatch measures how promptly this machine runs a process while the
// workload runs: a goroutine of the driver sleeps stallTick again and
// again and notes how late each wake-up came. A machine too loaded to run
// a process for a second stops every process of the run alike (clients,
// servers and the driver), as a GC pause would, and no fault planned it:
// a lease shorter than the longest stall may break with no fault at all.
// The watch only measures; it changes no verdict. Its figures go into
// results.json (runstore.Stalls).
type stallWatch struct {
	now   func() time.Duration // the history's clock
	sleep func(time.Duration)
	stop  chan struct{}
	done  chan struct{}

	log stallLog
}

// stallLog keeps a watch's stalls: how many, and the longest, stallTop
// at most, in time order. It is safe for concurrent use.
type stallLog struct {
	mu    sync.Mutex
	count int
	top   []stall
	// ticks counts every wake-up, late counts them by lateness: late[i]
	// those within lateEdges[i] (and above the edge before), the last
	// those beyond every edge.
	ticks int
	late  [len(lateEdges) + 1]int
}

// lateEdges are the upper edges of the lateness buckets from which a
// watch reads the lateness that 99% of its wake-ups stayed within.
var lateEdges = [...]time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, stallOver}

// tick counts a wake-up that came late after its sleep.
func (l *stallLog) tick(late time.Duration) {
	i := 0
	for i < len(lateEdges) && late > lateEdges[i] {
		i++
	}
	l.mu.Lock()
	l.ticks++
	l.late[i]++
	l.mu.Unlock()
}

// p99 is the upper edge of the bucket that holds the 99th percentile of
// the wake-ups' lateness: 99% of them came within it. Beyond the last
// edge it is that edge (stallOver: the stalls say the rest); "" without a
// wake-up.
func (l *stallLog) p99() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ticks == 0 {
		return ""
	}
	seen := 0
	for i, n := range l.late {
		seen += n
		if float64(seen) >= 0.99*float64(l.ticks) {
			return ms(lateEdges[min(i, len(lateEdges)-1)])
		}
	}
	return ms(stallOver)
}

// stall is one late wake-up: when its sleep began and how late it came.
type stall struct{ at, late time.Duration }

// startStallWatch starts a watch whose stall times are on the clock now
// (the history's), sleeping with sleep; a nil sleep is time.Sleep.
func startStallWatch(now func() time.Duration, sleep func(time.Duration)) *stallWatch {
	if sleep == nil {
		sleep = time.Sleep
	}
	w := &stallWatch{now: now, sleep: sleep, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *stallWatch) loop() {
	defer close(w.done)
	prev := w.now()
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		w.sleep(stallTick)
		t := w.now()
		w.log.tick(t - prev - stallTick)
		w.log.note(prev, t-prev-stallTick)
		prev = t
	}
}

// note records a stall of length late that began at, if it is stallOver
// or longer.
func (l *stallLog) note(at, late time.Duration) {
	if late < stallOver {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	l.top = append(l.top, stall{at, late})
	if len(l.top) > stallTop {
		// Drop the shortest; the rest stay in time order.
		i := 0
		for j := range l.top {
			if l.top[j].late < l.top[i].late {
				i = j
			}
		}
		l.top = slices.Delete(l.top, i, i+1)
	}
}

// figures returns how many stalls there were, the longest one's length
// and start ("0s" and "" without one), and the top ones kept.
func (l *stallLog) figures() (count int, longest, at string, top []runstore.Stall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var most stall
	for _, s := range l.top {
		top = append(top, runstore.Stall{At: ms(s.at), Length: ms(s.late)})
		if s.late > most.late {
			most = s
		}
	}
	if l.count == 0 {
		return 0, "0s", "", top
	}
	return l.count, ms(most.late), ms(most.at), top
}

// finish stops the watch and returns what it saw. The longest stall is
// always among the top ones kept.
func (w *stallWatch) finish() *runstore.Stalls {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	st := &runstore.Stalls{Tick: stallTick.String(), Over: stallOver.String()}
	st.Count, st.Longest, st.LongestAt, st.Top = w.log.figures()
	st.P99 = w.log.p99()
	return st
}

// ms renders d to the millisecond, as results.json keeps durations.
func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// MachineStall watches, for d, how promptly this machine runs a process,
// as a run's stall watch does, and returns the longest stall it saw: 0
// when no wake-up came stallOver late or later. A series of runs asks it
// before it starts, so that it can refuse a machine whose own load would
// break a short lease with no fault.
func MachineStall(d time.Duration) time.Duration {
	start := time.Now()
	w := startStallWatch(func() time.Duration { return time.Since(start) }, nil)
	time.Sleep(d)
	st := w.finish()
	longest, _ := time.ParseDuration(st.Longest)
	return longest
}
