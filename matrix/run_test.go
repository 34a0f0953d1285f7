package matrix

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/reports"
)

// TestSummary: the progress line of each kind of matrix run says what it
// showed.
func TestSummary(t *testing.T) {
	for _, tt := range []struct {
		r    Result
		want string
	}{
		{Result{Reentrancy: &Reentrancy{Status: reports.StatusNo, Reason: "the second acquire waited"}}, "reentrant no: the second acquire waited"},
		{Result{Err: "zookeeper jar not found"}, "did not run: zookeeper jar not found"},
		{Result{Job: Job{Probe: ProbeDeadlock}}, "no lock holder was killed"},
		{Result{Job: Job{Probe: ProbeDeadlock}, Recoveries: []Recovery{{Process: 1, After: 1500 * time.Millisecond}, {Process: 2, After: -1, Observed: 3 * time.Second}}},
			"p1's lock taken again after 1.5s, p2's lock not taken again in 3s"},
		{Result{Safety: Safety{Conclusive: true, Violated: true, Kinds: map[string]int{"overlap": 2}}}, "violation (" + reports.KindsText(map[string]int{"overlap": 2}) + ")"},
		{Result{Safety: Safety{Reason: "no fault applied"}}, "inconclusive: no fault applied"},
		{Result{Safety: Safety{Conclusive: true, Faults: 4}, Acquired: 90}, "no violation, 4 faults, 90 acquires"},
		// A fenced client-pause run says what its store did.
		{Result{Safety: Safety{Conclusive: true, Faults: 1}, Fenced: &FencedRun{LockBroke: true, Rejected: 2}}, "saved by fencing: the lock broke, the store rejected 2 stale write(s), 1 faults"},
		{Result{Safety: Safety{Conclusive: true, Violated: true, Kinds: map[string]int{"stale-write": 1}}, Fenced: &FencedRun{LockBroke: true}},
			"not saved by fencing: the store accepted (" + reports.KindsText(map[string]int{"stale-write": 1}) + ")"},
		{Result{Safety: Safety{Reason: lockHeld}, Fenced: &FencedRun{}}, "inconclusive: " + lockHeld},
	} {
		if got := tt.r.Summary(); got != tt.want {
			t.Errorf("Summary() = %q, want %q", got, tt.want)
		}
	}
}

// TestInconclusive lists the inconclusive cells of every row, sorted.
func TestInconclusive(t *testing.T) {
	m := reports.Matrix{Rows: []reports.MatrixRow{
		{Impl: "redlock", Cells: map[string]reports.MatrixCell{"mutex-none": {Status: reports.StatusInconclusive}, "deadlock": {Status: reports.StatusYes}}},
		{Impl: "etcd-mutex", Cells: map[string]reports.MatrixCell{"mutex-clock": {Status: reports.StatusInconclusive}, "mutex-none": {Status: reports.StatusInconclusive}}},
	}}
	if got, want := Inconclusive(m), []string{"etcd-mutex mutex-clock", "etcd-mutex mutex-none", "redlock mutex-none"}; !slices.Equal(got, want) {
		t.Errorf("Inconclusive = %q, want %q", got, want)
	}
	if got := Inconclusive(reports.Matrix{}); got != nil {
		t.Errorf("Inconclusive of an empty matrix = %q", got)
	}
}

// TestComparisonText: what matrix --baseline prints of a comparison,
// line by line.
func TestComparisonText(t *testing.T) {
	c := Comparison{Compared: 12,
		Worse:    []Change{{Impl: "redlock", Column: "mutex-clock", Before: "safe", After: "VIOLATED", Why: "a violation where the baseline had none"}},
		Lost:     []Change{{Impl: "etcd-mutex", Column: "deadlock", Before: "yes", After: "inconclusive"}},
		Survival: []Change{{Impl: "redlock", Column: "mutex-pause", Why: "p = 0.01"}},
	}
	var b bytes.Buffer
	c.WriteText(&b)
	want := `baseline: 12 cells compared, 1 worse, 1 no longer shown
  worse: redlock mutex-clock: VIOLATED (was safe): a violation where the baseline had none
  no longer shown: etcd-mutex deadlock: inconclusive (was yes)
baseline: time to failure compared in 1 cells (log-rank test, worse below p = 0.05)
  redlock mutex-pause: p = 0.01
`
	if b.String() != want {
		t.Errorf("WriteText:\n%s\nwant\n%s", b.String(), want)
	}
}
