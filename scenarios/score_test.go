package scenarios

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// hist is a history whose op i happens at i seconds.
func hist(n int) history.History {
	h := make(history.History, n)
	for i := range h {
		h[i] = history.Op{Index: i, Time: int64(i) * 1e9}
	}
	return h
}

func results(valid checker.Verdict, problems []string, anomalies ...checker.Anomaly) runstore.Results {
	return runstore.Results{Valid: valid, Problems: problems, Checkers: []checker.Result{
		{Checker: "mutual-exclusion", Valid: valid, Anomalies: anomalies},
	}}
}

// faulty makes res a run of 3 pause-node faults, effective of them in force
// while a client held the lock.
func faulty(res runstore.Results, effective float64) runstore.Results {
	res.Run.Faults = []string{"pause-node"}
	res.Stats = map[string]float64{"faults_injected": 3, "faults_effective": effective}
	return res
}

func TestClassify(t *testing.T) {
	viol := Scenario{Name: "v", Expect: ExpectViolation, Anomalies: []string{"stale-write"}}
	anyViol := Scenario{Name: "any", Expect: ExpectViolation}
	safe := Scenario{Name: "s", Expect: ExpectSafe}
	stale := checker.Anomaly{Kind: "stale-write", Ops: []int{7, 5}}
	foreign := checker.Anomaly{Kind: "foreign-release", Ops: []int{2, 3}}
	tests := []struct {
		name    string
		s       Scenario
		res     runstore.Results
		outcome string
		first   float64
		reason  string
	}{
		{"counted kind", viol, results(checker.Invalid, nil, foreign, stale), ExpectViolation, 5, ""},
		{"any kind counts without a list", anyViol, results(checker.Invalid, nil, foreign), ExpectViolation, 2, ""},
		{"other kind only", viol, results(checker.Invalid, nil, foreign), ExpectSafe, -1, "other anomalies: foreign-release ×1"},
		{"valid", viol, results(checker.Valid, nil), ExpectSafe, -1, ""},
		{"safe scenario, invalid run", safe, results(checker.Invalid, nil, foreign), ExpectViolation, 2, ""},
		{"problems make it inconclusive", viol, results(checker.Invalid, []string{"fault partition unavailable: not root"}, stale), "", -1, "fault partition unavailable: not root"},
		{"undecided checker", safe, results(checker.Unknown, nil), "", -1, "checkers could not decide: mutual-exclusion"},
		{"faults that met no holder", safe, faulty(results(checker.Valid, nil), 0), "", -1, "none of the 3 faults applied was in force while a client held the lock: they had no chance to matter"},
		{"a fault that met a holder", safe, faulty(results(checker.Valid, nil), 1), ExpectSafe, -1, ""},
		{"a violation though no fault met a holder", viol, faulty(results(checker.Invalid, nil, stale), 0), ExpectViolation, 5, ""},
	}
	for _, tt := range tests {
		var r RunResult
		Classify(tt.s, tt.res, hist(10), &r)
		if r.Outcome != tt.outcome || r.FirstViolation != tt.first || r.Reason != tt.reason {
			t.Errorf("%s: outcome %q first %v reason %q; want %q %v %q", tt.name, r.Outcome, r.FirstViolation, r.Reason, tt.outcome, tt.first, tt.reason)
		}
		if r.Workload != 9 {
			t.Errorf("%s: workload %v s, want 9 s (the last op's time)", tt.name, r.Workload)
		}
	}
}

// safeRuns returns n safe runs with seeds 1..n.
func safeRuns(n int, run func(int64, string, float64, string) RunResult) []RunResult {
	var out []RunResult
	for i := 1; i <= n; i++ {
		out = append(out, run(int64(i), ExpectSafe, -1, fmt.Sprintf("/st/v/%d", i)))
	}
	return out
}

func TestScore(t *testing.T) {
	viol := Scenario{Name: "v", Claim: 2, Title: "t", Source: "s", Expect: ExpectViolation,
		Predictions: map[string]string{"kleppmann": "violation", "antirez": "safe — ...", "articles": "violation"}}
	safe := viol
	safe.Expect = ExpectSafe
	run := func(seed int64, outcome string, first float64, dir string) RunResult {
		r := RunResult{Seed: seed, Outcome: outcome, FirstViolation: first, Dir: dir, Kinds: map[string]int{}, Seconds: 10}
		if outcome == ExpectViolation {
			r.Kinds["overlapping-holds"] = 2
		}
		if outcome == "" {
			r.Reason = "not root"
		}
		return r
	}
	tests := []struct {
		name       string
		s          Scenario
		runs       []RunResult
		verdict    string
		violations int
		conclusive int
		first      float64
		report     string
		agrees     string // kleppmann, antirez, articles
	}{
		{"reproduced once of two", viol, []RunResult{run(1, ExpectSafe, -1, "/st/v/1"), run(2, ExpectViolation, 4.5, "/st/v/2")},
			reports.Reproduced, 1, 2, 4.5, "../st/v/2/report.html", "yes,no,yes"},
		{"never", viol, []RunResult{run(1, ExpectSafe, -1, "/st/v/1"), run(2, ExpectSafe, -1, "/st/v/2")},
			reports.NotReproduced, 0, 2, -1, "../st/v/1/report.html", "no,yes,no"},
		{"nothing conclusive", viol, []RunResult{run(1, "", -1, ""), run(2, "", -1, "")},
			reports.Inconclusive, 0, 0, -1, "", ",,"},
		{"violation despite an inconclusive run", viol, []RunResult{run(1, "", -1, ""), run(2, ExpectViolation, 1, "/st/v/2")},
			reports.Reproduced, 1, 1, 1, "../st/v/2/report.html", "yes,no,yes"},
		{"safe, too few runs to hold", safe, []RunResult{run(1, ExpectSafe, -1, "/st/v/1"), run(2, ExpectSafe, -1, "/st/v/2")},
			reports.NotRefuted, 0, 2, -1, "../st/v/1/report.html", "no,yes,no"},
		{"safe held over 16 runs", safe, safeRuns(16, run), reports.Held, 0, 16, -1, "../st/v/1/report.html", "no,yes,no"},
		{"safe not refuted over 15 runs", safe, safeRuns(15, run), reports.NotRefuted, 0, 15, -1, "../st/v/1/report.html", "no,yes,no"},
		{"safe broken", safe, []RunResult{run(1, ExpectSafe, -1, "/st/v/1"), run(2, ExpectViolation, 3, "/st/v/2")},
			reports.Refuted, 1, 2, 3, "../st/v/2/report.html", "yes,no,yes"},
		{"safe never claimed on an inconclusive run", safe, []RunResult{run(1, ExpectSafe, -1, "/st/v/1"), run(2, "", -1, "")},
			reports.Inconclusive, 0, 1, -1, "../st/v/1/report.html", "no,yes,no"},
	}
	for _, tt := range tests {
		row := Score(tt.s, tt.runs, "/out", DefaultMaxRate)
		if row.Verdict != tt.verdict || row.Violations != tt.violations || row.Conclusive != tt.conclusive || row.FirstViolation != tt.first || row.Report != tt.report {
			t.Errorf("%s: %+v", tt.name, row)
		}
		var ag []string
		for _, p := range row.Predictions {
			ag = append(ag, p.Agrees)
		}
		if strings.Join(ag, ",") != tt.agrees || row.Predictions[0].Side != "kleppmann" || row.Predictions[1].Side != "antirez" {
			t.Errorf("%s: predictions %+v, want agreement %s", tt.name, row.Predictions, tt.agrees)
		}
		if tt.verdict != reports.Reproduced && row.Reason == "" {
			t.Errorf("%s: %s without a reason", tt.name, tt.verdict)
		}
		if row.Conclusive > 0 {
			if math.Abs(row.Rate-float64(tt.violations)/float64(tt.conclusive)) > 1e-9 || row.Lo > row.Rate || row.Hi < row.Rate {
				t.Errorf("%s: rate %v not inside [%v, %v]", tt.name, row.Rate, row.Lo, row.Hi)
			}
		}
		if len(row.Seeds) != len(tt.runs) || row.Verdict == reports.Held && row.Upper >= row.MaxRate {
			t.Errorf("%s: seeds %d, upper %v, verdict %s", tt.name, len(row.Seeds), row.Upper, row.Verdict)
		}
		if !strings.Contains(row.Command, "--seed") || row.Runs != len(tt.runs) || row.Seconds != 10*float64(len(tt.runs)) {
			t.Errorf("%s: command %q runs %d seconds %v", tt.name, row.Command, row.Runs, row.Seconds)
		}
	}
}

// TestSurvivalSample: a violation fails at its first violation (or at the
// end of its workload when that time is unknown), a safe run is censored
// at its workload's end, and inconclusive runs, or safe runs that kept no
// workload time, are left out; Score's row carries the curve.
func TestSurvivalSample(t *testing.T) {
	runs := []RunResult{
		{Seed: 1, Outcome: ExpectViolation, FirstViolation: 2.5, Workload: 4},
		{Seed: 2, Outcome: ExpectViolation, FirstViolation: -1, Workload: 6},
		{Seed: 3, Outcome: ExpectSafe, FirstViolation: -1, Workload: 10},
		{Seed: 4, Outcome: "", Reason: "not root", FirstViolation: -1, Workload: 10},
		{Seed: 5, Outcome: ExpectSafe, FirstViolation: -1},
		{Seed: 6, Outcome: ExpectViolation, FirstViolation: 7, Workload: 7.5},
	}
	got := SurvivalSample(runs)
	want := []stats.Observation{{Time: 2.5, Event: true}, {Time: 6, Event: true}, {Time: 10}, {Time: 7, Event: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sample %+v, want %+v", got, want)
	}
	row := Score(Scenario{Name: "v", Expect: ExpectViolation}, runs, "/out", DefaultMaxRate)
	sv := row.Survival
	if sv == nil || sv.Runs != 4 || sv.Violations != 3 || sv.ExposureS != 25.5 || sv.MedianS == nil || *sv.MedianS != 6 {
		t.Fatalf("survival %+v; want 4 runs, 3 violations, 25.5 s observed, median 6 s (where half the runs had broken)", sv)
	}
	if none := Score(Scenario{Name: "v", Expect: ExpectViolation}, runs[3:4], "/out", DefaultMaxRate); none.Survival != nil {
		t.Errorf("an inconclusive run alone gave a curve: %+v", none.Survival)
	}
}

// TestScoreLinksARunFromARelativeBoard: a board folder given relative to
// the working folder (debate --store store) still links its run's report
// when the run's folder is absolute.
func TestScoreLinksARunFromARelativeBoard(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	s := Scenario{Name: "x", Claim: 1, Expect: ExpectViolation}
	runs := []RunResult{{Seed: 1, Outcome: ExpectViolation, Dir: filepath.Join(wd, "store", "x", "20260101T000000")}}
	row := Score(s, runs, filepath.Join("store", "debate", "t"), DefaultMaxRate)
	if want := filepath.Join("..", "..", "x", "20260101T000000", "report.html"); row.Report != want {
		t.Errorf("report link %q, want %q", row.Report, want)
	}
}
