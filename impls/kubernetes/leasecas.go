package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/tick"
)

func init() {
	impls.Register(impls.Impl{
		Name: "k8s-lease-cas", Backend: backend.Kubernetes, Fenced: true,
		TokenSource: "the resourceVersion of the write that granted the Lease (its etcd revision)",
		Wait:        "fails at once while the Lease's holder has not expired on this client's clock",
		Notices:     "a renewal that fails (the resourceVersion moved, or the apiserver did not answer within TTL/3)",
		Doc: "a Lease created, or taken once renewTime + leaseDurationSeconds has passed on the contender's clock, by an update on its resourceVersion, renewed every TTL/3 the same way and deleted on it; " +
			"expiry is judged on client clocks, so a paused holder, or a contender whose clock is ahead, breaks it.",
		Libraries: []string{"k8s.io/client-go"},
		Renewal: func(ttl time.Duration, _ map[string]string) (time.Duration, time.Duration) {
			return leaseSeconds(ttl), leaseSeconds(ttl) / 3
		},
		New: newCAS,
	})
}

// casClient is one worker's k8s-lease-cas client.
type casClient struct {
	cfg    impls.Config
	leases coordv1client.LeaseInterface
	addr   string
	values impls.Values
	held   map[string]*casHolding
}

// casHolding is one held Lease: its last resourceVersion and keep-alive.
type casHolding struct {
	mu    sync.Mutex
	lease *coordinationv1.Lease // as last written by this holder
	err   error                 // the keep-alive's failure
	stop  chan struct{}
	done  chan struct{}
}

func (h *casHolding) last() (*coordinationv1.Lease, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease, h.err
}

func newCAS(ctx context.Context, cfg impls.Config) (impls.Client, error) {
	for k := range cfg.Params {
		return nil, fmt.Errorf("k8s-lease-cas: unknown impl param %q (it takes none)", k)
	}
	cs, addr, err := connect(ctx, "k8s-lease-cas", cfg)
	if err != nil {
		return nil, err
	}
	return &casClient{cfg: cfg, leases: cs.CoordinationV1().Leases(Namespace), addr: addr,
		values: impls.Values{Process: cfg.Process}, held: map[string]*casHolding{}}, nil
}

// Acquire takes the Lease called lock for ttl (rounded up to whole
// seconds): it creates it, or, when it exists and its holder's renewTime
// plus leaseDurationSeconds has passed on this client's clock
// (Config.Wall) or it has no holder, updates it on the resourceVersion it
// read. A Lease still held, a create that finds one, and an update
// refused for its resourceVersion are impls.ErrNotAcquired; any other
// error leaves the outcome unknown.
func (c *casClient) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value := c.values.Next()
	d := leaseSeconds(ttl)
	secs := int32(d / time.Second)
	now := metav1.NewMicroTime(c.cfg.Wall())
	cur, err := c.leases.Get(ctx, lock, metav1.GetOptions{})
	var wrote *coordinationv1.Lease
	switch {
	case apierrors.IsNotFound(err):
		wrote, err = c.leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: lock, Namespace: Namespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &value, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: new(int32)},
		}, metav1.CreateOptions{})
	case err != nil:
		return impls.Lease{}, fmt.Errorf("%w: get lease %s: %v", impls.ErrNotAcquired, lock, err)
	default:
		if holder, until, ok := heldUntil(cur); ok && now.Time.Before(until) {
			return impls.Lease{}, fmt.Errorf("%w: lease %s held by %s until %s on this client's clock", impls.ErrNotAcquired, lock, holder, until.Format(time.RFC3339Nano))
		}
		next := cur.DeepCopy()
		transitions := int32(0)
		if cur.Spec.LeaseTransitions != nil {
			transitions = *cur.Spec.LeaseTransitions
		}
		transitions++
		next.Spec = coordinationv1.LeaseSpec{HolderIdentity: &value, LeaseDurationSeconds: &secs,
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: &transitions}
		wrote, err = c.leases.Update(ctx, next, metav1.UpdateOptions{})
	}
	switch {
	case conflict(err):
		return impls.Lease{}, fmt.Errorf("%w: lease %s was written by another client first: %v", impls.ErrNotAcquired, lock, err)
	case err != nil:
		return impls.Lease{}, errUnknown("take lease "+lock, err)
	}
	token, err := resourceVersion(wrote.ResourceVersion)
	if err != nil {
		return impls.Lease{}, fmt.Errorf("take lease %s: %w", lock, err)
	}
	h := &casHolding{lease: wrote, stop: make(chan struct{}), done: make(chan struct{})}
	l := impls.Lease{Lock: lock, Token: token, HasToken: true, Value: value, Node: c.addr}
	go c.keepAlive(h, l, d)
	c.held[value] = h
	return l, nil
}

// heldUntil returns a Lease's holder and when its hold ends by its own
// fields (renewTime + leaseDurationSeconds), and false for a Lease with no
// holder.
func heldUntil(l *coordinationv1.Lease) (string, time.Time, bool) {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return "", time.Time{}, false
	}
	return *s.HolderIdentity, s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second), true
}

// keepAlive renews h's Lease every d/3, setting renewTime to this client's
// clock by an update on the resourceVersion it last wrote, until stopped;
// a stop waits for the renewal in flight, whose resourceVersion the
// release needs. It stops at the first failure and tells the holder.
func (c *casClient) keepAlive(h *casHolding, l impls.Lease, d time.Duration) {
	defer close(h.done)
	tick.Until(d/3, h.stop, func() bool {
		cur, _ := h.last()
		next := cur.DeepCopy()
		now := metav1.NewMicroTime(c.cfg.Wall())
		next.Spec.RenewTime = &now
		ctx, cancel := context.WithTimeout(context.Background(), d/3)
		wrote, err := c.leases.Update(ctx, next, metav1.UpdateOptions{})
		cancel()
		h.mu.Lock()
		if err == nil {
			h.lease = wrote
		} else {
			h.err = err
		}
		h.mu.Unlock()
		if err != nil {
			c.cfg.Tell(l.Lock, l.Value, fmt.Sprintf("the renewal on resourceVersion %s failed, the keep-alive gave up: %v", cur.ResourceVersion, err))
			return false
		}
		return true
	})
}

// Release stops the keep-alive and deletes the Lease on the last
// resourceVersion the holder wrote. A Lease gone or written by another
// since is impls.ErrNotHeld; any other error leaves the outcome unknown.
func (c *casClient) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	h, ok := c.held[l.Value]
	if !ok {
		return impls.Released{}, fmt.Errorf("k8s-lease-cas: release of a lease this client does not hold (%s %s)", l.Lock, l.Value)
	}
	delete(c.held, l.Value)
	close(h.stop)
	<-h.done
	cur, kerr := h.last()
	rv := cur.ResourceVersion
	err := c.leases.Delete(ctx, l.Lock, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	switch {
	case err == nil:
		return impls.Released{Removed: l.Value}, nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		if kerr != nil {
			return impls.Released{}, fmt.Errorf("%w: lease %s moved past resourceVersion %s (the keep-alive failed earlier: %v)", impls.ErrNotHeld, l.Lock, rv, kerr)
		}
		return impls.Released{}, fmt.Errorf("%w: lease %s moved past resourceVersion %s", impls.ErrNotHeld, l.Lock, rv)
	}
	return impls.Released{}, errUnknown(fmt.Sprintf("delete lease %s on resourceVersion %s", l.Lock, rv), err)
}

// Close stops every keep-alive.
func (c *casClient) Close() error {
	for v, h := range c.held {
		close(h.stop)
		<-h.done
		delete(c.held, v)
	}
	return nil
}
