package localprovider

import (
	"testing"

	"github.com/locktest/locktest/clusters/provider"
)

// TestProviderSaysWhatItLacks: the local provider answers for every
// ability run asks about, and gives a reason wherever it lacks one.
func TestProviderSaysWhatItLacks(t *testing.T) {
	for _, why := range provider.Unanswered(&run{}) {
		t.Errorf("local with namespaces: %s", why)
	}
	none := "the run has no network namespaces"
	for _, why := range provider.Unanswered(&run{netWhy: none, netemWhy: none}, provider.Network, provider.Netem) {
		t.Errorf("local without namespaces: %s", why)
	}
}
