// Package kubernetes holds the locks of a Kubernetes control plane, on
// the kubernetes backend's real kube-apiservers, each written as the
// Kubernetes world writes one, with k8s.io/client-go:
//
//   - k8s-leader-election: client-go's leader election
//     (tools/leaderelection), a LeaderElector over a LeaseLock, as every
//     controller and operator with more than one replica runs it. Each
//     acquire runs an elector whose identity is the lease's value;
//     OnStartedLeading is the grant, OnStoppedLeading the lost notice, and
//     a release cancels the elector, which gives the Lease up
//     (ReleaseOnCancel).
//   - k8s-lease-cas: a raw Lease taken and renewed by compare-and-set on
//     its resourceVersion, as operators that write their own lock do:
//     create the Lease, or take one whose holder's renewTime plus
//     leaseDurationSeconds has passed on this client's clock; renew it
//     every TTL/3 by an update on the last resourceVersion; release it by a
//     delete on that resourceVersion.
//
// Both judge a holder's Lease expired on the contender's own clock: no
// server ends a Lease (backend.ContenderLeases). client-go's doc says so
// plainly: its election "does not guarantee that only one client is
// acting as a leader (a.k.a. fencing)", and it tolerates clock skew but
// not a skew rate beyond about LeaseDuration / RenewDeadline.
//
// The fencing token: k8s-lease-cas's is the resourceVersion of the write
// that granted the Lease. The API calls a resourceVersion opaque, not to be
// compared; over etcd3, the only storage the apiserver has, it is the etcd
// revision of the write, which grows with every write of the cluster, so a
// later grant has a larger one. locktest reads it as that number, which is
// more than the API promises: a token from it holds only as long as the
// apiserver keeps storing in etcd. k8s-leader-election has no token:
// LeaderElector tells its callbacks nothing of the Lease, and controllers
// use none (leaseTransitions counts takeovers, not grants: a holder that
// releases and takes the Lease again leaves it unchanged).
//
// Leases count whole seconds (leaseDurationSeconds is an integer, and
// client-go writes its LeaseDuration truncated to seconds, which a
// contender then trusts): the run's TTL is rounded up to whole seconds.
// The clients talk to the apiserver of their process number modulo the
// apiservers, over HTTPS with the token the backend made
// (backend.KubeToken), not checking the certificate the apiserver made
// itself. The Leases live in the namespace Namespace, which the first
// client makes.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
)

// Namespace is the namespace of the Leases.
const Namespace = "locktest"

// requestTimeout bounds one request to the apiserver that no context
// bounds sooner.
const requestTimeout = 5 * time.Second

// connect returns a clientset for the apiserver process cfg.Process talks
// to (its number modulo the apiservers among cfg.Nodes), and makes
// Namespace when the cluster has none.
func connect(ctx context.Context, impl string, cfg impls.Config) (*k8s.Clientset, string, error) {
	if err := cfg.Check(impl); err != nil {
		return nil, "", err
	}
	var apiservers []string
	for _, n := range cfg.Nodes {
		if n.Role == backend.RoleAPIServer {
			apiservers = append(apiservers, n.Addr)
		}
	}
	if len(apiservers) == 0 {
		return nil, "", fmt.Errorf("%s: the cluster has no node of role %s (the kubernetes backend's apiservers)", impl, backend.RoleAPIServer)
	}
	addr := apiservers[cfg.Process%len(apiservers)]
	cs, err := k8s.NewForConfig(restConfig(addr, impl))
	if err != nil {
		return nil, "", fmt.Errorf("%s: client for %s: %w", impl, addr, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", fmt.Errorf("%s: make namespace %s on %s: %w", impl, Namespace, addr, err)
	}
	return cs, addr, nil
}

// restConfig is how a client named agent reaches the apiserver at addr:
// over HTTPS with the token the backend made (backend.KubeToken), not
// checking the certificate the apiserver made itself, each request within
// requestTimeout, and no client-side rate limit that a run would meet.
func restConfig(addr, agent string) *rest.Config {
	return &rest.Config{
		Host:            "https://" + addr,
		BearerToken:     backend.KubeToken(addr),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		Timeout:         requestTimeout,
		QPS:             1000, Burst: 1000,
		UserAgent: "locktest/" + agent,
	}
}

// leaseSeconds is ttl rounded up to whole seconds, at least one.
func leaseSeconds(ttl time.Duration) time.Duration {
	s := (ttl + time.Second - 1) / time.Second
	return max(s, 1) * time.Second
}

// resourceVersion reads a resourceVersion as the etcd revision it is
// (see the package doc on the token).
func resourceVersion(rv string) (uint64, error) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q is not an etcd revision: %w", rv, err)
	}
	return n, nil
}

// conflict reports whether err is the apiserver refusing a write whose
// precondition (a resourceVersion, an absent name) no longer holds: the
// write changed nothing.
func conflict(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// errUnknown wraps an error whose write may or may not have happened.
func errUnknown(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: no answer in time (the write may have happened): %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
