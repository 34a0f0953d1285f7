package matrix

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/reports"
)

// TestClassifyFenced: a fenced run's Safety is the resource's, and its
// FencedRun says whether the lock broke; a run whose store had nothing to
// save, or that could not tell, is not conclusive, and a client without
// tokens is n/a.
func TestClassifyFenced(t *testing.T) {
	rejected := withStats(valid("resource"), "saved_by_fencing", 2)
	stale := valid("resource", checker.Anomaly{Kind: checker.KindStaleWrite})
	tests := []struct {
		name                            string
		r                               func() Result
		conclusive, violated, na, broke bool
		rejected                        int
		reason                          string
	}{
		{"saved: the store rejected the paused holder's writes", func() Result {
			return Result{Results: results(nil, valid("mutual-exclusion"), rejected, valid("fencing-tokens"))}
		}, true, false, false, true, 2, ""},
		{"not saved: the store accepted a stale write", func() Result {
			return Result{Results: results(nil, valid("mutual-exclusion"), stale, valid("fencing-tokens"))}
		}, true, true, false, true, 0, ""},
		{"a mutual-exclusion anomaly is the lock's, not the resource's", func() Result {
			return Result{Results: results(nil, valid("mutual-exclusion", checker.Anomaly{Kind: checker.KindOverlappingHolds}), valid("resource"), valid("fencing-tokens"))}
		}, true, false, false, true, 0, ""},
		{"the lock never broke: nothing to save", func() Result {
			return Result{Results: results(nil, allValid()...)}
		}, false, false, false, false, 0, lockHeld},
		{"a run with problems cannot show the resource held", func() Result {
			return Result{Results: results([]string{"no fault was applied"}, valid("mutual-exclusion"), rejected, valid("fencing-tokens"))}
		}, false, false, false, true, 2, "no fault was applied"},
		{"a client without tokens is n/a", func() Result {
			return Result{Results: results([]string{"resource mode fenced, but the client kazoo gives no fencing token: every write carries none"}, allValid()...)}
		}, false, false, true, false, 0, "resource mode fenced, but the client kazoo gives no fencing token"},
		{"a resource checker that gave up", func() Result {
			return Result{Results: results(nil, valid("mutual-exclusion"), checker.Result{Checker: "resource", Valid: checker.Unknown, Error: "cancelled"})}
		}, false, false, false, false, 0, "the resource checker gave"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, f := ClassifyFenced(tt.r().Results)
			if s.Conclusive != tt.conclusive || s.Violated != tt.violated || s.NA != tt.na || f.LockBroke != tt.broke || f.Rejected != tt.rejected || !strings.HasPrefix(s.Reason, tt.reason) {
				t.Errorf("got %+v %+v, want conclusive %v violated %v n/a %v broke %v rejected %d reason %q",
					s, f, tt.conclusive, tt.violated, tt.na, tt.broke, tt.rejected, tt.reason)
			}
		})
	}
}

// fencedResult is a measured fenced run of seed s.
func fencedResult(seed int64, s Safety, f FencedRun) Result {
	r := safetyResult(ClassClientPauseFenced, seed, s)
	r.Fenced = &f
	return r
}

// TestFencedCell: saved, not saved (a safety cell's counts and interval,
// which Compare gates on), n/a for an impl without tokens and for a lock
// that never broke, inconclusive with the reasons.
func TestFencedCell(t *testing.T) {
	saved := Safety{Conclusive: true, Faults: 1}
	lost := Safety{Conclusive: true, Violated: true, Faults: 1, Kinds: map[string]int{checker.KindStaleWrite: 1, checker.KindLostUpdate: 1}}
	broke := FencedRun{LockBroke: true, Rejected: 3}
	noTokens := Safety{NA: true, Reason: "resource mode fenced, but the client kazoo gives no fencing token"}
	tests := []struct {
		name         string
		fenced       bool
		rs           []Result
		status       string
		value        string
		reasonPrefix string
		k, n         int
	}{
		{"saved in every run", true, []Result{fencedResult(1, saved, broke), fencedResult(2, saved, broke)},
			reports.StatusHeld, "saved: 0/2 runs lost an update (the lock broke in 2/2)",
			"saved by fencing: the lock broke in each of the 2 run(s) counted, and the fenced store rejected 6 stale write(s) and accepted none; the share of runs it would not save is at most 66%", 0, 2},
		{"not saved in one of two", true, []Result{fencedResult(1, lost, FencedRun{LockBroke: true}), fencedResult(2, saved, broke)},
			reports.StatusViolated, "not saved: 1/2 runs lost an update (the lock broke in 2/2)",
			"not saved by fencing: in 1 of 2 runs (95% interval 9%–91%) the fenced store still accepted what the lock's violation let through: ", 1, 2},
		{"an impl without fencing tokens is n/a", false, nil, reports.StatusNA, "", "the leases carry no fencing token", 0, 0},
		{"a fenced impl without fenced runs was not run", true, nil, reports.StatusNotRun, "", "no fenced run", 0, 0},
		{"a client without tokens is n/a with its reason", false, []Result{fencedResult(1, noTokens, FencedRun{})},
			reports.StatusNA, "", "resource mode fenced, but the client kazoo gives no fencing token", 0, 0},
		{"a lock that never broke is n/a: nothing to save", true, []Result{fencedResult(1, Safety{Reason: lockHeld}, FencedRun{})},
			reports.StatusNA, "", "the lock did not break in any of the 1 fenced run(s)", 0, 0},
		{"a run that could not tell is inconclusive", true, []Result{fencedResult(1, Safety{Reason: "fault pause-client: unavailable"}, FencedRun{}), {Job: Job{Class: ClassClientPauseFenced}, Err: "port in use"}},
			reports.StatusInconclusive, "", "fault pause-client: unavailable; port in use", 0, 0},
		{"an inconclusive seed is counted apart", true, []Result{fencedResult(1, saved, broke), {Job: Job{Class: ClassClientPauseFenced}, Err: "port in use"}},
			reports.StatusHeld, "saved: 0/1 runs lost an update (the lock broke in 1/1)", "saved by fencing", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fencedCell(tt.fenced, tt.rs)
			checkCell(t, c, tt.status, tt.value, tt.reasonPrefix)
			if c.Violations != tt.k || c.Conclusive != tt.n {
				t.Errorf("counts %d/%d, want %d/%d", c.Violations, c.Conclusive, tt.k, tt.n)
			}
			if tt.n > 0 && !(c.Lo <= c.Hi && c.Hi > 0) {
				t.Errorf("interval %v–%v", c.Lo, c.Hi)
			}
			if tt.value != "" && c.Text() != tt.value {
				t.Errorf("text %q, want the value alone", c.Text())
			}
		})
	}
}

// TestFencedCellGatesLikeASafetyCell: a saved cell that is not saved now
// is worse than the baseline (exit 1), as a held mutex cell that broke is.
func TestFencedCellGatesLikeASafetyCell(t *testing.T) {
	saved := fencedCell(true, []Result{fencedResult(1, Safety{Conclusive: true}, FencedRun{LockBroke: true, Rejected: 1})})
	lost := fencedCell(true, []Result{fencedResult(1, Safety{Conclusive: true, Violated: true, Kinds: map[string]int{checker.KindStaleWrite: 1}}, FencedRun{LockBroke: true})})
	m := func(c reports.MatrixCell) reports.Matrix {
		return reports.Matrix{Rows: []reports.MatrixRow{{Impl: "redis-set-nx-px", Cells: map[string]reports.MatrixCell{ColFenced: c}}}}
	}
	if c := Compare(m(saved), m(lost)); len(c.Worse) != 1 || c.Worse[0].Column != ColFenced {
		t.Errorf("saved, then not saved: %+v, want one worse cell", c)
	}
	if c := Compare(m(lost), m(saved)); len(c.Worse)+len(c.Lost) != 0 {
		t.Errorf("not saved, then saved: %+v", c)
	}
}

// TestFencedCellIsSampledLikeASafetyCell: the fenced runs are ProbeSafety
// jobs, so the sequential rule stops a cell whose not-saved rate is shown
// high, runs every seed of a saved one, and keeps the cells of a class and
// its fenced variant apart.
func TestFencedCellIsSampledLikeASafetyCell(t *testing.T) {
	lost := fencedResult(1, Safety{Conclusive: true, Violated: true, Kinds: map[string]int{checker.KindStaleWrite: 1}}, FencedRun{LockBroke: true})
	saved := fencedResult(1, Safety{Conclusive: true}, FencedRun{LockBroke: true, Rejected: 1})
	if !Sequential(lost.Job.Probe) {
		t.Fatal("the fenced runs are not sampled sequentially")
	}
	if ok, _ := Decided(lost.Job.Probe, []Result{lost}); !ok {
		t.Error("a fenced cell not saved in 1 of 1 runs is not decided")
	}
	if ok, _ := Decided(saved.Job.Probe, []Result{saved}); ok {
		t.Error("a saved fenced cell stopped before its seeds")
	}
	pause := safetyResult(ClassClientPause, 1, Safety{Conclusive: true, Violated: true})
	if keyOf(pause.Job) == keyOf(saved.Job) {
		t.Error("client-pause and its fenced variant share a cell key")
	}
	if StopsAtFirstViolation(ProbeSafety, ClassClientPauseFenced, 1) {
		t.Error("a fenced run stops at the lock's first violation, before the store could refuse the paused holder's write")
	}
}
