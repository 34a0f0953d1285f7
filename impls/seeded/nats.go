package seeded

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

// natsBase is the correct recipe the NATS impls of the zoo vary.
const natsBase = "nats-kv-extend"

// registerNats registers a seeded variant of nats-kv-extend, written with
// github.com/nats-io/nats.go.
func registerNats(i impls.Impl) {
	i.Backend, i.SeededFrom, i.Libraries = backend.Nats, natsBase, []string{"github.com/nats-io/nats.go"}
	i.Wait = "fails at once when the key exists"
	i.Notices = "a renewal that fails (the key's revision moved, or the cluster did not answer within the op timeout)"
	register(i)
}

// renewal returns the publish options of a renewal of a key the holder
// last wrote at revision rev, with the key's ttl.
type renewal func(rev uint64, ttl time.Duration) []jetstream.PublishOpt

// kvExtend is the correct recipe, nats-kv-extend as impls/natskv writes
// it: Acquire creates the key with the lease's value and the ttl rounded
// up to whole seconds (impls.ErrNotAcquired when it exists, or when no
// stream took the create), token = the create's revision, ValidUntil 0;
// a keep-alive rewrites the key every ttl/3 with the options renew gives,
// which in the recipe condition it on the revision the holder last wrote,
// and stops at the first failure, telling the holder. Release stops the
// keep-alive and deletes the key on the last revision the holder wrote
// (impls.ErrNotHeld when the key moved past it). No impl registers it:
// the zoo's NATS impls build it with the part their bug breaks.
type kvExtend struct {
	cfg    impls.Config
	nc     *nats.Conn
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	values impls.Values
	renew  renewal
	// held are the leases held, by value; only the worker's goroutine
	// touches the map.
	held map[string]*natsHold
}

// checkedRenewal is the recipe's renewal: conditioned on the holder's last
// revision, with a fresh TTL.
func checkedRenewal(rev uint64, ttl time.Duration) []jetstream.PublishOpt {
	return []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl)}
}

// natsHold is one held lease: the key's last revision this holder wrote,
// the keep-alive's failure, and the keep-alive's stop and end.
type natsHold struct {
	mu   sync.Mutex
	rev  uint64
	err  error
	stop chan struct{}
	done chan struct{}
}

func (h *natsHold) last() (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rev, h.err
}

var _ impls.Client = (*kvExtend)(nil)

// newKVExtend connects to every address of cfg and opens the bucket; its
// keep-alive renews with renew.
func newKVExtend(ctx context.Context, cfg impls.Config, renew renewal) (*kvExtend, error) {
	if err := cfg.Check(backend.Nats); err != nil {
		return nil, err
	}
	for k := range cfg.Params {
		return nil, fmt.Errorf("seeded: unknown impl param %q (the seeded impls take none)", k)
	}
	urls := make([]string, len(cfg.Addrs))
	for i, a := range cfg.Addrs {
		urls[i] = "nats://" + a
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name(fmt.Sprintf("locktest-p%d", cfg.Process)),
		nats.Timeout(2*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(false))
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
	return &kvExtend{cfg: cfg, nc: nc, js: js, kv: kv, values: impls.Values{Process: cfg.Process}, renew: renew, held: map[string]*natsHold{}}, nil
}

// Acquire is nats-kv-extend's.
func (c *kvExtend) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	value := c.values.Next()
	keyTTL := natsbucket.TTL(ttl)
	rev, err := c.kv.Create(ctx, lock, []byte(value), jetstream.KeyTTL(keyTTL))
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return impls.Lease{}, fmt.Errorf("%w: key %s exists", impls.ErrNotAcquired, lock)
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return impls.Lease{}, fmt.Errorf("%w: no stream took the create of %s: %v", impls.ErrNotAcquired, lock, err)
	case err != nil:
		return impls.Lease{}, fmt.Errorf("nats create %s: %w", lock, err)
	}
	l := impls.Lease{Lock: lock, Token: rev, HasToken: true, Value: value}
	h := &natsHold{rev: rev, stop: make(chan struct{}), done: make(chan struct{})}
	go c.keepAlive(h, l, keyTTL)
	c.held[value] = h
	return l, nil
}

// keepAlive rewrites l's key every ttl/3 with the options of c.renew
// until stopped or until a renewal fails, which it tells the holder of.
func (c *kvExtend) keepAlive(h *natsHold, l impls.Lease, ttl time.Duration) {
	defer close(h.done)
	subject := "$KV." + natsbucket.Name + "." + l.Lock
	tick.Until(ttl/3, h.stop, func() bool {
		rev, _ := h.last()
		rctx, cancel := context.WithTimeout(context.Background(), ttl/3)
		ack, err := c.js.PublishMsg(rctx, &nats.Msg{Subject: subject, Data: []byte(l.Value)}, c.renew(rev, ttl)...)
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

// Release is nats-kv-extend's.
func (c *kvExtend) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	h, ok := c.held[l.Value]
	if !ok {
		return impls.Released{}, fmt.Errorf("nats: release of a lease this client does not hold (%s %s)", l.Lock, l.Value)
	}
	delete(c.held, l.Value)
	close(h.stop)
	<-h.done
	rev, kerr := h.last()
	err := c.kv.Delete(ctx, l.Lock, jetstream.LastRevision(rev))
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return impls.Released{Removed: l.Value}, nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
		return impls.Released{}, fmt.Errorf("%w: key %s moved past revision %d (keep-alive: %v)", impls.ErrNotHeld, l.Lock, rev, kerr)
	}
	return impls.Released{}, fmt.Errorf("nats delete %s at revision %d: %w", l.Lock, rev, err)
}

// Close stops every keep-alive and closes the connection; the keys of
// leases still held expire.
func (c *kvExtend) Close() error {
	for v, h := range c.held {
		close(h.stop)
		<-h.done
		delete(c.held, v)
	}
	c.nc.Close()
	return nil
}
