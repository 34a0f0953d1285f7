package shrink

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
)

// goodHistory is an overlap: p1 acquires the lock p0 holds.
const goodHistory = `{"index":0,"type":"invoke","process":0,"f":"acquire","time":10,"value":{"lock":"l"}}
{"index":1,"type":"ok","process":0,"f":"acquire","time":20,"value":{"lock":"l","token":1,"lock_value":"a","valid_until":1000}}
{"index":2,"type":"invoke","process":1,"f":"acquire","time":30,"value":{"lock":"l"}}
{"index":3,"type":"ok","process":1,"f":"acquire","time":40,"value":{"lock":"l","token":2,"lock_value":"b","valid_until":1000}}
`

// TestShrinkJudgesAReplay: the anomaly kept is the run's first proven
// one, and a replay counts as failing the same way when the same checker
// finds one of its kind, at the time its last op proves it, from the
// start of the replay's fault phase.
func TestShrinkJudgesAReplay(t *testing.T) {
	// goodHistory, its times in ms.
	ms := strings.NewReplacer(`"time":10,`, `"time":10000000,`, `"time":20,`, `"time":20000000,`, `"time":30,`, `"time":30000000,`, `"time":40,`, `"time":40000000,`, `"valid_until":1000}`, `"valid_until":1000000000}`).Replace(goodHistory)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, runstore.HistoryFile), []byte(ms), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := history.ReadTable(filepath.Join(dir, runstore.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	// The run as `locktest check` decides it.
	info := runstore.RunInfo{Name: "r", Expect: "valid"}
	res := runstore.New(info, checker.Decide(context.Background(), h, run.FactsOf(info), 0))
	tg, first, err := pickTarget(res, h, "")
	if err != nil {
		t.Fatal(err)
	}
	if tg != (Target{"mutual-exclusion", "overlapping-holds"}) || first != 40*time.Millisecond {
		t.Errorf("target %v at %v, want mutual-exclusion's overlapping-holds at 40ms (op 3)", tg, first)
	}
	if _, _, err := pickTarget(res, h, "mutual-exclusion:overlapping-holds"); err != nil {
		t.Errorf("CHECKER:KIND refused: %v", err)
	}
	// The replay's fault phase began at 15ms of its history.
	p := nemesis.Plan{SchemaVersion: nemesis.PlanSchemaVersion, Began: 15 * time.Millisecond, Faults: []nemesis.PlannedFault{}}
	if err := writePlan(filepath.Join(dir, runstore.ScheduleFile), p); err != nil {
		t.Fatal(err)
	}
	tr, err := judge(dir, res, tg)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Failed || tr.FirstViolation != 25*time.Millisecond || tr.Run != dir || tr.Verdict != "INVALID" {
		t.Errorf("trial %+v, want failed at 25ms", tr)
	}
	tr, err = judge(dir, res, Target{"mutual-exclusion", "stale-write"})
	if err != nil || tr.Failed {
		t.Errorf("a replay without the kind counted as failing: %+v %v", tr, err)
	}
}
