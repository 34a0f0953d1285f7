package nemesis

import (
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
)

// Every registered fault is complete: a doc line, a family, a heal, the
// same kind in the history's registry, and, when it refuses pins, a reason.
// Its settings are flags of the run (checked by the run command's tests).
func TestEveryFaultIsComplete(t *testing.T) {
	specs := Specs()
	if len(specs) < 17 {
		t.Fatalf("%d faults registered, want the 17 faults and noop at least", len(specs))
	}
	for _, s := range specs {
		if s.Doc == "" || strings.Contains(s.Doc, "\n") {
			t.Errorf("fault %s: doc %q, want one line", s.Name, s.Doc)
		}
		if !slices.Contains(history.Families, s.Family) {
			t.Errorf("fault %s: family %q is not one of %v", s.Name, s.Family, history.Families)
		}
		k, ok := history.FaultOfOp(s.InjectOp())
		if !ok || k != s.FaultKind {
			t.Errorf("fault %s: the history's registry has %+v for op %s", s.Name, k, s.InjectOp())
		}
		if !history.IsHeal(s.Heal) {
			t.Errorf("fault %s: its heal %s is not known as a heal", s.Name, s.Heal)
		}
		if s.pins == pinNone && s.noPins == "" {
			t.Errorf("fault %s refuses pins without a reason", s.Name)
		}
		if s.pins != pinNone && s.noPins != "" {
			t.Errorf("fault %s takes pins but says why it refuses them", s.Name)
		}
	}
}

// Registering a fault whose name is taken is a programming error.
func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("a second pause-client was registered")
		}
	}()
	s, _ := Lookup("pause-client")
	Register(s)
}
