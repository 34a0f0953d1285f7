package checker

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
)

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
			got := Summarize([]string{"pause-client", "kill-node", "isolate"}, history.NewTable(tc.h))
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("stat %s = %v, want %v (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func TestProblemsMakeAValidRunUnknown(t *testing.T) {
	valid := []Result{{Checker: "mutual-exclusion", Valid: Valid}}
	invalid := []Result{{Checker: "mutual-exclusion", Valid: Invalid}}
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
		facts   RunFacts
		h       history.History
		rs      []Result
		want    Verdict
		problem string
	}{
		{"clean", RunFacts{}, acquired, valid, Valid, ""},
		{"faults applied", RunFacts{Faults: []string{"pause-client"}}, paused, valid, Valid, ""},
		{"no acquire", RunFacts{}, nil, valid, Unknown, "no acquire succeeded"},
		{"no fault applied", RunFacts{Faults: []string{"kill-node"}}, paused, valid, Unknown, "no fault was applied"},
		{"run error", RunFacts{Errors: []string{"heal kill-node: restart n1: port in use"}}, acquired, valid, Unknown, "port in use"},
		{"invalid stays invalid", RunFacts{Errors: []string{"x"}}, acquired, invalid, Invalid, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Judge(history.NewTable(tc.h), tc.facts, tc.rs)
			if r.Valid != tc.want {
				t.Errorf("verdict %s, want %s (problems %q)", r.Valid, tc.want, r.Problems)
			}
			if tc.problem == "" && len(r.Problems) > 0 || tc.problem != "" && !strings.Contains(strings.Join(r.Problems, "; "), tc.problem) {
				t.Errorf("problems %q, want one containing %q", r.Problems, tc.problem)
			}
		})
	}
}

// hist numbers ops by their position, as the recorder does.
func hist(ops ...history.Op) history.History {
	h := history.History(ops)
	for i := range h {
		h[i].Index = i
	}
	return h
}
