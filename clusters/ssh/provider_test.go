package ssh

import (
	"testing"

	"github.com/locktest/locktest/clusters/provider"
)

// TestProviderSaysWhatItLacks: the ssh provider answers for every
// ability run asks about, and gives a reason wherever it lacks one.
func TestProviderSaysWhatItLacks(t *testing.T) {
	for _, why := range provider.Unanswered(&run{}, provider.Netem) {
		t.Errorf("ssh: %s", why)
	}
}
