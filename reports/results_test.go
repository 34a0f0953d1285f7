package reports

import (
	"reflect"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// ms converts milliseconds to ns on the history clock.
func ms(n int64) int64 { return n * 1_000_000 }

// hist numbers ops by their position, as the recorder does.
func hist(ops ...history.Op) history.History {
	h := history.History(ops)
	for i := range h {
		h[i].Index = i
	}
	return h
}

func TestCheck(t *testing.T) {
	h := reportHistory()
	rs := []checker.Result{
		{Checker: "mutual-exclusion", Valid: checker.Invalid,
			Anomalies: []checker.Anomaly{{Kind: "overlapping-holds", Ops: []int{1, 3}, Explanation: "p1 and p2 both held l"}}},
		{Checker: "fencing-tokens", Valid: checker.Valid, Anomalies: []checker.Anomaly{}},
	}
	r := check(runstore.RunInfo{Name: "x", Expect: "invalid"}, h, rs)
	if r.Valid != checker.Invalid {
		t.Errorf("Check verdict %s, want %s (an invalid checker wins)", r.Valid, checker.Invalid)
	}
	if !r.Met() {
		t.Error("an invalid run expected to be invalid is not Met")
	}
	if !reflect.DeepEqual(r.Stats, checker.Summarize(nil, history.NewTable(h))) {
		t.Errorf("Check stats %v, want Summarize's %v", r.Stats, checker.Summarize(nil, history.NewTable(h)))
	}
	if r := check(runstore.RunInfo{}, h, nil); r.Valid != checker.Unknown {
		t.Errorf("Check without checkers gives %s, want %s", r.Valid, checker.Unknown)
	}
}
