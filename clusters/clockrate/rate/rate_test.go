package rate

import (
	"errors"
	"testing"
)

// TestSetWithoutThePatchedRuntime: a normal build says it cannot, and a
// rate that is not positive is refused.
func TestSetWithoutThePatchedRuntime(t *testing.T) {
	if err := Set(2); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Set(2) in a normal build: %v, want ErrNotBuilt", err)
	}
	for _, f := range []float64{0, -1} {
		if err := Set(f); err == nil || errors.Is(err, ErrNotBuilt) {
			t.Errorf("Set(%v): %v, want a refusal", f, err)
		}
	}
}
