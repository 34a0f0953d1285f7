package checker

import (
	"slices"
	"testing"
)

// TestKindsAreWhatCheckersReport ties the kind constants to the checkers'
// real output: the golden histories, whose anomalies TestGolden compares
// with what the checkers find, must show every anomaly kind, and name no
// kind that is not defined in checker/kinds.go.
func TestKindsAreWhatCheckersReport(t *testing.T) {
	gs := readGolden(t)
	seen := map[string]bool{}
	for _, g := range gs {
		for _, m := range []map[string][]goldenAnomaly{g.Anomalies, g.Notes} {
			for c, as := range m {
				for _, a := range as {
					seen[a.Kind] = true
					if !IsAnomalyKind(a.Kind) && !slices.Contains(NoteKinds, a.Kind) {
						t.Errorf("%s: checker %s reports kind %q, which checker/kinds.go does not define", g.File, c, a.Kind)
					}
				}
			}
		}
	}
	for _, k := range AnomalyKinds {
		if !seen[k] {
			t.Errorf("no golden history shows the anomaly kind %q: add one to testdata/golden.json", k)
		}
	}
	for _, k := range SafetyKinds {
		if k == KindStuckLock {
			t.Errorf("%s is a liveness kind, not a safety kind", k)
		}
	}
}
