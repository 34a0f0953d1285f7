package matrix

import (
	"maps"
	"slices"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/reports"
)

// SeededImpls returns the impls of a matrix of the zoo: every seeded impl
// (impls.SeededNames) and, before them, the correct recipes they vary, so
// that each bug's runs have their recipe's to be told from.
func SeededImpls() []string {
	var bases, seeded []string
	for _, n := range impls.SeededNames() {
		i, _ := impls.Lookup(n)
		if !slices.Contains(bases, i.SeededFrom) {
			bases = append(bases, i.SeededFrom)
		}
		seeded = append(seeded, n)
	}
	slices.Sort(bases)
	return append(bases, seeded...)
}

// AddSeeded adds to o's impls, after those it has, the impls of a matrix
// of the zoo (SeededImpls) that it does not have yet: what matrix --seeded
// measures.
func (o *Options) AddSeeded() {
	for _, n := range SeededImpls() {
		if !slices.Contains(o.Impls, n) {
			o.Impls = append(o.Impls, n)
		}
	}
}

// Detect tells, for every seeded impl among results whose correct recipe
// (impls.Impl.SeededFrom) has results too, which columns caught its bug,
// in the order the seeded impls first appear. The columns are mutual
// exclusion under each of classes and deadlock freedom; a column caught
// the bug when a run of the seeded impl in it holds an anomaly (of
// checker.AnomalyKinds, the stuck lock included) of a kind that no run of
// the recipe in the same column holds. An anomaly of a kind the recipe
// shows too does not tell the bug from the recipe's own weakness (a lease
// that a paused holder outlives, say); a token regression and a duplicate
// token count as one kind here, since one restarted counter shows as
// either. The time of a run that caught it is
// that of its earliest anomaly of those kinds (Safety.FirstOf). Detect
// reads only the results and the impls' registrations.
func Detect(classes []Class, results []Result) []reports.SeededBug {
	if len(classes) == 0 {
		classes = Classes
	}
	var order []string
	by := map[string][]Result{}
	for _, r := range results {
		if _, ok := by[r.Job.Impl]; !ok {
			order = append(order, r.Job.Impl)
		}
		by[r.Job.Impl] = append(by[r.Job.Impl], r)
	}
	type column struct {
		key   string
		probe Probe
		class Class
	}
	var cols []column
	for _, c := range classes {
		cols = append(cols, column{SafetyColumn(c), ProbeSafety, c})
	}
	if !slices.Contains(classes, ClassNone) {
		cols = append([]column{{SafetyColumn(ClassNone), ProbeSafety, ClassNone}}, cols...)
	}
	cols = append(cols, column{ColDeadlock, ProbeDeadlock, ClassNone})
	pick := func(rs []Result, col column) []Result {
		var out []Result
		for _, r := range rs {
			if r.Job.Probe == col.probe && r.Job.Class == col.class {
				out = append(out, r)
			}
		}
		return out
	}
	var out []reports.SeededBug
	for _, name := range order {
		impl, err := impls.Lookup(name)
		if err != nil || impl.Seeded == "" {
			continue
		}
		base, ok := by[impl.SeededFrom]
		if !ok {
			continue
		}
		bug := reports.SeededBug{Impl: name, Base: impl.SeededFrom, Bug: impl.Seeded, Cells: map[string]reports.SeededCell{}}
		for _, col := range cols {
			cell := seededCell(pick(by[name], col), pick(base, col))
			bug.Cells[col.key] = cell
			if cell.Status == reports.SeededCaught {
				bug.CaughtBy = append(bug.CaughtBy, col.key)
			}
		}
		bug.Rate8 = meanRate(pick(by[name], column{probe: ProbeSafety, class: ClassNone}))
		bug.BaseRate8 = meanRate(pick(base, column{probe: ProbeSafety, class: ClassNone}))
		out = append(out, bug)
	}
	return out
}

// anomalyKinds returns the kinds of anomaly run r holds, with their
// counts: its safety kinds and its stuck locks.
func anomalyKinds(r Result) map[string]int {
	k := maps.Clone(r.Safety.Kinds)
	if k == nil {
		k = map[string]int{}
	}
	if r.Stuck > 0 {
		k[checker.KindStuckLock] += r.Stuck
	}
	return k
}

// telling reports whether run r could show a bug: it ran, and it is
// conclusive or holds an anomaly.
func telling(r Result) bool {
	return r.Err == "" && (r.Safety.Conclusive || len(anomalyKinds(r)) > 0)
}

// seededCell compares a seeded impl's runs of one column with its
// recipe's (Detect): the seeded runs that could show the bug (telling)
// against every run of the recipe that ran.
func seededCell(seeded, base []Result) reports.SeededCell {
	var cell reports.SeededCell
	known := map[string]bool{}
	for _, r := range base {
		// Every run of the recipe that ran shows what it can do, also one
		// the matrix calls inconclusive (a kill/restart run whose restarts
		// met no holder): its anomalies are the recipe's.
		if r.Err != "" {
			continue
		}
		cell.BaseRuns++
		ks := anomalyKinds(r)
		if len(ks) > 0 {
			cell.BaseViolated++
		}
		for k := range ks {
			known[family(k)] = true
		}
	}
	var firsts []float64
	for _, r := range seeded {
		if !telling(r) {
			continue
		}
		cell.Runs++
		ks := anomalyKinds(r)
		if len(ks) > 0 {
			cell.Violated++
		}
		first, caught := -1.0, false
		for k, n := range ks {
			if known[family(k)] {
				continue
			}
			caught = true
			if cell.Kinds == nil {
				cell.Kinds = map[string]int{}
			}
			cell.Kinds[k] += n
			if t, ok := r.Safety.FirstOf[k]; ok && (first < 0 || t < first) {
				first = t
			}
		}
		if caught {
			cell.Caught++
			if first >= 0 {
				firsts = append(firsts, first)
			}
		}
	}
	switch {
	case cell.Runs == 0 || cell.BaseRuns == 0:
		cell.Status = reports.SeededInconclusive
	case cell.Caught > 0:
		cell.Status = reports.SeededCaught
		if len(firsts) > 0 {
			cell.Median = median(firsts)
		}
	case cell.Violated > 0:
		cell.Status = reports.SeededSame
	default:
		cell.Status = reports.SeededMissed
	}
	return cell
}

// family is the kind Detect compares for anomaly kind k: a duplicate
// token is a token regression, as a counter that restarts grants both;
// every other kind is its own.
func family(k string) string {
	if k == checker.KindDuplicateToken {
		return checker.KindTokenRegression
	}
	return k
}

// meanRate is the mean of the runs' critical sections per second, 0
// without a run that ran.
func meanRate(rs []Result) float64 {
	sum, n := 0.0, 0
	for _, r := range rs {
		if r.Err == "" && r.Throughput > 0 {
			sum += r.Throughput
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// median is the middle of xs, or the mean of the two middle ones; xs is
// not empty.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
