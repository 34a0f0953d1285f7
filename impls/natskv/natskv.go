// Package natskv holds the NATS JetStream key-value locks, each written
// the way NATS's users write one, with github.com/nats-io/nats.go's
// jetstream package, on the bucket of package natsbucket:
//
//   - nats-kv: acquire is KeyValue.Create(key, value) with a per-key TTL
//     (jetstream.KeyTTL): it fails when the key exists, and the server
//     removes the key when its TTL runs out. Release is a delete
//     conditioned on the create's revision (jetstream.LastRevision), so a
//     holder whose key expired cannot delete the next holder's.
//   - nats-kv-extend: the same, plus a holder that renews its key while it
//     holds the lock: every TTL/3 it writes the key again, conditioned on
//     its last revision and with a fresh TTL (what KeyValue.Update does,
//     with the TTL that Update cannot set), as redlock-extend keeps its
//     lock alive. Release deletes on the last renewal's revision.
//
// The fencing token is the create's revision: the sequence of the key's
// message in the bucket's stream, which JetStream's replicated log makes
// strictly increasing from holder to holder, as long as the servers keep
// what they acknowledged. JetStream syncs its files every two minutes by
// default (the backend's sync param changes that), so a power loss of
// every server can lose an acknowledged create, and the revision counter
// with it.
//
// A key's TTL counts whole seconds: the test's ttl is rounded up to the
// next second (natsbucket.TTL), and Lease.ValidUntil is computed from the
// rounded TTL. Acquire fails at once when the lock is held. The impls take
// no params.
package natskv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/natsbucket"
	"github.com/locktest/locktest/internal/tick"
)

// Client timeouts.
const (
	connectTimeout = 2 * time.Second
	// reconnectWait is how long the connection waits between its tries
	// of the servers after it lost its own; it tries forever.
	reconnectWait = 100 * time.Millisecond
)

func init() {
	for _, i := range []impls.Impl{
		{
			Name: "nats-kv", Backend: backend.Nats, Fenced: true,
			TokenSource: "the JetStream stream sequence of the key's create (its KV revision)",
			Wait:        "fails at once when the key exists",
			Notices:     "its own timer at the key's TTL (the key is never renewed, so it is then gone)",
			Doc: "KeyValue.Create of the lock key with a per-key TTL, released by a delete conditioned on the create's revision, token = that revision; " +
				"a holder that outlives its TTL loses the lock, and a power loss inside JetStream's sync interval can lose an acknowledged create.",
			New: func(ctx context.Context, cfg impls.Config) (impls.Client, error) { return newClient(ctx, cfg, false) },
		},
		{
			Name: "nats-kv-extend", Backend: backend.Nats, Fenced: true,
			TokenSource: "the JetStream stream sequence of the key's create (its KV revision)",
			Wait:        "fails at once when the key exists",
			Notices:     "a renewal that fails (the key's revision moved, or the cluster did not answer within the op timeout)",
			Doc: "nats-kv plus a keep-alive that rewrites the key every TTL/3, conditioned on its last revision and with a fresh TTL; " +
				"a holder paused past its TTL loses the lock and learns it only at its next renewal.",
			New: func(ctx context.Context, cfg impls.Config) (impls.Client, error) { return newClient(ctx, cfg, true) },
		},
	} {
		i.Libraries = []string{"github.com/nats-io/nats.go"}
		impls.Register(i)
	}
}

// Client is one worker's connection to the cluster and the bucket.
type Client struct {
	cfg    impls.Config
	nc     *nats.Conn
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	values impls.Values
	extend bool
	// held are the leases held, by value; only the worker's goroutine
	// touches the map.
	held map[string]*holding
}

// holding is one held lease: its key's last revision, and the timer of
// its notice (nats-kv) or its keep-alive (nats-kv-extend).
type holding struct {
	mu  sync.Mutex
	rev uint64 // the key's last revision this holder wrote
	err error  // the keep-alive's failure, for the release's error

	timer *time.Timer
	// stop ends the keep-alive after its renewal in flight, if any, and
	// done closes when it has ended.
	stop chan struct{}
	done chan struct{}
}

func (h *holding) last() (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rev, h.err
}

// newClient connects to every address of cfg (the connection moves to
// another server when its own goes) and opens the bucket, making it with a
// replica on each server where the cluster has none.
func newClient(ctx context.Context, cfg impls.Config, extend bool) (*Client, error) {
	if err := cfg.Check(backend.Nats); err != nil {
		return nil, err
	}
	for k := range cfg.Params {
		return nil, fmt.Errorf("nats: unknown impl param %q (the nats impls take none; the servers' sync is the cluster param sync)", k)
	}
	urls := make([]string, len(cfg.Addrs))
	for i, a := range cfg.Addrs {
		urls[i] = "nats://" + a
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name(fmt.Sprintf("locktest-p%d", cfg.Process)),
		nats.Timeout(connectTimeout), nats.MaxReconnects(-1), nats.ReconnectWait(reconnectWait), nats.RetryOnFailedConnect(false))
	if err != nil {
		return nil, fmt.Errorf("nats connect %s: %w", strings.Join(cfg.Addrs, ","), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats jetstream: %w", err)
	}
	kv, err := natsbucket.Open(ctx, js, len(cfg.Addrs))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	return &Client{cfg: cfg, nc: nc, js: js, kv: kv, values: impls.Values{Process: cfg.Process}, extend: extend, held: map[string]*holding{}}, nil
}

var _ impls.Client = (*Client)(nil)

// Acquire creates the lock's key with the lease's value and the TTL ttl
// rounded up to whole seconds. A key that exists is impls.ErrNotAcquired,
// and so is a create that no stream took (jetstream.ErrNoStreamResponse:
// every try was answered "no responders", so no stream stored it; the
// bucket's stream has no leader, or is gone, as after a power loss of
// every server before its first sync): both certainly changed nothing,
// and a lock that can never be taken again is then a stuck lock, not a
// run of unknown outcomes. Any other error leaves the outcome unknown
// (the create may have been written when its reply was lost). ValidUntil
// is Config.Now read before the create plus the key's TTL, 0 with the
// keep-alive.
func (c *Client) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value := c.values.Next()
	keyTTL := natsbucket.TTL(ttl)
	t0 := c.cfg.Now()
	rev, err := c.kv.Create(ctx, lock, []byte(value), jetstream.KeyTTL(keyTTL))
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return impls.Lease{}, fmt.Errorf("%w: key %s exists", impls.ErrNotAcquired, lock)
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return impls.Lease{}, fmt.Errorf("%w: no stream took the create of %s (the bucket's stream has no leader, or is gone): %v", impls.ErrNotAcquired, lock, err)
	case err != nil:
		return impls.Lease{}, fmt.Errorf("nats create %s: %w", lock, err)
	}
	l := impls.Lease{Lock: lock, Token: rev, HasToken: true, Value: value}
	h := &holding{rev: rev}
	if c.extend {
		h.stop, h.done = make(chan struct{}), make(chan struct{})
		go c.keepAlive(h, l, keyTTL)
	} else {
		l.ValidUntil = t0 + keyTTL
		h.timer = time.AfterFunc(l.ValidUntil-c.cfg.Now(), func() {
			c.cfg.Tell(lock, value, "the key's TTL ran out (the client's own timer: nats-kv never renews it)")
		})
	}
	c.held[value] = h
	return l, nil
}

// keepAlive rewrites l's key every ttl/3, conditioned on the revision h
// last wrote and with a fresh TTL, until stopped. A stop waits for the
// renewal in flight, whose revision the release needs: a renewal cut
// short could have been written with a revision the holder never learnt.
// It stops at the first failure and tells the holder: its key moved on
// (it expired, another client holds it) or the cluster did not answer
// within ttl/3.
func (c *Client) keepAlive(h *holding, l impls.Lease, ttl time.Duration) {
	defer close(h.done)
	subject := "$KV." + natsbucket.Name + "." + l.Lock
	tick.Until(ttl/3, h.stop, func() bool {
		rev, _ := h.last()
		rctx, cancel := context.WithTimeout(context.Background(), ttl/3)
		ack, err := c.js.PublishMsg(rctx, &nats.Msg{Subject: subject, Data: []byte(l.Value)},
			jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
		cancel()
		h.mu.Lock()
		if err == nil {
			h.rev = ack.Sequence
		} else {
			h.err = err
		}
		h.mu.Unlock()
		if err != nil {
			c.cfg.Tell(l.Lock, l.Value, fmt.Sprintf("the renewal of revision %d failed, the keep-alive gave up: %v", rev, err))
			return false
		}
		return true
	})
}

// Release stops the lease's timer or keep-alive and deletes its key,
// conditioned on the last revision the holder wrote. A revision that moved
// (the key expired, or another client holds it) is impls.ErrNotHeld;
// any other error leaves the outcome unknown.
func (c *Client) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	h, ok := c.held[l.Value]
	if !ok {
		return impls.Released{}, fmt.Errorf("nats: release of a lease this client does not hold (%s %s)", l.Lock, l.Value)
	}
	delete(c.held, l.Value)
	h.halt()
	rev, kerr := h.last()
	err := c.kv.Delete(ctx, l.Lock, jetstream.LastRevision(rev))
	switch {
	case err == nil:
		return impls.Released{Removed: l.Value}, nil
	case errors.Is(err, jetstream.ErrKeyExists), isWrongLastSequence(err):
		if kerr != nil {
			return impls.Released{}, fmt.Errorf("%w: key %s moved past revision %d (the keep-alive failed earlier: %v)", impls.ErrNotHeld, l.Lock, rev, kerr)
		}
		return impls.Released{}, fmt.Errorf("%w: key %s moved past revision %d: the key expired", impls.ErrNotHeld, l.Lock, rev)
	}
	return impls.Released{}, fmt.Errorf("nats delete %s at revision %d: %w", l.Lock, rev, err)
}

// halt stops h's timer or keep-alive and waits for the keep-alive to end.
func (h *holding) halt() {
	if h.timer != nil {
		h.timer.Stop()
	}
	if h.stop != nil {
		close(h.stop)
		<-h.done
	}
}

// isWrongLastSequence says whether err is JetStream's refusal of a write
// whose expected last sequence of its subject was not the subject's.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Close stops every timer and keep-alive and closes the connection. It
// does not release held locks: their keys expire.
func (c *Client) Close() error {
	for v, h := range c.held {
		h.halt()
		delete(c.held, v)
	}
	c.nc.Close()
	return nil
}
