package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/impls"
)

// leaseTxnClient is etcd-lease-txn. Each attempt grants a fresh lease of the
// TTL (never renewed), then runs
//
//	If(CreateRevision(key) == 0) Then(Put(key, value, WithLease(lease))) Else(Get(key))
//
// where key is /locktest/lock/<lock> and value is unique to the attempt. A
// put that succeeded is the lock: the token is the transaction's revision,
// which is the key's create revision, and ValidUntil is Config.Now read
// before the grant plus the granted TTL, a lower bound of the lease's end.
// Otherwise the client watches the key from the next revision until it is
// deleted (released, or its lease expired) and tries again; every waiter
// wakes at once (a herd) and the transaction picks one. When the op
// deadline ends the wait, nothing of this client is in the key, so the
// acquire is impls.ErrNotAcquired; a grant that fails is one too. A
// transaction whose reply is lost is unknown: the client revokes the
// attempt's lease as a best effort (deleting the key if it was put) and
// returns an error that is not impls.ErrNotAcquired.
//
// Release deletes the key in a transaction guarded by its create revision
// and value, so a holder whose lease expired cannot delete the next
// holder's key: it fails with impls.ErrNotHeld.
//
// The lease is never renewed, so its holder knows when it ends: a timer of
// the client's own fires at ValidUntil and sends a lost-lock notice
// (Config.Lost) unless the lease was released first. A paused holder's
// timer fires only when it runs again.
type leaseTxnClient struct {
	*base
	// timers are the notice timers of the leases held, by value; only the
	// worker's goroutine touches the map.
	timers map[string]*time.Timer
}

var (
	_ impls.Client        = (*leaseTxnClient)(nil)
	_ impls.GuardedWriter = (*leaseTxnClient)(nil)
)

// Acquire implements impls.Client; see leaseTxnClient.
func (c *leaseTxnClient) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	key := txnPrefix + lock
	sec := ttlSeconds(ttl)
	for {
		t0 := c.cfg.Now()
		g, err := c.cli.Grant(ctx, sec)
		if err != nil {
			return impls.Lease{}, fmt.Errorf("%w: grant a lease: %v", impls.ErrNotAcquired, err)
		}
		value := c.values.Next()
		resp, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, value, clientv3.WithLease(g.ID))).
			Else(clientv3.OpGet(key)).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return impls.Lease{}, fmt.Errorf("%w: the attempt's lease expired before its transaction: %v", impls.ErrNotAcquired, err)
		}
		if err != nil {
			c.revoke(g.ID)
			return impls.Lease{}, fmt.Errorf("txn: %w (outcome unknown; revoked the attempt's lease)", err)
		}
		if resp.Succeeded {
			l := impls.Lease{
				Lock: lock, Token: uint64(resp.Header.Revision), HasToken: true, Value: value,
				ValidUntil: t0 + time.Duration(g.TTL)*time.Second,
			}
			c.timers[value] = time.AfterFunc(l.ValidUntil-c.cfg.Now(), func() {
				c.cfg.Tell(lock, value, "the lease's TTL ran out (the client's own timer: etcd-lease-txn never renews it)")
			})
			return l, nil
		}
		go c.revoke(g.ID) // unused; it would expire anyway
		holder := "?"
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			holder = string(kvs[0].GetValue())
		}
		if err := c.waitDelete(ctx, key, resp.Header.Revision+1); err != nil {
			return impls.Lease{}, fmt.Errorf("%w: held by %s: %v", impls.ErrNotAcquired, holder, err)
		}
	}
}

// waitDelete waits until key is deleted at revision rev or later, or ctx
// ends.
func (c *leaseTxnClient) waitDelete(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range c.cli.Watch(wctx, key, clientv3.WithRev(rev), clientv3.WithFilterPut()) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended")
}

// revoke revokes lease id as a best effort.
func (c *leaseTxnClient) revoke(id clientv3.LeaseID) {
	ctx, cancel := cleanupCtx()
	defer cancel()
	_, _ = c.cli.Revoke(ctx, id)
}

// Release implements impls.Client; see leaseTxnClient.
func (c *leaseTxnClient) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	if t, ok := c.timers[l.Value]; ok {
		t.Stop()
		delete(c.timers, l.Value)
	}
	key := txnPrefix + l.Lock
	resp, err := c.cli.Txn(ctx).
		If(ownerCmp(key, l.Token), clientv3.Compare(clientv3.Value(key), "=", l.Value)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return impls.Released{}, err
	}
	if !resp.Succeeded {
		return impls.Released{}, fmt.Errorf("%w: key %s is no longer %q at revision %d: the lease expired", impls.ErrNotHeld, key, l.Value, l.Token)
	}
	return impls.Released{Removed: l.Value}, nil
}

// GuardedRead implements impls.GuardedWriter.
func (c *leaseTxnClient) GuardedRead(ctx context.Context, l impls.Lease, key string) (int64, error) {
	return c.guardedRead(ctx, key)
}

// GuardedWrite implements impls.GuardedWriter: the write is a transaction
// guarded by the lock key's create revision being the lease's token.
func (c *leaseTxnClient) GuardedWrite(ctx context.Context, l impls.Lease, key string, value int64) (bool, error) {
	return c.guardedWrite(ctx, ownerCmp(txnPrefix+l.Lock, l.Token), key, value)
}

// Close closes the client; leases still held expire with their TTL.
func (c *leaseTxnClient) Close() error {
	for _, t := range c.timers {
		t.Stop()
	}
	return c.cli.Close()
}
