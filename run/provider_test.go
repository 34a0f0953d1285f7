package run

import (
	"slices"
	"testing"
)

// TestEveryProviderSaysWhatItLacks: each provider answers for every
// ability run asks about, and gives a reason wherever it lacks one: the
// nemesis reports a fault that needs it unavailable with that reason,
// never with an empty one.
func TestEveryProviderSaysWhatItLacks(t *testing.T) {
	all := []string{AbilityNetwork, AbilityNetem, AbilitySyncRecords}
	for _, c := range []struct {
		p    provider
		lack []string
	}{
		{&localPlatform{netWhy: "the run has no network namespaces", netemWhy: "the run has no network namespaces"}, []string{AbilityNetwork, AbilityNetem}},
		{&localPlatform{}, nil},
		{&dockerPlatform{}, []string{AbilityNetem, AbilitySyncRecords}},
		{&dockerPlatform{netWhy: "no iptables in the engine's network"}, []string{AbilityNetwork, AbilityNetem, AbilitySyncRecords}},
		{&sshPlatform{}, []string{AbilityNetem}},
	} {
		ab := c.p.abilities()
		for _, a := range all {
			why, ok := ab[a]
			switch {
			case !ok:
				t.Errorf("%s does not say whether it has %s", c.p.name(), a)
			case slices.Contains(c.lack, a) && why == "":
				t.Errorf("%s lacks %s without a reason", c.p.name(), a)
			case !slices.Contains(c.lack, a) && why != "":
				t.Errorf("%s says it lacks %s (%q)", c.p.name(), a, why)
			}
		}
		if len(ab) != len(all) {
			t.Errorf("%s answers for %d abilities, want %d: %v", c.p.name(), len(ab), len(all), ab)
		}
	}
}
