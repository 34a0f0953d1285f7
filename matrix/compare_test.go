package matrix

import (
	"testing"

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
