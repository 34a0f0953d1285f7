package reports

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/runstore"
)

// TestWriteRunText holds the text `locktest run` and `locktest check`
// print of a run to testdata/run.txt.golden: an invalid verdict in
// capitals, one example of each kind of anomaly with its count, the notes
// counted by kind, the run's problems, and where the report is (or that
// it was not written).
func TestWriteRunText(t *testing.T) {
	r := runstore.Results{
		Run: runstore.RunInfo{Impl: "redis-naive-del", Mode: "none", Faults: []string{"pause-client"}, Seed: 7, Expect: "valid",
			Versions: runstore.Versions{Locktest: "v0.0.0-test", Servers: map[string]string{"redis": "7.2.4"}}},
		Valid: checker.Invalid,
		Stats: map[string]float64{"ops": 120, "critical_sections": 30, "faults_injected": 2},
		Checkers: []checker.Result{
			{Checker: "mutual-exclusion", Valid: checker.Invalid, Elapsed: 1234567, Anomalies: []checker.Anomaly{
				{Kind: "overlapping-holds", Ops: []int{3, 9}, Explanation: "p1 and p2 held l at once"},
				{Kind: "overlapping-holds", Ops: []int{20, 24}, Explanation: "p2 and p0 held l at once"},
				{Kind: "lost-release", Ops: []int{30}, Explanation: "p0 released l it no longer held"},
			}},
			{Checker: "liveness", Valid: checker.Valid, Elapsed: 5000, Notes: []checker.Anomaly{
				{Kind: "slow-acquire", Ops: []int{4}}, {Kind: "slow-acquire", Ops: []int{8}},
			}},
		},
		Problems: []string{"kill-node went in once, not twice"},
	}
	var b bytes.Buffer
	WriteRunText(&b, "store/redis-naive-del/20250102T030405", r, true)
	WriteRunText(&b, "store/redis-naive-del/20250102T030406", runstore.Results{Run: runstore.RunInfo{Impl: "etcd-mutex", Mode: "fenced", Expect: "valid"}, Valid: checker.Unknown}, false)
	compareFile(t, filepath.Join("testdata", "run.txt.golden"), b.Bytes())
}
