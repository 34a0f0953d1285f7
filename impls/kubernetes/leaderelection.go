package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
)

// The params of k8s-leader-election: its RenewDeadline and RetryPeriod.
// Its LeaseDuration is the run's TTL rounded up to whole seconds; unset,
// the other two are client-go's defaults for controllers (15 s, 10 s and
// 2 s) scaled to it: RenewDeadline = 2/3 and RetryPeriod = 2/15 of the
// LeaseDuration.
const (
	ParamRenewDeadline = "renew-deadline"
	ParamRetryPeriod   = "retry-period"
	// ParamLog set to "on" sends client-go's own log (its leader
	// election's and its REST client's, every verbosity) to the worker's
	// log, logs/p<N>.log: each try to take or renew the Lease and why it
	// failed. Off by default.
	ParamLog = "log"
	// ParamReleaseOnCancel is the elector's ReleaseOnCancel: "on" (the
	// default) or "off". On, an elector that could not renew within
	// RenewDeadline first tries to give the Lease up, for up to another
	// RenewDeadline when the apiserver does not answer, and only then
	// cancels OnStartedLeading's context and calls OnStoppedLeading. Off,
	// it calls them at once, and a release leaves the Lease to expire
	// after LeaseDuration instead of giving it up.
	ParamReleaseOnCancel = "release-on-cancel"
)

func init() {
	klog.SetLogger(logr.Discard()) // client-go logs each failed renewal; the history records what a run needs
	impls.Register(impls.Impl{
		Name: "k8s-leader-election", Backend: backend.Kubernetes,
		Blocking: true,
		Wait:     "the elector retries every RetryPeriod until it leads or the acquire's deadline passes, which is at least LeaseDuration + 2 RetryPeriods",
		Notices:  "OnStoppedLeading: the elector could not renew within RenewDeadline (and, with ReleaseOnCancel, then tried to give the Lease up)",
		Doc: "client-go's LeaderElector over a LeaseLock, as controllers run it (LeaseDuration = TTL, RenewDeadline and RetryPeriod 2/3 and 2/15 of it, ReleaseOnCancel); " +
			"no fencing by its own doc, and a leader that stops (a pause) acts on until it notices, while a contender takes the Lease after LeaseDuration on its own clock.",
		RuntimeClock: true,
		Libraries:    []string{"k8s.io/client-go"},
		Renewal: func(ttl time.Duration, params map[string]string) (time.Duration, time.Duration) {
			t, _ := ElectionTimings(ttl, params)
			return t.LeaseDuration, t.RetryPeriod
		},
		StopsAfter: func(ttl time.Duration, params map[string]string) time.Duration {
			t, _ := ElectionTimings(ttl, params)
			return t.RenewDeadline
		},
		New: newElection,
	})
}

// Timings are a LeaderElector's LeaseDuration, RenewDeadline and
// RetryPeriod.
type Timings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// ElectionTimings returns the timings of a run with TTL ttl and the
// impl's params (ParamRenewDeadline, ParamRetryPeriod), checked as
// client-go's NewLeaderElector checks them; an error names the param.
func ElectionTimings(ttl time.Duration, params map[string]string) (Timings, error) {
	t := Timings{LeaseDuration: leaseSeconds(ttl)}
	t.RenewDeadline, t.RetryPeriod = t.LeaseDuration*2/3, t.LeaseDuration*2/15
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if want, ok := map[string][2]string{ParamLog: {"on", "off"}, ParamReleaseOnCancel: {"on", "off"}}[k]; ok {
			if v := params[k]; v != want[0] && v != want[1] {
				return t, fmt.Errorf("k8s-leader-election: impl param %s=%q must be %s or %s", k, v, want[0], want[1])
			}
			continue
		}
		d, err := time.ParseDuration(params[k])
		switch {
		case k != ParamRenewDeadline && k != ParamRetryPeriod:
			return t, fmt.Errorf("k8s-leader-election: unknown impl param %q (known: %s, %s, %s, %s)", k, ParamRenewDeadline, ParamRetryPeriod, ParamLog, ParamReleaseOnCancel)
		case err != nil || d <= 0:
			return t, fmt.Errorf("k8s-leader-election: impl param %s=%q must be a positive duration", k, params[k])
		case k == ParamRenewDeadline:
			t.RenewDeadline = d
		default:
			t.RetryPeriod = d
		}
	}
	switch {
	case t.LeaseDuration <= t.RenewDeadline:
		return t, fmt.Errorf("k8s-leader-election: %s %s must be less than the LeaseDuration, %s (the TTL in whole seconds)", ParamRenewDeadline, t.RenewDeadline, t.LeaseDuration)
	case t.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(t.RetryPeriod)):
		return t, fmt.Errorf("k8s-leader-election: %s %s must be more than %.1f × %s %s", ParamRenewDeadline, t.RenewDeadline, leaderelection.JitterFactor, ParamRetryPeriod, t.RetryPeriod)
	}
	return t, nil
}

// String is the timings as client-go names them.
func (t Timings) String() string {
	return fmt.Sprintf("LeaseDuration %s, RenewDeadline %s, RetryPeriod %s", t.LeaseDuration, t.RenewDeadline, t.RetryPeriod)
}

// electionClient is one worker's k8s-leader-election client: one elector
// per lease it holds.
type electionClient struct {
	cfg    impls.Config
	cs     *k8s.Clientset
	addr   string
	params map[string]string
	values impls.Values
	held   map[string]*elector
}

// elector is one acquire's LeaderElector and what its callbacks said.
type elector struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	leads  chan struct{} // closed by OnStartedLeading

	mu        sync.Mutex
	started   bool // OnStartedLeading was called
	releasing bool // Release cancelled the elector
	released  bool // the release's update of the Lease succeeded
}

// giveUp marks that this client is ending the elector itself (a release,
// an acquire that ran out of time, Close): its OnStoppedLeading then tells
// no one of a lost lease.
func (e *elector) giveUp() {
	e.mu.Lock()
	e.releasing = true
	e.mu.Unlock()
}

func newElection(ctx context.Context, cfg impls.Config) (impls.Client, error) {
	// The params' names and forms are checked here, at once; how they
	// stand to the LeaseDuration, which the TTL gives, at each acquire.
	if _, err := ElectionTimings(time.Hour, cfg.Params); err != nil && !strings.Contains(err.Error(), "must be more than") {
		return nil, err
	}
	if cfg.Params[ParamLog] == "on" {
		klog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-10)})))
	}
	cs, addr, err := connect(ctx, "k8s-leader-election", cfg)
	if err != nil {
		return nil, err
	}
	return &electionClient{cfg: cfg, cs: cs, addr: addr, params: cfg.Params, values: impls.Values{Process: cfg.Process}, held: map[string]*elector{}}, nil
}

// releaseWatch is the LeaseLock with one thing seen: whether the update
// that gives the Lease up (the one client-go writes with no holder)
// succeeded. The LeaderElector's own code runs unchanged.
type releaseWatch struct {
	*resourcelock.LeaseLock
	e *elector
}

func (w releaseWatch) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := w.LeaseLock.Update(ctx, r)
	if r.HolderIdentity == "" && err == nil {
		w.e.mu.Lock()
		w.e.released = true
		w.e.mu.Unlock()
	}
	return err
}

// Acquire runs a LeaderElector for the Lease called lock, with the
// lease's value as its identity, and returns once it leads
// (OnStartedLeading), waiting at least as long as candidateWait says.
// When the wait ends first the elector is cancelled: a Lease
// it never led is impls.ErrNotAcquired, and one it came to lead as ctx
// ended (and gave up again) an unknown outcome.
func (c *electionClient) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	t, err := ElectionTimings(ttl, c.params)
	if err != nil {
		return impls.Lease{}, err
	}
	value := c.values.Next()
	releaseOnCancel := c.params[ParamReleaseOnCancel] != "off"
	e := &elector{done: make(chan struct{}), leads: make(chan struct{})}
	ll := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lock, Namespace: Namespace},
		Client:     c.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: value},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            releaseWatch{ll, e},
		LeaseDuration:   t.LeaseDuration,
		RenewDeadline:   t.RenewDeadline,
		RetryPeriod:     t.RetryPeriod,
		ReleaseOnCancel: releaseOnCancel,
		Name:            lock,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				e.mu.Lock()
				e.started = true
				e.mu.Unlock()
				close(e.leads)
			},
			OnStoppedLeading: func() {
				e.mu.Lock()
				tell := e.started && !e.releasing
				e.mu.Unlock()
				if tell {
					c.cfg.Tell(lock, value, "OnStoppedLeading: the elector could not renew the Lease within RenewDeadline")
				}
			},
		},
	})
	if err != nil {
		return impls.Lease{}, fmt.Errorf("k8s-leader-election: %w", err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		le.Run(rctx)
	}()
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), candidateWait(ctx, t))
	defer wcancel()
	select {
	case <-e.leads:
		c.held[value] = e
		return impls.Lease{Lock: lock, Value: value, Node: c.addr}, nil
	case <-wctx.Done():
	}
	e.giveUp()
	cancel()
	<-e.done
	e.mu.Lock()
	started := e.started
	e.mu.Unlock()
	if started {
		return impls.Lease{}, fmt.Errorf("k8s-leader-election: led lease %s as the acquire's deadline passed, and gave it up: %w", lock, wctx.Err())
	}
	return impls.Lease{}, fmt.Errorf("%w: lease %s: the elector did not lead before the acquire's deadline (%v)", impls.ErrNotAcquired, lock, wctx.Err())
}

// candidateWait is how long an acquire waits for its elector to lead:
// until ctx's deadline, but at least LeaseDuration and two RetryPeriods. A
// candidate takes a held Lease only once it has watched it unchanged for
// LeaseDuration on its own clock, so a shorter wait (the default
// --op-timeout of 1 s against a 1 s lease) could never take one a holder
// left without releasing.
func candidateWait(ctx context.Context, t Timings) time.Duration {
	least := t.LeaseDuration + 2*t.RetryPeriod
	if d, ok := ctx.Deadline(); ok && time.Until(d) > least {
		return time.Until(d)
	}
	return least
}

// Release cancels the lease's elector, which gives the Lease up
// (ReleaseOnCancel: an update with no holder), and waits for it to end.
// Its outcome is unknown when the elector had stopped leading before it
// (OnStoppedLeading leaves the Lease as it was, which may name this holder
// until a contender takes it after LeaseDuration, so the hold ends at a
// time no op marks), when the update failed, and when ctx cut it short.
func (c *electionClient) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	e, ok := c.held[l.Value]
	if !ok {
		return impls.Released{}, fmt.Errorf("k8s-leader-election: release of a lease this client does not hold (%s %s)", l.Lock, l.Value)
	}
	delete(c.held, l.Value)
	e.giveUp()
	select {
	case <-e.done:
		// The elector gave up leading on its own clock (it could not
		// renew within RenewDeadline) and left the Lease as it was: it may
		// name this holder still, until a contender has watched it
		// unchanged for LeaseDuration, or another already.
		return impls.Released{}, fmt.Errorf("k8s-leader-election: the elector of lease %s had stopped leading, leaving the Lease as it was: whether it still names this holder is unknown", l.Lock)
	default:
	}
	e.cancel()
	select {
	case <-e.done:
	case <-ctx.Done():
		return impls.Released{}, fmt.Errorf("k8s-leader-election: release of lease %s: %w", l.Lock, ctx.Err())
	}
	e.mu.Lock()
	released := e.released
	e.mu.Unlock()
	if !released && c.params[ParamReleaseOnCancel] == "off" {
		return impls.Released{}, fmt.Errorf("k8s-leader-election: the elector of lease %s ended without giving it up (%s off): the Lease names this holder until a contender has watched it unchanged for LeaseDuration", l.Lock, ParamReleaseOnCancel)
	}
	if !released {
		return impls.Released{}, fmt.Errorf("k8s-leader-election: the elector of lease %s ended without giving it up (it was no longer the holder, or the update failed)", l.Lock)
	}
	return impls.Released{Removed: l.Value}, nil
}

// Close cancels every elector and waits for each to end.
func (c *electionClient) Close() error {
	for v, e := range c.held {
		e.giveUp()
		e.cancel()
		<-e.done
		delete(c.held, v)
	}
	return nil
}
