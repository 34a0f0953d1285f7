package run

import (
	"strings"
	"testing"
)

// TestCheckTargetsReadsTheBackendsOutline: --target's pins are checked
// before anything starts against the outline of the impl's cluster (its
// nodes' names, the roles they can have, the workers and client hosts of
// --clients), whatever the provider, with the errors a run gives when it
// checks them against the cluster it started.
func TestCheckTargetsReadsTheBackendsOutline(t *testing.T) {
	for _, tc := range []struct {
		impl, fault, pin, provider string
		params                     map[string]string
		want                       string // "" when the pin is accepted
	}{
		{"redis-set-nx-px", "kill-node", "n4", "", nil, `kill-node=n4: kill-node hits nodes n1 by name (no node of this backend has a role); "n4" is neither`},
		{"redis-replicated", "pause-node", "leader", "", nil, `pause-node=leader: pause-node hits nodes n1, n2, n3 (by name) or the roles master, replica; "leader" is neither`},
		{"redis-replicated", "pause-node", "leader", Providers[len(Providers)-1], nil, `pause-node hits nodes n1, n2, n3 (by name) or the roles master, replica; "leader" is neither`},
		{"redis-set-nx-px", "pause-client", "p7", "", nil, "p7 is not one of them"},
		{"redis-replicated", "kill-node", "master", "", nil, ""},
		{"redis-replicated", "kill-node", "n3", "", nil, ""},
		{"etcd-mutex", "isolate", "leader", "", nil, ""},
		// A param the backend does not read is the provider's business:
		// the outline is the same.
		{"etcd-mutex", "kill-node", "n4", "", map[string]string{"a-provider-param": "x"}, `"n4" is neither`},
	} {
		cfg := DefaultConfig()
		cfg.Impl, cfg.Faults, cfg.Targets, cfg.ClusterParams = tc.impl, []string{tc.fault}, map[string][]string{tc.fault: {tc.pin}}, tc.params
		if tc.provider != "" {
			cfg.Provider = tc.provider
		}
		err := checkTargets(cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s=%s: %v", tc.impl, tc.fault, tc.pin, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s=%s: %v, want an error saying %q", tc.impl, tc.fault, tc.pin, err, tc.want)
		}
	}
}
