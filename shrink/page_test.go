package shrink

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// TestShrinkPageReadsTheLog: the shrink's page and the store's index read
// shrink.json with reports.ShrinkLog, not with Log (package reports cannot
// import this one). A log with every field set, written as a search
// writes it, reads back through reports.ShrinkLog to the same JSON: a
// field added to Log and not to reports.ShrinkLog fails here.
func TestShrinkPageReadsTheLog(t *testing.T) {
	if LogFile != reports.ShrinkFile || ScheduleFile != reports.ShrinkScheduleFile {
		t.Errorf("the files are %s and %s here, %s and %s in reports", LogFile, ScheduleFile, reports.ShrinkFile, reports.ShrinkScheduleFile)
	}
	size := runstore.ShrinkSize{Faults: 2, Time: "4s", Clients: 3, Locks: 1}
	tr := Trial{Run: "/s/c001/1", Verdict: "INVALID", Failed: true, FirstViolation: 2 * time.Second}
	log := Log{SchemaVersion: 1, From: "store/gc/latest", Anomaly: Target{"mutual-exclusion", "stale-write"}, Need: 2, Replays: 3, Grace: "3s", Budget: "30m0s",
		Started: "2025-01-01T00:00:00Z", Elapsed: "5m0s", BudgetSpent: true, Interrupted: true, Before: size, After: size, Smallest: "c001", ReplaysRun: 4,
		Steps:         []StepLog{{Step: Step{ID: "c001", Change: "no faults", Size: Size{Faults: 2}, Trials: []Trial{tr}, Accepted: true, NotRun: "x"}, Size: size, Schedule: "/s/c001.json"}},
		Confirmations: []Trial{tr}}
	dir := t.TempDir()
	if err := runstore.WriteJSON(filepath.Join(dir, LogFile), log); err != nil {
		t.Fatal(err)
	}
	back, err := reports.ReadShrink(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	for _, c := range []struct {
		v   any
		out *any
	}{{log, &want}, {back, &got}} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, c.out); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("shrink.json read by reports.ShrinkLog and written again differs:\nwrote %v\nread  %v", want, got)
	}
}
