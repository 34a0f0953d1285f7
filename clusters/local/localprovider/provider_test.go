package localprovider

import (
	"testing"

	"github.com/locktest/locktest/clusters/provider"
)

// TestProviderSaysWhatItLacks: the local provider answers for every
// ability run asks about, and gives a reason wherever it lacks one.
func TestProviderSaysWhatItLacks(t *testing.T) {
	for _, c := range []struct {
		p    *run
		lack []string
	}{
		{&run{netWhy: "the run has no network namespaces", netemWhy: "the run has no network namespaces"}, []string{provider.Network, provider.Netem}},
		{&run{}, nil},
	} {
		for _, why := range provider.Unanswered(c.p, c.lack...) {
			t.Errorf("local %+v: %s", c.p, why)
		}
	}
}
