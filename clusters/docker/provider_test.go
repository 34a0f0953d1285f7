package docker

import (
	"testing"

	"github.com/locktest/locktest/clusters/provider"
)

// TestProviderSaysWhatItLacks: the docker provider answers for every
// ability run asks about, and gives a reason wherever it lacks one.
func TestProviderSaysWhatItLacks(t *testing.T) {
	for _, c := range []struct {
		p    *run
		lack []string
	}{
		{&run{}, []string{provider.Netem}},
		{&run{netWhy: "no iptables in the engine's network"}, []string{provider.Network, provider.Netem}},
	} {
		for _, why := range provider.Unanswered(c.p, c.lack...) {
			t.Errorf("docker %+v: %s", c.p, why)
		}
	}
}
