package matrix

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/internal/stats"
	"github.com/locktest/locktest/reports"
)

func matrixOf(cells map[string]map[string]reports.MatrixCell) reports.Matrix {
	var m reports.Matrix
	for impl, cs := range cells {
		m.Rows = append(m.Rows, reports.MatrixRow{Impl: impl, Cells: cs})
	}
	return m
}

func TestCompare(t *testing.T) {
	held := reports.MatrixCell{Status: reports.StatusHeld, Value: "0/5 runs", Runs: 5, Conclusive: 5, Hi: 0.43}
	rare := reports.MatrixCell{Status: reports.StatusViolated, Value: "1/20 runs", Runs: 20, Conclusive: 20, Violations: 1, Lo: 0.009, Hi: 0.24}
	often := reports.MatrixCell{Status: reports.StatusViolated, Value: "19/20 runs", Runs: 20, Conclusive: 20, Violations: 19, Lo: 0.76, Hi: 0.99}
	inconclusive := reports.MatrixCell{Status: reports.StatusInconclusive, Reason: "not root"}
	recovers := reports.MatrixCell{Status: reports.StatusRecovers}
	stuck := reports.MatrixCell{Status: reports.StatusStuck}
	tests := []struct {
		name        string
		before, now reports.MatrixCell
		worse, lost int
	}{
		{"held stays held", held, held, 0, 0},
		{"held now violated", held, rare, 1, 0},
		{"inconclusive now violated", inconclusive, rare, 1, 0},
		{"violated now held", rare, held, 0, 0},
		{"rate within the interval", often, often, 0, 0},
		{"rate up beyond the interval", rare, often, 1, 0},
		{"rate down", often, rare, 0, 0},
		{"recovers now stuck", recovers, stuck, 1, 0},
		{"held now inconclusive", held, inconclusive, 0, 1},
		{"violated now inconclusive", rare, inconclusive, 0, 0},
	}
	for _, tt := range tests {
		base := matrixOf(map[string]map[string]reports.MatrixCell{"redlock": {"mutex-partition": tt.before}, "gone": {"mutex-none": held}})
		now := matrixOf(map[string]map[string]reports.MatrixCell{"redlock": {"mutex-partition": tt.now, "new-column": held}, "new-impl": {"mutex-none": rare}})
		c := Compare(base, now)
		if len(c.Worse) != tt.worse || len(c.Lost) != tt.lost || c.Compared != 1 {
			t.Errorf("%s: %d worse, %d lost, %d compared; want %d, %d, 1: %+v", tt.name, len(c.Worse), len(c.Lost), c.Compared, tt.worse, tt.lost, c)
		}
		for _, ch := range append(c.Worse, c.Lost...) {
			if ch.Impl != "redlock" || ch.Column != "mutex-partition" || ch.Why == "" || ch.Before == "" || ch.After == "" {
				t.Errorf("%s: change %+v", tt.name, ch)
			}
		}
	}
}

// TestCompareSurvival: a cell whose lock now breaks sooner, with the same
// violation count, is worse by the log-rank test, with both medians in
// its reason; one that breaks later, or as soon, is not; a cell without
// times on one side is not compared. The numbers are hand-built: 8 runs
// that broke at 9 to 16 s against 8 that broke at 0.5 to 4 s.
func TestCompareSurvival(t *testing.T) {
	late := []stats.Observation{{Time: 9, Event: true}, {Time: 10, Event: true}, {Time: 11, Event: true}, {Time: 12, Event: true},
		{Time: 13, Event: true}, {Time: 14, Event: true}, {Time: 15, Event: true}, {Time: 16, Event: true}}
	early := []stats.Observation{{Time: 0.5, Event: true}, {Time: 1, Event: true}, {Time: 1.5, Event: true}, {Time: 2, Event: true},
		{Time: 2.5, Event: true}, {Time: 3, Event: true}, {Time: 3.5, Event: true}, {Time: 4, Event: true}}
	cell := func(obs []stats.Observation) reports.MatrixCell {
		return reports.MatrixCell{Status: reports.StatusViolated, Value: "8/8 runs", Runs: 8, Conclusive: 8, Violations: 8, Lo: 0.68, Hi: 1,
			Survival: reports.NewSurvival(obs)}
	}
	clean := reports.MatrixCell{Status: reports.StatusHeld, Value: "0/8 runs", Runs: 8, Conclusive: 8, Hi: 0.32,
		Survival: reports.NewSurvival([]stats.Observation{{Time: 20}, {Time: 20}, {Time: 20}, {Time: 20}, {Time: 20}, {Time: 20}, {Time: 20}, {Time: 20}})}
	tests := []struct {
		name         string
		before, now  reports.MatrixCell
		worse, times int
	}{
		{"breaks sooner", cell(late), cell(early), 1, 1},
		{"breaks later", cell(early), cell(late), 0, 1},
		{"the same", cell(late), cell(late), 0, 1},
		{"no times in the baseline", reports.MatrixCell{Status: reports.StatusViolated, Runs: 8, Conclusive: 8, Violations: 8, Lo: 0.68, Hi: 1}, cell(early), 0, 0},
		{"clean on both sides", clean, clean, 0, 0},
		// A cell the sequential rule stopped at its first violated run,
		// which came before all of the baseline's: one cell in six does
		// that by chance, which the chi-square alone called worse (p
		// 0.025); the exact test says 1/6.
		{"one run that broke first", cell(late[:5]), reports.MatrixCell{Status: reports.StatusViolated, Value: "1/1 runs", Runs: 1, Conclusive: 1, Violations: 1, Lo: 0.21, Hi: 1,
			Survival: reports.NewSurvival(early[:1])}, 0, 1},
	}
	for _, tt := range tests {
		base := matrixOf(map[string]map[string]reports.MatrixCell{"redlock": {"mutex-client-pause": tt.before}})
		now := matrixOf(map[string]map[string]reports.MatrixCell{"redlock": {"mutex-client-pause": tt.now}})
		c := Compare(base, now)
		if len(c.Worse) != tt.worse || len(c.Survival) != tt.times {
			t.Errorf("%s: %d worse, %d compared by time; want %d, %d: %+v", tt.name, len(c.Worse), len(c.Survival), tt.worse, tt.times, c)
			continue
		}
		if tt.worse == 1 {
			why := c.Worse[0].Why
			for _, want := range []string{"survival worse", "median 2.0 s", "12 s (95% CI 9.0–15 s) in the baseline", "log-rank p = "} {
				if !strings.Contains(why, want) {
					t.Errorf("%s: %q lacks %q", tt.name, why, want)
				}
			}
		}
	}
}
