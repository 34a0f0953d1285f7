package reports

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

func TestMet(t *testing.T) {
	for _, tc := range []struct {
		expect string
		valid  checker.Verdict
		want   bool
	}{
		{"valid", checker.Valid, true},
		{"valid", checker.Invalid, false},
		{"valid", checker.Unknown, false},
		{"", checker.Valid, true}, // valid is the default
		{"", checker.Invalid, false},
		{"", checker.Unknown, false},
		{"invalid", checker.Invalid, true},
		{"invalid", checker.Valid, false},
		{"invalid", checker.Unknown, false},
	} {
		r := Results{Run: RunInfo{Expect: tc.expect}, Valid: tc.valid}
		if got := r.Met(); got != tc.want {
			t.Errorf("expect %q, verdict %s: Met() = %v, want %v", tc.expect, tc.valid, got, tc.want)
		}
	}
}

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

func TestSummarize(t *testing.T) {
	pause := history.Value{Targets: []string{"p1"}, Duration: ms(500)}
	kill := history.Value{Targets: []string{"n2"}, Duration: ms(1000)}
	for _, tc := range []struct {
		name string
		h    history.History
		// want lists stats that must have these values; a missing key
		// counts as 0.
		want map[string]float64
	}{
		{name: "empty", h: nil, want: map[string]float64{"ops": 0, "critical_sections": 0, "faults_injected": 0}},
		{name: "acquires", h: hist(
			history.Op{Type: history.Invoke, Process: 1, F: history.Acquire, Time: ms(1)},
			history.Op{Type: history.OK, Process: 1, F: history.Acquire, Time: ms(2)},
			history.Op{Type: history.Invoke, Process: 2, F: history.Acquire, Time: ms(3)},
			history.Op{Type: history.Fail, Process: 2, F: history.Acquire, Time: ms(4)},
			history.Op{Type: history.Invoke, Process: 1, F: history.Release, Time: ms(5)},
			history.Op{Type: history.OK, Process: 1, F: history.Release, Time: ms(6)},
			history.Op{Type: history.Invoke, Process: 3, F: history.Acquire, Time: ms(7)},
			history.Op{Type: history.Info, Process: 3, F: history.Acquire, Time: ms(8)},
			history.Op{Type: history.Invoke, Process: 2, F: history.Acquire, Time: ms(9)},
			history.Op{Type: history.OK, Process: 2, F: history.Acquire, Time: ms(2500)},
		), want: map[string]float64{"ops": 10, "critical_sections": 2, "faults_injected": 0, "seconds": 2.5}},
		{name: "faults", h: hist(
			history.Op{Type: history.Invoke, Process: -1, F: "pause-client", Time: ms(10)},
			history.Op{Type: history.OK, Process: -1, F: "pause-client", Time: ms(11), Value: pause},
			history.Op{Type: history.Invoke, Process: -1, F: "resume-client", Time: ms(511)},
			history.Op{Type: history.OK, Process: -1, F: "resume-client", Time: ms(512), Value: history.Value{Targets: []string{"p1"}}},
			// A failed injection and one of unknown outcome are not counted.
			history.Op{Type: history.Invoke, Process: -1, F: "pause-client", Time: ms(600)},
			history.Op{Type: history.Fail, Process: -1, F: "pause-client", Time: ms(601), Value: pause, Error: "not applied"},
			history.Op{Type: history.Invoke, Process: -1, F: "resume-client", Time: ms(602)},
			history.Op{Type: history.OK, Process: -1, F: "resume-client", Time: ms(603)},
			history.Op{Type: history.Invoke, Process: -1, F: "kill-node", Time: ms(700)},
			history.Op{Type: history.Info, Process: -1, F: "kill-node", Time: ms(701), Value: kill, Error: "timeout"},
			history.Op{Type: history.Invoke, Process: -1, F: "restart-node", Time: ms(702)},
			history.Op{Type: history.OK, Process: -1, F: "restart-node", Time: ms(703), Value: history.Value{Targets: []string{"n2"}}},
			history.Op{Type: history.Invoke, Process: -1, F: "kill-node", Time: ms(800)},
			history.Op{Type: history.OK, Process: -1, F: "kill-node", Time: ms(801), Value: kill},
			history.Op{Type: history.Invoke, Process: -1, F: "restart-node", Time: ms(1801)},
			history.Op{Type: history.OK, Process: -1, F: "restart-node", Time: ms(2000), Value: history.Value{Targets: []string{"n2"}}},
		), want: map[string]float64{"ops": 16, "critical_sections": 0, "faults_injected": 2, "seconds": 2}},
		{name: "partition shapes", h: hist(
			// --faults isolate is recorded as partition-isolate; its heal
			// is not an injection.
			history.Op{Type: history.Invoke, Process: -1, F: "partition-isolate", Time: ms(10)},
			history.Op{Type: history.OK, Process: -1, F: "partition-isolate", Time: ms(11)},
			history.Op{Type: history.Invoke, Process: -1, F: "heal-network", Time: ms(20)},
			history.Op{Type: history.OK, Process: -1, F: "heal-network", Time: ms(21)},
		), want: map[string]float64{"ops": 4, "faults_injected": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize([]string{"pause-client", "kill-node", "isolate"}, tc.h)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("stat %s = %v, want %v (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func sampleResults() Results {
	return Results{
		Run: RunInfo{
			Name: "redlock-pause", Impl: "redlock", ImplDoc: "Redlock over 5 masters", Backend: "redis",
			Nodes: 5, Faults: []string{"pause-client"}, Clients: 3, Locks: 1, TTL: "1s", Duration: "10s",
			Seed: 7, Mode: "counter", PausePoint: "before-write", ClientPause: "2s",
			Command: "locktest run --impl redlock --seed 7", Version: "v0.1.0",
			Started: "2025-01-02T03:04:05Z", Elapsed: "10.2s", Expect: "invalid",
			Errors: []string{"worker p2 exited"},
		},
		Valid: checker.Invalid,
		Checkers: []checker.Result{
			{Checker: "mutual-exclusion", Valid: checker.Invalid,
				Anomalies: []checker.Anomaly{{Kind: "overlapping-holds", Ops: []int{1, 3}, Explanation: "p1 and p2 both held l"}},
				Notes:     []checker.Anomaly{{Kind: "expired-lease", Ops: []int{4}, Explanation: "p1 held past its lease"}},
				Stats:     map[string]float64{"holds": 2, "overlaps": 1}, Elapsed: 1234},
			{Checker: "fencing-tokens", Valid: checker.Valid, Anomalies: []checker.Anomaly{}, Error: ""},
		},
		Stats: map[string]float64{"ops": 6, "critical_sections": 2, "seconds": 0.25},
	}
}

func TestResultsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sampleResults()
	if err := WriteResults(dir, want); err != nil {
		t.Fatalf("WriteResults: %v", err)
	}
	got, err := ReadResults(dir)
	if err != nil {
		t.Fatalf("ReadResults: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the results:\ngot  %+v\nwant %+v", got, want)
	}
	// Written through a temporary file that is gone afterwards.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != ResultsFile {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only %s", names, ResultsFile)
	}
	// Writing again replaces the file.
	want.Valid = checker.Valid
	if err := WriteResults(dir, want); err != nil {
		t.Fatalf("second WriteResults: %v", err)
	}
	if got, err := ReadResults(dir); err != nil || got.Valid != checker.Valid {
		t.Errorf("after a rewrite ReadResults = %s, %v; want %s", got.Valid, err, checker.Valid)
	}
}

func TestReadResultsErrors(t *testing.T) {
	t.Run("missing dir", func(t *testing.T) {
		_, err := ReadResults(filepath.Join(t.TempDir(), "no-such-run"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadResults of a missing dir: %v, want an error satisfying errors.Is(err, os.ErrNotExist)", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := ReadResults(t.TempDir())
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadResults of a dir without %s: %v, want os.ErrNotExist", ResultsFile, err)
		}
	})
	t.Run("corrupt file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(`{"run": {`), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadResults(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadResults of a corrupt file: %v, want a decoding error", err)
		}
	})
}

func TestWriteResultsToMissingDir(t *testing.T) {
	if err := WriteResults(filepath.Join(t.TempDir(), "gone"), sampleResults()); err == nil {
		t.Error("WriteResults into a missing directory succeeded")
	}
}

func TestCheck(t *testing.T) {
	h := reportHistory()
	rs := sampleResults().Checkers
	r := Check(RunInfo{Name: "x", Expect: "invalid"}, h, rs)
	if r.Valid != checker.Invalid {
		t.Errorf("Check verdict %s, want %s (an invalid checker wins)", r.Valid, checker.Invalid)
	}
	if !r.Met() {
		t.Error("an invalid run expected to be invalid is not Met")
	}
	if !reflect.DeepEqual(r.Stats, Summarize(nil, h)) {
		t.Errorf("Check stats %v, want Summarize's %v", r.Stats, Summarize(nil, h))
	}
	if r := Check(RunInfo{}, h, nil); r.Valid != checker.Unknown {
		t.Errorf("Check without checkers gives %s, want %s", r.Valid, checker.Unknown)
	}
}

func TestProblemsMakeAValidRunUnknown(t *testing.T) {
	valid := []checker.Result{{Checker: "mutual-exclusion", Valid: checker.Valid}}
	invalid := []checker.Result{{Checker: "mutual-exclusion", Valid: checker.Invalid}}
	acquired := hist(
		history.Op{Type: history.Invoke, Process: 1, F: history.Acquire, Time: ms(1)},
		history.Op{Type: history.OK, Process: 1, F: history.Acquire, Time: ms(2)},
	)
	paused := append(append(history.History{}, acquired...),
		history.Op{Type: history.Invoke, Process: -1, F: "pause-client", Time: ms(3)},
		history.Op{Type: history.OK, Process: -1, F: "pause-client", Time: ms(4), Value: history.Value{Targets: []string{"p1"}}},
	)
	paused = hist(paused...)
	for _, tc := range []struct {
		name    string
		info    RunInfo
		h       history.History
		rs      []checker.Result
		want    checker.Verdict
		problem string
	}{
		{"clean", RunInfo{}, acquired, valid, checker.Valid, ""},
		{"faults applied", RunInfo{Faults: []string{"pause-client"}}, paused, valid, checker.Valid, ""},
		{"no acquire", RunInfo{}, nil, valid, checker.Unknown, "no acquire succeeded"},
		{"no fault applied", RunInfo{Faults: []string{"kill-node"}}, paused, valid, checker.Unknown, "no fault was applied"},
		{"run error", RunInfo{Errors: []string{"heal kill-node: restart n1: port in use"}}, acquired, valid, checker.Unknown, "port in use"},
		{"invalid stays invalid", RunInfo{Errors: []string{"x"}}, acquired, invalid, checker.Invalid, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.info, tc.h, tc.rs)
			if r.Valid != tc.want {
				t.Errorf("verdict %s, want %s (problems %q)", r.Valid, tc.want, r.Problems)
			}
			if tc.problem == "" && len(r.Problems) > 0 || tc.problem != "" && !strings.Contains(strings.Join(r.Problems, "; "), tc.problem) {
				t.Errorf("problems %q, want one containing %q", r.Problems, tc.problem)
			}
		})
	}
}
