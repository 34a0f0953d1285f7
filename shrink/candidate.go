// Package shrink searches for the smallest run that still fails the way a
// stored run failed: the fewest faults, each as weak as it can be, the
// shortest run, the fewest clients and locks. The search is pure: a
// candidate is a schedule file's plan (nemesis.Plan, its faults and its
// workload's settings), and whether a candidate fails is a Runner's to
// say. A Shrink (runner.go) is the Runner of `locktest shrink`: it reads
// the stored failing run, replays each candidate against real servers
// with run.Run, and confirms the smallest. Because real servers do not
// give the same result twice on the same schedule, a candidate counts as
// failing only when it fails in Need of Replays replays (docs/shrinking.md
// says what that means statistically).
package shrink

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/nemesis"
)

// Candidate is one run the search may try: a plan (nemesis.Plan) whose
// faults it injects and whose workload settings it runs with.
type Candidate struct {
	Plan nemesis.Plan
	// Change says how it differs from the candidate it was made from
	// ("drop faults 3-5 of 7", "clients 8 → 2").
	Change string
}

// The workload settings (by flag name, nemesis.Plan.Workload) the search
// changes.
const (
	KeyTime    = "time"
	KeyQuiet   = "quiet-time"
	KeyClients = "clients"
	KeyLocks   = "locks"
	KeyTTL     = "ttl"
)

// Size is how large a candidate is, in what a reader of its story counts.
type Size struct {
	Faults  int
	Time    time.Duration
	Clients int
	Locks   int
}

// String renders a size as "3 faults, 6.5s, 4 clients, 1 lock".
func (s Size) String() string {
	return fmt.Sprintf("%s, %s, %s, %s", plural(s.Faults, "fault"), s.Time, plural(s.Clients, "client"), plural(s.Locks, "lock"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// SizeOf returns c's size; a workload setting the plan does not record
// counts as 0.
func SizeOf(c Candidate) Size {
	return Size{Faults: len(c.Plan.Faults), Time: durationOf(c.Plan, KeyTime), Clients: intOf(c.Plan, KeyClients), Locks: intOf(c.Plan, KeyLocks)}
}

func durationOf(p nemesis.Plan, key string) time.Duration {
	d, _ := time.ParseDuration(p.Workload[key])
	return d
}

func intOf(p nemesis.Plan, key string) int {
	n, _ := strconv.Atoi(p.Workload[key])
	return n
}

// clone copies a plan deep enough that a change to the copy's faults,
// their settings and pins, or its workload, leaves p alone.
func clone(p nemesis.Plan) nemesis.Plan {
	q := p
	q.Workload = maps.Clone(p.Workload)
	q.Faults = make([]nemesis.PlannedFault, len(p.Faults))
	for i, f := range p.Faults {
		f.Settings = maps.Clone(f.Settings)
		f.Pins = slices.Clone(f.Pins)
		f.Cuts = slices.Clone(f.Cuts)
		f.Hit = slices.Clone(f.Hit)
		f.Roles = maps.Clone(f.Roles)
		q.Faults[i] = f
	}
	return q
}

// key identifies what a candidate runs, so that no candidate is replayed
// twice: its faults and its workload, not how it was reached.
func key(c Candidate) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.Plan.Workload)) {
		fmt.Fprintf(&b, "%s=%s;", k, c.Plan.Workload[k])
	}
	for _, f := range c.Plan.Faults {
		fmt.Fprintf(&b, "|%s@%s+%s", f.Fault, f.At, f.Lasts)
		for _, k := range slices.Sorted(maps.Keys(f.Settings)) {
			fmt.Fprintf(&b, ",%s=%s", k, f.Settings[k])
		}
		fmt.Fprintf(&b, ",pins=%s,cuts=%s", strings.Join(f.Pins, "/"), strings.Join(f.Cuts, "/"))
	}
	return b.String()
}

// untimed is key without the run's time and quiet time.
func untimed(c Candidate) string {
	p := c.Plan
	p.Workload = maps.Clone(p.Workload)
	delete(p.Workload, KeyTime)
	delete(p.Workload, KeyQuiet)
	return key(Candidate{Plan: p})
}

// Cut returns c ended grace after at, the offset of its first violation
// from the start of the fault phase: the faults that began after at are
// dropped, the quiet time is at most grace, and the run lasts until the
// last fault kept has healed and the quiet time has passed. ok is false
// when that is not shorter than c.
func Cut(c Candidate, at, grace time.Duration) (Candidate, bool) {
	old := durationOf(c.Plan, KeyTime)
	p := clone(c.Plan)
	p.Faults = slices.DeleteFunc(p.Faults, func(f nemesis.PlannedFault) bool { return f.At > at })
	quiet := min(durationOf(p, KeyQuiet), grace)
	end := at + grace
	for _, f := range p.Faults {
		// A replayed fault is left out when it would outlast the fault
		// phase: give each kept one its stay, and time to go in.
		end = max(end, f.At+f.Lasts+injectSlack+quiet)
	}
	end = end.Round(100 * time.Millisecond)
	if end >= old || old == 0 {
		return c, false
	}
	p.Workload[KeyTime] = end.String()
	p.Workload[KeyQuiet] = quiet.String()
	return Candidate{Plan: p, Change: fmt.Sprintf("end at %s, %s after the first violation", end, (end - at).Round(time.Millisecond))}, true
}

// Sooner returns c with its faults moved earlier by the same amount, so
// that the first begins lead after the start, and the run shorter by as
// much: the workload before the first fault is only waiting. ok is false
// when the first fault begins within lead already.
func Sooner(c Candidate, lead time.Duration) (Candidate, bool) {
	if len(c.Plan.Faults) == 0 || c.Plan.Faults[0].At <= lead {
		return c, false
	}
	shift := c.Plan.Faults[0].At - lead
	p := clone(c.Plan)
	for i := range p.Faults {
		p.Faults[i].At -= shift
	}
	p.Workload[KeyTime] = (durationOf(p, KeyTime) - shift).String()
	return Candidate{Plan: p, Change: fmt.Sprintf("faults %s sooner: the first at %s", shift, lead)}, true
}

// injectSlack is the time an injection may take beyond its offset (a
// pause waiting for its point, a role read over SSH), which Cut leaves
// between a kept fault's planned heal and the end of the fault phase.
const injectSlack = 500 * time.Millisecond

// Subset returns c with only the faults at the given indexes.
func Subset(c Candidate, keep []int) Candidate {
	all := clone(c.Plan)
	p := all
	p.Faults = nil
	for _, i := range keep {
		p.Faults = append(p.Faults, all.Faults[i])
	}
	return Candidate{Plan: p, Change: describeKept(len(c.Plan.Faults), keep)}
}

// describeKept says which faults of n a subset keeps, numbering them from
// 1 as a reader does: "keep faults 2, 5 of 7", "drop every fault".
func describeKept(n int, keep []int) string {
	switch {
	case len(keep) == 0 && n == 1:
		return "drop the one fault"
	case len(keep) == 0:
		return fmt.Sprintf("drop all %d faults", n)
	}
	names := make([]string, len(keep))
	for i, k := range keep {
		names[i] = strconv.Itoa(k + 1)
	}
	if len(keep) == 1 {
		return fmt.Sprintf("keep fault %s of %d", names[0], n)
	}
	return fmt.Sprintf("keep faults %s of %d", strings.Join(names, ", "), n)
}

// workerPin and clientHost name a worker process ("p3") and a client host
// ("c3"), both numbered from 0.
var (
	workerPin  = regexp.MustCompile(`^p(\d+)$`)
	clientHost = regexp.MustCompile(`^c(\d+)$`)
)

// beyond reports whether name is a worker or client host numbered n or
// more, which a run of n clients does not have.
func beyond(name string, n int) bool {
	for _, re := range []*regexp.Regexp{workerPin, clientHost} {
		if m := re.FindStringSubmatch(name); m != nil {
			i, _ := strconv.Atoi(m[1])
			return i >= n
		}
	}
	return false
}

// Clients returns c with n clients. A fault pinned to workers or client
// hosts keeps those the smaller run has; ok is false when a fault would
// keep none of its pins, or a cut none of one side's hosts (the fault
// would then hit something else, a different story).
func Clients(c Candidate, n int) (Candidate, bool) {
	p := clone(c.Plan)
	old := intOf(p, KeyClients)
	for i := range p.Faults {
		f := &p.Faults[i]
		if len(f.Pins) > 0 {
			f.Pins = slices.DeleteFunc(f.Pins, func(s string) bool { return beyond(s, n) })
			if len(f.Pins) == 0 {
				return c, false
			}
		}
		for j, cut := range f.Cuts {
			sep := "|"
			if !strings.Contains(cut, sep) {
				sep = ">" // a one-way cut
			}
			a, b, _ := strings.Cut(cut, sep)
			sides := [2][]string{strings.Split(a, ","), strings.Split(b, ",")}
			for s := range sides {
				sides[s] = slices.DeleteFunc(sides[s], func(h string) bool { return beyond(h, n) })
				if len(sides[s]) == 0 {
					return c, false
				}
			}
			f.Cuts[j] = strings.Join(sides[0], ",") + sep + strings.Join(sides[1], ",")
		}
	}
	p.Workload[KeyClients] = strconv.Itoa(n)
	return Candidate{Plan: p, Change: fmt.Sprintf("clients %d → %d", old, n)}, true
}

// Locks returns c with n locks.
func Locks(c Candidate, n int) Candidate {
	p := clone(c.Plan)
	old := intOf(p, KeyLocks)
	p.Workload[KeyLocks] = strconv.Itoa(n)
	return Candidate{Plan: p, Change: fmt.Sprintf("locks %d → %d", old, n)}
}
