package ssh

import (
	"testing"

	"github.com/locktest/locktest/clusters/provider"
)

// TestProviderSaysWhatItLacks: the ssh provider answers for every
// ability run asks about, and gives a reason wherever it lacks one.
func TestProviderSaysWhatItLacks(t *testing.T) {
	for _, c := range []struct {
		p    *run
		lack []string
	}{
		{&run{}, []string{provider.Netem}},
	} {
		for _, why := range provider.Unanswered(c.p, c.lack...) {
			t.Errorf("ssh %+v: %s", c.p, why)
		}
	}
}
