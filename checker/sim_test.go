package checker

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/locktest/locktest/history"
)

// workerState is what a simulated worker of a random history generator is
// doing.
type workerState int

const (
	idle workerState = iota
	acquiring
	holding
	reading
	writing
	releasing
	dead
)

// worker is a simulated worker: its state, the lock it is after or holds,
// and what the service granted it.
type worker struct {
	state       workerState
	lock, value string
	token       uint64
	// kept: its last release was of unknown outcome and did not take
	// effect; the service still holds its lease.
	kept bool
	// revive is when a dead worker's id is taken by a new worker, or 0.
	revive int64
	// base is the counter value its write builds on (-1: it read none),
	// until its lease's valid_until, writeAt when its write was invoked.
	base, until, writeAt int64
}

// sim is a simulated lock service and its workers, as the random history
// generators drive it: 2 to 4 workers over one or two locks, each lock's
// holder (-1: free), the history recorded so far on the clock now (in
// ns), the kill the nemesis has under way, and the ids revived after a
// death.
type sim struct {
	rng    *rand.Rand
	ws     []worker
	locks  []string
	holder map[string]int
	h      history.History
	now    int64
	values int // the lock values handed out so far
	kill   int // the target of the kill under way, or -1
	revs   []revival
}

// newSim returns a simulation of random size with every lock free and
// every worker idle.
func newSim(rng *rand.Rand) *sim {
	procs := 2 + rng.IntN(3)
	s := &sim{rng: rng, ws: make([]worker, procs), locks: []string{"x", "y"}[:1+rng.IntN(2)], holder: map[string]int{}, kill: -1}
	for _, l := range s.locks {
		s.holder[l] = -1
	}
	return s
}

// add records an op of process p at now.
func (s *sim) add(typ history.Type, p int, f string, v history.Value, errText string) {
	s.h = append(s.h, history.Op{Type: typ, Process: p, F: f, Time: s.now, Value: v, Error: errText})
}

// tick moves the clock on by 1 to 3 ns, two times in three: the other
// time the next event ties with the last.
func (s *sim) tick() {
	if s.rng.IntN(3) != 0 {
		s.now += 1 + s.rng.Int64N(3)
	}
}

// nemesis, one time in one, takes a step of a nemesis that kills workers,
// and reports whether it did: with no kill under way it invokes one of a
// random worker; else it completes the kill under way, failed one time in
// five, or applied, and then the worker dies (see die).
func (s *sim) nemesis(one int) bool {
	if s.rng.IntN(one) != 0 {
		return false
	}
	switch {
	case s.kill < 0:
		s.kill = s.rng.IntN(len(s.ws))
		s.add(history.Invoke, history.NemesisProcess, "kill-client", history.Value{}, "")
	case s.rng.IntN(5) == 0:
		s.add(history.Fail, history.NemesisProcess, "kill-client", history.Value{Targets: []string{fmt.Sprintf("p%d", s.kill)}}, "not applied")
		s.kill = -1
	default:
		if s.ws[s.kill].state != dead {
			s.die(s.kill)
		}
		s.add(history.OK, history.NemesisProcess, "kill-client", history.Value{Targets: []string{fmt.Sprintf("p%d", s.kill)}}, "")
		s.kill = -1
	}
	return true
}

// die kills worker p: the pool completes its acquire or release under
// way as "worker exited", the service frees its locks and forgets its
// kept lease, and one time in three its id is used again 5 ns later.
func (s *sim) die(p int) {
	st := &s.ws[p]
	if st.state == acquiring || st.state == releasing {
		f := history.Acquire
		if st.state == releasing {
			f = history.Release
		}
		s.add(history.Info, p, f, history.Value{Lock: st.lock}, "worker exited: signal: killed")
	}
	s.free(p)
	st.state, st.kept = dead, false
	if s.rng.IntN(3) == 0 {
		// The id is used again: the pool starts a new worker a little
		// later, which stamps its ops from then on.
		st.revive = s.now + 5
		s.revs = append(s.revs, revival{proc: p, at: st.revive})
	}
}

// free frees the locks p holds.
func (s *sim) free(p int) {
	for _, l := range s.locks {
		if s.holder[l] == p {
			s.holder[l] = -1
		}
	}
}

// worker picks a random worker to take the next step, the new worker of a
// dead one's id once its time has come.
func (s *sim) worker() (int, *worker) {
	p := s.rng.IntN(len(s.ws))
	st := &s.ws[p]
	if st.state == dead && st.revive > 0 && s.now >= st.revive {
		st.state, st.revive = idle, 0
	}
	return p, st
}

// run takes n steps of the simulation. Each moves the clock on (tick),
// then, unless kills is 0, lets the nemesis take a step one time in kills,
// and otherwise has a random worker take one: an idle worker invokes an
// acquire; an acquiring one times out one time in ten, and else grant
// completes its acquire, given the lock's holder hd (-1: free) and the
// draw r, from 1 to 9; a worker in any other state takes act's step.
func (s *sim) run(n, kills int, grant func(p int, st *worker, hd, r int), act func(p int, st *worker)) {
	for range n {
		s.tick()
		if kills > 0 && s.nemesis(kills) {
			continue
		}
		p, st := s.worker()
		switch st.state {
		case idle:
			s.acquire(p)
		case acquiring:
			if r := s.rng.IntN(10); r == 0 {
				s.timeout(p, history.Acquire)
			} else {
				grant(p, st, s.holder[st.lock], r)
			}
		default:
			act(p, st)
		}
	}
}

// acquire has idle worker p invoke an acquire of a random lock, or, one
// time in three when the service kept its lease, of the same lock again.
func (s *sim) acquire(p int) {
	st := &s.ws[p]
	if !st.kept || s.rng.IntN(3) == 0 {
		st.lock = s.locks[s.rng.IntN(len(s.locks))]
	}
	st.state = acquiring
	s.add(history.Invoke, p, history.Acquire, history.Value{Lock: st.lock}, "")
}

// timeout completes p's op f as of unknown outcome, and p goes idle.
func (s *sim) timeout(p int, f string) {
	s.add(history.Info, p, f, history.Value{Lock: s.ws[p].lock}, "timeout")
	s.ws[p].state = idle
}

// grant makes p the holder of its lock, with a new lock value.
func (s *sim) grant(p int) {
	st := &s.ws[p]
	s.holder[st.lock] = p
	s.values++
	st.value = fmt.Sprintf("v%d", s.values)
}

// refuse fails p's acquire, the lock being held, and p goes idle.
func (s *sim) refuse(p int) {
	s.add(history.Fail, p, history.Acquire, history.Value{Lock: s.ws[p].lock}, "held")
	s.ws[p].state = idle
}

// release has p invoke the release of its lock value.
func (s *sim) release(p int) {
	st := &s.ws[p]
	st.state = releasing
	s.add(history.Invoke, p, history.Release, history.Value{Lock: st.lock, LockValue: st.value}, "")
}

// received returns the history as a driver records it (see received) and
// the revivals, each placed before the first op recorded after its time,
// as the driver revives an id at its time, before any op that comes after
// it.
func (s *sim) received() (history.History, []revival) {
	out, arrive := received(s.h, s.rng)
	for k := range s.revs {
		s.revs[k].before = len(out)
		for i := range out {
			if arrive[i] >= float64(s.revs[k].at) {
				s.revs[k].before = i
				break
			}
		}
	}
	return out, s.revs
}

// revival is a dead worker's id taken by a new worker at at, which the
// driver learns before it records the op of index before.
type revival struct {
	before, proc int
	at           int64
}

// received returns h as a driver records it, re-indexed, with each op's
// arrival: a worker's op up to 4 ns after its time (a worker stamps its
// ops and sends them), in its own order; the nemesis's and the pool's
// ("worker exited") at their time, as they are stamped when recorded.
func received(h history.History, rng *rand.Rand) (history.History, []float64) {
	arrive := make([]float64, len(h))
	last := map[int]float64{}
	for i, op := range h {
		a := float64(op.Time)
		if op.Process >= 0 && !strings.HasPrefix(op.Error, "worker exited") {
			a += rng.Float64() * 4
		}
		a = max(a, last[op.Process])
		last[op.Process] = a
		arrive[i] = a + float64(i)*1e-6
	}
	order := make([]int, len(h))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return arrive[order[a]] < arrive[order[b]] })
	out := make(history.History, len(h))
	at := make([]float64, len(h))
	for i, j := range order {
		out[i], at[i] = h[j], arrive[j]
		out[i].Index = i
	}
	return out, at
}
