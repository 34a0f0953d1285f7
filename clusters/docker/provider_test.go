package docker

import (
	"testing"

	"github.com/locktest/locktest/clusters/provider"
)

// TestProviderSaysWhatItLacks: the docker provider answers for every
// ability run asks about, and gives a reason wherever it lacks one.
func TestProviderSaysWhatItLacks(t *testing.T) {
	for p, lack := range map[*run][]string{
		{}: {provider.Netem},
		{netWhy: "no iptables in the engine's network"}: {provider.Network, provider.Netem},
	} {
		for _, why := range provider.Unanswered(p, lack...) {
			t.Errorf("docker %+v: %s", p, why)
		}
	}
}
