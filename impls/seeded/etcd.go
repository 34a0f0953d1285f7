package seeded

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
)

// etcdBase is the correct recipe the etcd impls of the zoo vary.
const etcdBase = "etcd-lease-txn"

// etcdPrefix is the parent of the zoo's lock keys in etcd, apart from
// etcd-lease-txn's own.
const etcdPrefix = "/locktest/seeded/"

// etcdDialTimeout is the etcd client's dial timeout, as impls/etcd sets it.
const etcdDialTimeout = 2 * time.Second

// registerEtcd registers a seeded variant of etcd-lease-txn, written with
// go.etcd.io/etcd/client/v3.
func registerEtcd(i impls.Impl) {
	i.Backend, i.SeededFrom, i.Libraries = backend.Etcd, etcdBase, []string{"go.etcd.io/etcd/client/v3"}
	i.Blocking = true
	i.Wait = "watches the key for its deletion and retries the transaction (every waiter at once), until its deadline"
	i.Notices = "its own timer at the lease's end (the lease is never renewed, so it is then gone)"
	register(i)
}

// leaseTxn is the correct recipe, etcd-lease-txn as impls/etcd writes it
// (without its GuardedWriter): each attempt grants a fresh lease of the
// ttl in whole seconds, never renewed, and runs
//
//	If(CreateRevision(key) == 0) Then(Put(key, value, WithLease(lease))) Else(Get(key))
//
// A put that succeeded is the lock, whose token is the transaction's
// revision (the key's create revision) and whose ValidUntil is Config.Now
// before the grant plus the granted TTL; otherwise the client watches the
// key until it is deleted and tries again, until its deadline
// (impls.ErrNotAcquired). A transaction whose reply is lost revokes the
// attempt's lease and leaves the outcome unknown. Release deletes the key
// in a transaction guarded by its create revision and value (impls.ErrNotHeld
// when it no longer holds them). A timer of the client's own tells the
// holder when the lease's TTL ran out. No impl registers it: each of the
// zoo's etcd impls embeds it and replaces the part its bug breaks.
type leaseTxn struct {
	cli    *clientv3.Client
	cfg    impls.Config
	values impls.Values
	// held are the leases held, by value: the key's create revision and
	// the notice timer. Only the worker's goroutine touches the map.
	held map[string]etcdHold
}

// etcdHold is what a leaseTxn keeps of a lease it holds.
type etcdHold struct {
	rev   int64
	timer *time.Timer
}

var _ impls.Client = (*leaseTxn)(nil)

// newLeaseTxn checks cfg and builds the etcd client.
func newLeaseTxn(cfg impls.Config) (*leaseTxn, error) {
	if err := cfg.Check(backend.Etcd); err != nil {
		return nil, err
	}
	for k := range cfg.Params {
		return nil, fmt.Errorf("seeded: unknown impl param %q (the seeded impls take none)", k)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Addrs, DialTimeout: etcdDialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &leaseTxn{cli: cli, cfg: cfg, values: impls.Values{Process: cfg.Process}, held: map[string]etcdHold{}}, nil
}

// newEtcdImpl returns the impls.Impl.New of an etcd variant: the correct
// recipe's client (newLeaseTxn), wrapped by wrap.
func newEtcdImpl(wrap func(*leaseTxn) impls.Client) func(context.Context, impls.Config) (impls.Client, error) {
	return impls.Wrap(newLeaseTxn, wrap)
}

// ttlSeconds is the etcd lease TTL for ttl: whole seconds, rounded up, at
// least one.
func ttlSeconds(ttl time.Duration) int64 {
	return max(int64((ttl+time.Second-1)/time.Second), 1)
}

// attempt is one try of the recipe: the lease it granted, the harness
// time before the grant, the lock value and the transaction's answer.
type attempt struct {
	t0    time.Duration
	lease *clientv3.LeaseGrantResponse
	value string
	resp  *clientv3.TxnResponse
}

// try grants a lease and runs the transaction once. A grant that fails,
// or a lease that expired before the transaction, is impls.ErrNotAcquired;
// a transaction that failed otherwise revokes the lease and leaves the
// outcome unknown.
func (c *leaseTxn) try(ctx context.Context, key string, ttl time.Duration) (attempt, error) {
	a := attempt{t0: c.cfg.Now()}
	g, err := c.cli.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return a, fmt.Errorf("%w: grant a lease: %v", impls.ErrNotAcquired, err)
	}
	a.lease, a.value = g, c.values.Next()
	a.resp, err = c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, a.value, clientv3.WithLease(g.ID))).
		Else(clientv3.OpGet(key)).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return a, fmt.Errorf("%w: the attempt's lease expired before its transaction: %v", impls.ErrNotAcquired, err)
	}
	if err != nil {
		c.revoke(g.ID)
		return a, fmt.Errorf("txn: %w (outcome unknown; revoked the attempt's lease)", err)
	}
	return a, nil
}

// grant returns the lease of attempt a on lock with token tok, the key
// created at revision rev, and starts its notice timer.
func (c *leaseTxn) grant(lock string, a attempt, tok uint64, rev int64) impls.Lease {
	l := impls.Lease{Lock: lock, Token: tok, HasToken: true, Value: a.value, ValidUntil: a.t0 + time.Duration(a.lease.TTL)*time.Second}
	value := a.value
	c.held[value] = etcdHold{rev: rev, timer: time.AfterFunc(l.ValidUntil-c.cfg.Now(), func() {
		c.cfg.Tell(lock, value, "the lease's TTL ran out (the client's own timer: the lease is never renewed)")
	})}
	return l
}

// wait gives up attempt a, which found the key held, and waits until the
// key is deleted; an error is impls.ErrNotAcquired.
func (c *leaseTxn) wait(ctx context.Context, key string, a attempt) error {
	go c.revoke(a.lease.ID)
	holder := "?"
	if kvs := a.resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		holder = string(kvs[0].GetValue())
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range c.cli.Watch(wctx, key, clientv3.WithRev(a.resp.Header.Revision+1), clientv3.WithFilterPut()) {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("%w: held by %s: %v", impls.ErrNotAcquired, holder, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: held by %s: %v", impls.ErrNotAcquired, holder, cmpOr(ctx.Err(), errors.New("watch ended")))
}

// cmpOr is err, or alt when err is nil.
func cmpOr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// Acquire is etcd-lease-txn's.
func (c *leaseTxn) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	key := etcdPrefix + lock
	for {
		a, err := c.try(ctx, key, ttl)
		if err != nil {
			return impls.Lease{}, err
		}
		if a.resp.Succeeded {
			return c.grant(lock, a, uint64(a.resp.Header.Revision), a.resp.Header.Revision), nil
		}
		if err := c.wait(ctx, key, a); err != nil {
			return impls.Lease{}, err
		}
	}
}

// revoke revokes lease id as a best effort, within a second.
func (c *leaseTxn) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = c.cli.Revoke(ctx, id)
}

// Release is etcd-lease-txn's.
func (c *leaseTxn) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	h, ok := c.held[l.Value]
	if ok {
		h.timer.Stop()
		delete(c.held, l.Value)
	}
	key := etcdPrefix + l.Lock
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", h.rev), clientv3.Compare(clientv3.Value(key), "=", l.Value)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return impls.Released{}, err
	}
	if !resp.Succeeded {
		return impls.Released{}, fmt.Errorf("%w: key %s is no longer %q at revision %d: the lease expired", impls.ErrNotHeld, key, l.Value, h.rev)
	}
	return impls.Released{Removed: l.Value}, nil
}

// Close stops the notice timers and closes the client; leases still held
// expire with their TTL.
func (c *leaseTxn) Close() error {
	for _, h := range c.held {
		h.timer.Stop()
	}
	return c.cli.Close()
}
