package matrix

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/runstore"
)

// Pace decides how many runs of a matrix go at once. Execute asks Limit
// before it starts a run and tells Finished of each run that ended, with
// how many are still running; it calls them from one goroutine.
type Pace interface {
	// Limit is how many runs may go at once now, 1 or more.
	Limit() int
	// Finished tells the pace of a run that ended.
	Finished(r Result, running int)
	// Text says how the pace went, for the matrix's header: "3 at once",
	// or what it measured and the limits it chose.
	Text() string
	// Most is the most runs it let go at once.
	Most() int
}

// Fixed is the pace of --parallel N: n runs at once (below 1 means 1).
func Fixed(n int) Pace { return &fixed{n: max(n, 1)} }

type fixed struct{ n int }

func (f *fixed) Limit() int           { return f.n }
func (f *fixed) Finished(Result, int) {}
func (f *fixed) Text() string         { return fmt.Sprintf("%d at once, as --parallel gave", f.n) }
func (f *fixed) Most() int            { return f.n }

// The measured pace's bounds: it starts at as many runs as the machine
// has cores, adds one while a core's worth of CPU stays idle with every
// allowed run going, takes one away when a run stalled, and stays within
// [1, MaxParallel].
const (
	// MaxParallel is the most runs a measured pace lets go at once.
	MaxParallel = 12
	// idleToGrow is the idle CPU, in cores, over the runs since the last
	// change, that lets a measured pace add a run.
	idleToGrow = 0.75
	// promptShare: a run was prompt when 99% of its stall watch's
	// wake-ups came within its lease over promptShare (20 ms of a 500 ms
	// lease), and a measured pace adds a run after a span of prompt runs.
	promptShare = 25
	// crowdedShare: a run was crowded when 1% of its wake-ups came later
	// than its lease over crowdedShare (50 ms of a 500 ms lease), and a
	// measured pace takes a run away when one that started at the current
	// limit was. At 7 runs at once on 2 cores, runs late by 100 to 250 ms
	// at their p99, with no single stall of 250 ms, lost a 500 ms lease
	// with no fault.
	crowdedShare = 10
)

// Measured is the pace of a matrix without --parallel: it measures, as
// the runs go, the CPU this process and its children (the driver, the
// workers and the local servers) use per run, the machine's idle CPU
// (/proc/stat) and how promptly each run's processes were run (its stall
// watch), and picks the runs at once from them: cores runs at first; one
// more after a span of at least 5 s in which every allowed run went and
// either idleToGrow of a core stayed idle or every run that ended was
// prompt (99% of its timer's wake-ups within a 25th of its lease); one
// fewer as soon as a run's stall watch saw the machine stall (a wake-up
// 250 ms late), or a run that started at the current limit was crowded
// (1% of its wake-ups later than a 10th of its lease), since a run kept
// waiting that long may lose a short lease with no fault. Runs are mostly waiting (for a lease, a pause, a restart), and a
// busy run's loop takes what CPU it gets, so promptness, not CPU alone,
// is what bounds the runs at once. cpu and idle read the process's CPU
// time and the machine's idle time (nil: the real ones); tests give
// their own.
func Measured(cores int, cpu, idle func() time.Duration) Pace {
	return measuredAt(cores, cpu, idle, time.Now)
}

// measuredAt is Measured on the clock now.
func measuredAt(cores int, cpu, idle func() time.Duration, now func() time.Time) *measured {
	if cores < 1 {
		cores = runtime.NumCPU()
	}
	if cpu == nil {
		cpu = processCPU
	}
	if idle == nil {
		idle = machineIdle
	}
	m := &measured{cores: cores, cpu: cpu, idle: idle, now: now, limit: min(cores, MaxParallel), start: now()}
	m.lo, m.hi = m.limit, m.limit
	m.cpu0, m.idle0, m.mark = cpu(), idle(), m.start
	m.markIdle = m.idle0
	return m
}

type measured struct {
	mu         sync.Mutex
	cores      int
	cpu, idle  func() time.Duration
	now        func() time.Time
	limit      int
	lo, hi     int // the lowest and highest limit it set
	start      time.Time
	cpu0       time.Duration // the process's CPU time at the start
	idle0      time.Duration // the machine's idle time at the start
	runTime    time.Duration // the finished runs' wall time, summed
	runs       int
	stalls     int
	crowded    int           // runs that took a run away by their p99 lateness
	mark       time.Time     // when the limit last changed
	markIdle   time.Duration // the machine's idle time then
	saturated  bool          // every allowed run went since mark
	late       bool          // a run since mark was not prompt (promptShare)
	lastChange string
}

func (m *measured) Limit() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.limit
}

func (m *measured) Most() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hi
}

func (m *measured) Finished(r Result, running int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs++
	m.runTime += r.Elapsed
	now, idle := m.now(), m.idle()
	if running+1 < m.limit {
		// A run ended while fewer than the limit went (waiting for the
		// earlier seeds of their cells, or for a timed run): the span
		// says nothing of the limit.
		m.saturated = false
	}
	if r.Job.Timed() || r.Err != "" {
		return // alone, or no run: nothing measured of the runs at once
	}
	ttl := r.Job.Config.TTL
	if d := r.Results.Run.LongestStall(); d > 0 {
		m.stalls++
		if m.limit > 1 {
			m.set(m.limit-1, now, idle, fmt.Sprintf("a run stalled %s", d))
		}
		return
	}
	p := r.Results.Run.LatenessP99()
	if p == 0 || ttl > 0 && p > ttl/promptShare {
		m.late = true
	}
	if ttl > 0 && p > ttl/crowdedShare && !now.Add(-r.Elapsed).Before(m.mark) {
		// Crowded under the current limit (not under a higher one it
		// started beside, which an earlier run already took away).
		m.crowded++
		if m.limit > 1 {
			m.set(m.limit-1, now, idle, fmt.Sprintf("a run was late by %s in 1%% of its timer's wake-ups", p))
		}
		return
	}
	span := now.Sub(m.mark)
	if span < 5*time.Second {
		return
	}
	idleCores := float64(idle-m.markIdle) / float64(span)
	if m.saturated && (idleCores >= idleToGrow || !m.late) && m.limit < MaxParallel {
		why := fmt.Sprintf("%.1f cores idle", idleCores)
		if idleCores < idleToGrow {
			why = "every run prompt"
		}
		m.set(m.limit+1, now, idle, why)
		return
	}
	m.mark, m.markIdle, m.saturated, m.late = now, idle, running+1 >= m.limit, false
}

// set changes the limit to n, from now, when the machine's idle time is
// idle, because of why.
func (m *measured) set(n int, now time.Time, idle time.Duration, why string) {
	m.limit = n
	m.lo, m.hi = min(m.lo, n), max(m.hi, n)
	m.mark, m.markIdle, m.saturated, m.late = now, idle, false, false
	m.lastChange = why
}

// CoresPerRun is the CPU the finished runs used, in cores per run: the
// process's CPU time (the driver's own and its waited children's) since
// the start over the finished runs' summed wall time; 0 before a run
// ended.
func (m *measured) CoresPerRun() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runTime <= 0 {
		return 0
	}
	return float64(m.cpu()-m.cpu0) / float64(m.runTime)
}

func (m *measured) Text() string {
	per := m.CoresPerRun()
	m.mu.Lock()
	defer m.mu.Unlock()
	limits := strconv.Itoa(m.lo)
	if m.hi != m.lo {
		limits = fmt.Sprintf("%d to %d", m.lo, m.hi)
	}
	out := fmt.Sprintf("%s at once, measured on %d cores: %.2f cores per run (driver, workers and local servers)", limits, m.cores, per)
	if m.stalls > 0 {
		out += fmt.Sprintf("; %d runs saw the machine stall", m.stalls)
	}
	if m.crowded > 0 {
		out += fmt.Sprintf("; %d runs were late by over a %dth of their lease in 1%% of their timer's wake-ups", m.crowded, crowdedShare)
	}
	return out
}

// MachineProbe is how long CheckMachine watches the machine.
const MachineProbe = time.Second

// CheckMachine refuses a machine whose own load would make a matrix's
// timings meaningless: stall, watching MachineProbe (run.MachineStall),
// saw this process wait for the CPU half a lease (ttl/2) or longer, the
// stall after which a run warns that its lease may break with no fault.
// Its error says what it saw, in one line.
func CheckMachine(ttl time.Duration, stall func(time.Duration) time.Duration) error {
	if d := stall(MachineProbe); runstore.StallMayBreakLease(d, ttl) {
		return fmt.Errorf("matrix: the machine is too busy to time %s leases: over %s this process waited %s for the CPU, and a run that waits %s or more may lose its lease with no fault; run it when the machine is quieter",
			ttl, MachineProbe, d.Round(time.Millisecond), ttl/2)
	}
	return nil
}

// processCPU is this process's CPU time and its waited children's.
func processCPU() time.Duration {
	var self, kids syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// machineIdle is the machine's idle time summed over its cores, from
// /proc/stat's cpu line (idle and iowait); 0 where it cannot be read,
// which never lets a measured pace grow.
func machineIdle() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, s := range f[4:6] {
		v, _ := strconv.ParseInt(s, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
