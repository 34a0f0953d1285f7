package run

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/impls"
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

// TestPartitionHostsAreTheBackendsNodes: an explicit partition names data
// nodes (n1..), client hosts (c0..) and the other nodes of the impl's
// backend by the names its layout gives them (a kubernetes cluster's etcd
// members e1..), and nothing else.
func TestPartitionHostsAreTheBackendsNodes(t *testing.T) {
	for _, tc := range []struct {
		impl, groups, want string
	}{
		{"k8s-leader-election", "n1/e1", ""},
		{"k8s-leader-election", "n1,c0/e1", ""},
		{"k8s-leader-election", "n1/e9", `host "e9": want a node (n1, n2, ..., e1)`},
		{"redis-set-nx-px", "n1/e1", `host "e1": want a node (n1, n2, ...) or a client host`},
		{"redis-set-nx-px", "n1/c0", ""},
	} {
		cfg := DefaultConfig()
		cfg.Impl, cfg.Faults = tc.impl, []string{"partition"}
		if err := cfg.Set("partition", tc.groups); err != nil {
			t.Fatal(err)
		}
		impl, err := impls.Lookup(tc.impl)
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.validateSettings(impl)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s --partition %s: %v", tc.impl, tc.groups, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s --partition %s: %v, want an error saying %q", tc.impl, tc.groups, err, tc.want)
		}
	}
}
