package kubernetes

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/testkit/testexe"
)

// The test binary doubles as the etcd member program.
func TestMain(m *testing.M) { testexe.Main(m) }

var start = time.Now()

func now() time.Duration { return time.Since(start) }

// startCluster starts one kube-apiserver over one etcd member and
// returns the nodes; it skips, naming the make target, where no apiserver
// was built.
func startCluster(t *testing.T) []clusters.Node {
	t.Helper()
	gate.Servers(t, "kube-apiserver and etcd")
	if why := backend.BuiltReason(backend.Kubernetes); why != "" {
		t.Skip(why)
	}
	exe, env := testexe.Node()
	c, err := local.New(backend.Kubernetes, local.Options{Dir: t.TempDir(), Exe: exe, ExeEnv: env})
	return testcluster.Started(t, c, err).Nodes()
}

// notices collects a client's lost-lock notices.
type notices struct {
	mu  sync.Mutex
	got []string
}

func (n *notices) add(lock, value, reason string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, lock+" "+value+": "+reason)
}

func (n *notices) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

// client builds a client of impl as process p whose notices go to n and
// whose wall clock runs ahead by ahead.
func client(t *testing.T, impl string, nodes []clusters.Node, p int, n *notices, ahead time.Duration) impls.Client {
	return testcluster.Client(t, impl, nodes, p, now, func(c *impls.Config) {
		c.Lost = n.add
		c.Wall = func() time.Time { return time.Now().Add(ahead) }
	})
}

// admin is a clientset of the cluster's apiserver, as the impls log in.
func admin(t *testing.T, nodes []clusters.Node) *k8s.Clientset {
	t.Helper()
	for _, n := range nodes {
		if n.Role == backend.RoleAPIServer {
			cs, err := k8s.NewForConfig(restConfig(n.Addr, "test"))
			if err != nil {
				t.Fatal(err)
			}
			return cs
		}
	}
	t.Fatal("no apiserver among the nodes")
	return nil
}

func ctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// TestBothLocksOnARealAPIServer runs both impls against one real
// kube-apiserver: each excludes a second client while it holds the Lease
// and hands it over on release, a release of a Lease given up is
// ErrNotHeld, k8s-lease-cas's tokens grow from holder to holder, and each
// tells its holder when the Lease is taken from under it.
func TestBothLocksOnARealAPIServer(t *testing.T) {
	nodes := startCluster(t)
	var roles []string
	for _, n := range nodes {
		roles = append(roles, n.Name+"="+n.Role)
	}
	if got := strings.Join(roles, " "); got != "n1=apiserver e1=" {
		t.Fatalf("nodes %s, want the apiserver n1 and the etcd member e1", got)
	}

	t.Run("lease-cas", func(t *testing.T) {
		var na, nb notices
		a, b := client(t, "k8s-lease-cas", nodes, 0, &na, 0), client(t, "k8s-lease-cas", nodes, 1, &nb, 0)
		la, err := a.Acquire(ctx(t, 5*time.Second), "cas", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx(t, 5*time.Second), "cas", time.Second); !errors.Is(err, impls.ErrNotAcquired) {
			t.Fatalf("contended acquire: %v, want ErrNotAcquired", err)
		}
		// Past the lease's second, the keep-alive has renewed it.
		time.Sleep(1500 * time.Millisecond)
		if _, err := b.Acquire(ctx(t, 5*time.Second), "cas", time.Second); !errors.Is(err, impls.ErrNotAcquired) {
			t.Fatalf("acquire of a renewed lease: %v, want ErrNotAcquired", err)
		}
		if _, err := a.Release(ctx(t, 5*time.Second), la); err != nil {
			t.Fatal(err)
		}
		lb, err := b.Acquire(ctx(t, 5*time.Second), "cas", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !la.HasToken || !lb.HasToken || lb.Token <= la.Token {
			t.Errorf("tokens %d then %d, want increasing resourceVersions", la.Token, lb.Token)
		}
		// A contender whose clock runs 2 s ahead finds b's lease
		// expired and takes it: expiry is judged on client clocks.
		var nc notices
		c := client(t, "k8s-lease-cas", nodes, 2, &nc, 2*time.Second)
		lc, err := c.Acquire(ctx(t, 5*time.Second), "cas", time.Second)
		if err != nil {
			t.Fatalf("acquire by a client 2 s ahead: %v, want the lease (b's looks expired on its clock)", err)
		}
		if lc.Token <= lb.Token {
			t.Errorf("token %d after %d, want increasing", lc.Token, lb.Token)
		}
		testcluster.Eventually(t, 5*time.Second, "b told of its lost lease", func() error {
			if len(nb.list()) == 0 {
				return errors.New("no notice")
			}
			return nil
		})
		if _, err := b.Release(ctx(t, 5*time.Second), lb); !errors.Is(err, impls.ErrNotHeld) {
			t.Errorf("release of the lease taken over: %v, want ErrNotHeld", err)
		}
		if _, err := c.Release(ctx(t, 5*time.Second), lc); err != nil {
			t.Errorf("release by the holder: %v", err)
		}
	})

	t.Run("leader-election", func(t *testing.T) {
		var na, nb notices
		a, b := client(t, "k8s-leader-election", nodes, 0, &na, 0), client(t, "k8s-leader-election", nodes, 1, &nb, 0)
		la, err := a.Acquire(ctx(t, 5*time.Second), "le", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if la.HasToken {
			t.Errorf("lease with token %d: the elector has none", la.Token)
		}
		began := time.Now()
		if _, err := b.Acquire(ctx(t, 100*time.Millisecond), "le", time.Second); !errors.Is(err, impls.ErrNotAcquired) {
			t.Fatalf("contended acquire: %v, want ErrNotAcquired", err)
		}
		if waited := time.Since(began); waited < time.Second {
			t.Errorf("a candidate gave up after %s, before it could have watched the Lease for its LeaseDuration (1 s)", waited)
		}
		if _, err := a.Release(ctx(t, 5*time.Second), la); err != nil {
			t.Fatal(err)
		}
		// Given up (an empty holder), the Lease is b's at its next try.
		lb, err := b.Acquire(ctx(t, 5*time.Second), "le", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Another writes the Lease behind b's back: b's renewal finds it
		// another's, it stops leading within its RenewDeadline, and
		// OnStoppedLeading tells it.
		leases := admin(t, nodes).CoordinationV1().Leases(Namespace)
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error { // b renews meanwhile
			l, err := leases.Get(ctx(t, 5*time.Second), "le", metav1.GetOptions{})
			if err != nil {
				return err
			}
			other := "intruder"
			l.Spec.HolderIdentity = &other
			_, err = leases.Update(ctx(t, 5*time.Second), l, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		testcluster.Eventually(t, 5*time.Second, "b told it stopped leading", func() error {
			for _, n := range nb.list() {
				if strings.Contains(n, "OnStoppedLeading") && strings.Contains(n, lb.Value) {
					return nil
				}
			}
			return errors.New("no notice")
		})
		// The elector left the Lease as it was: whose it is now, the
		// release cannot tell, and says so (an unknown outcome).
		if _, err := b.Release(ctx(t, 5*time.Second), lb); err == nil || errors.Is(err, impls.ErrNotHeld) || !strings.Contains(err.Error(), "stopped leading") {
			t.Errorf("release after the elector stopped leading: %v, want an unknown outcome that says it had stopped leading", err)
		}
		if got := na.list(); len(got) > 0 {
			t.Errorf("a released its lease and was told it lost it: %v", got)
		}
	})
}

// TestElectionTimings checks the timings of k8s-leader-election: client-go's
// controller defaults scaled to the TTL in whole seconds, the params over
// them, and client-go's own checks of them.
func TestElectionTimings(t *testing.T) {
	for _, tc := range []struct {
		ttl    time.Duration
		params map[string]string
		want   Timings
		err    string
	}{
		{ttl: 15 * time.Second, want: Timings{15 * time.Second, 10 * time.Second, 2 * time.Second}},
		{ttl: 1 * time.Second, want: Timings{time.Second, 666666666, 133333333}},
		{ttl: 500 * time.Millisecond, want: Timings{time.Second, 666666666, 133333333}},
		{ttl: 2500 * time.Millisecond, want: Timings{3 * time.Second, 2 * time.Second, 400 * time.Millisecond}},
		{ttl: 3 * time.Second, params: map[string]string{ParamRenewDeadline: "2500ms", ParamRetryPeriod: "1s"},
			want: Timings{3 * time.Second, 2500 * time.Millisecond, time.Second}},
		{ttl: 3 * time.Second, params: map[string]string{ParamRenewDeadline: "3s"}, err: "must be less than the LeaseDuration"},
		{ttl: 3 * time.Second, params: map[string]string{ParamRetryPeriod: "2s"}, err: "must be more than 1.2"},
		{ttl: 3 * time.Second, params: map[string]string{ParamRetryPeriod: "-1s"}, err: "must be a positive duration"},
		{ttl: 3 * time.Second, params: map[string]string{"lease-duration": "1s"}, err: `unknown impl param "lease-duration"`},
		{ttl: 3 * time.Second, params: map[string]string{ParamLog: "on"}, want: Timings{3 * time.Second, 2 * time.Second, 400 * time.Millisecond}},
		{ttl: 3 * time.Second, params: map[string]string{ParamLog: "yes"}, err: "must be on or off"},
		{ttl: 3 * time.Second, params: map[string]string{ParamReleaseOnCancel: "off"}, want: Timings{3 * time.Second, 2 * time.Second, 400 * time.Millisecond}},
		{ttl: 3 * time.Second, params: map[string]string{ParamReleaseOnCancel: "no"}, err: "must be on or off"},
	} {
		got, err := ElectionTimings(tc.ttl, tc.params)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ttl %s %v: error %v, want one saying %q", tc.ttl, tc.params, err, tc.err)
			}
		case err != nil:
			t.Errorf("ttl %s %v: %v", tc.ttl, tc.params, err)
		case got != tc.want:
			t.Errorf("ttl %s %v: %s, want %s", tc.ttl, tc.params, got, tc.want)
		}
	}
}
