package quorum_test

import (
	"os"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/workloads"
)

var k8sImpls = []string{"k8s-leader-election", "k8s-lease-cas"}

// k8sConfig is EtcdConfig for an impl of the kubernetes backend; it skips,
// naming `make kube-apiserver`, where this host has not built the
// apiserver.
func k8sConfig(t *testing.T, impl string) run.Config {
	t.Helper()
	if why := backend.BuiltReason(backend.Kubernetes); why != "" {
		t.Skip(why)
	}
	return testkit.EtcdConfig(t, impl)
}

// Both Kubernetes locks keep mutual exclusion without faults, on local
// processes and in containers (when a Docker engine answers), k8s-lease-cas
// with tokens that grow from holder to holder.
func TestKubernetesNoFaultRunsAreValid(t *testing.T) {
	for _, prov := range []string{"local", docker.Name} {
		for _, impl := range k8sImpls {
			t.Run(prov+"/"+impl, func(t *testing.T) {
				cfg := k8sConfig(t, impl)
				if prov == docker.Name && cfg.Provider != docker.Name {
					if os.Getenv(testkit.ProviderEnv) != "" {
						t.Skip("the docker provider runs every test of this package here")
					}
					cfg = testkit.DockerConfig(t, impl)
					cfg.NodeCommand, cfg.NodeEnv = nil, nil
				}
				cfg.Duration, cfg.MaxCriticalSections = 30*time.Second, 40
				out, h := testkit.MustRun(t, cfg)
				testkit.ValidWithWrites(t, out.Results, 20)
				if impl == "k8s-lease-cas" {
					assertTokensIncrease(t, h)
				}
				t.Logf("%s on %s: %v critical sections", impl, prov, out.Results.Stats["critical_sections"])
			})
		}
	}
}

// A leader paused past its lease breaks a resource that trusts the lock,
// as client-go's doc says (no fencing): a contender takes the Lease once it
// has watched it unchanged for the LeaseDuration, and the paused leader
// writes on waking. With k8s-lease-cas's token (the grant's
// resourceVersion) a fenced resource refuses those writes. The pause
// point is pinned (before the write); a seed whose pauses met no takeover
// is tried again, three seeds at most.
func TestKubernetesPauseBreaksAnUnfencedResource(t *testing.T) {
	for _, tc := range []struct {
		impl string
		mode workloads.Mode
	}{
		{"k8s-leader-election", workloads.ModeNone},
		{"k8s-lease-cas", workloads.ModeNone},
		{"k8s-lease-cas", workloads.ModeFenced},
	} {
		t.Run(tc.impl+"/"+string(tc.mode), func(t *testing.T) {
			cfg := k8sConfig(t, tc.impl)
			cfg.Faults, cfg.Mode, cfg.TTL = []string{"pause-client"}, tc.mode, time.Second
			cfg.FaultSettings = cfg.FaultSettings.With(nemesis.PausePoint.Is(workloads.PointBeforeWrite), nemesis.Pause.Is(3500*time.Millisecond))
			cfg.Interval, cfg.Duration, cfg.Quiet = 500*time.Millisecond, 12*time.Second, time.Second
			broken := func(out *run.Outcome, h history.History) bool {
				k := testkit.Kinds(out.Results)
				return k["overlapping-holds"] > 0 && testkit.NemesisOps(h, "pause-client", history.OK) > 0
			}
			out, h := testkit.Reproduce(t, cfg, broken)
			k := testkit.Kinds(out.Results)
			if !broken(out, h) {
				t.Fatalf("verdict %s, anomalies %v: want overlapping holds after a pause past the lease", out.Results.Valid, k)
			}
			res := testkit.Result(t, out.Results, "resource")
			switch tc.mode {
			case workloads.ModeNone:
				if k["lost-update"]+k["stale-write"] == 0 {
					t.Errorf("resource %s, anomalies %v: want the woken leader's write to land over the next holder's", res.Valid, k)
				}
			case workloads.ModeFenced:
				if res.Valid != checker.Valid {
					t.Errorf("fenced resource %s, anomalies %v: want the stale writes refused by their resourceVersion", res.Valid, k)
				}
			}
			t.Logf("%s, resource %s, pauses past the lease: anomalies %v", tc.impl, tc.mode, k)
		})
	}
}

// A leader paused past its lease is told, when it wakes, that it stopped
// leading: its renewal finds the Lease another's, and after RenewDeadline
// client-go calls OnStoppedLeading.
func TestKubernetesPausedLeaderIsTold(t *testing.T) {
	testkit.AssertPausedHolderIsTold(t, k8sConfig(t, "k8s-leader-election"), "OnStoppedLeading")
}
