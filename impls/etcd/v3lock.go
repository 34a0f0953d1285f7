package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"

	"github.com/locktest/locktest/impls"
)

// v3lockPrefix is the prefix of etcd-v3lock's lock names.
const v3lockPrefix = "/locktest/v3lock/"

// v3lockClient is etcd-v3lock: etcd's own lock service, v3lock, the
// gRPC service (Lock, Unlock) every etcd server serves beside the KV API,
// which `etcdctl lock` and the grpc-gateway's /v3/lock/lock reach. The
// lock is taken on the server: Lock(name, lease) builds a
// concurrency.Mutex there over a session of the client's lease and waits
// in it until the lock is the client's or the call's deadline ends; the
// key it returns is name/<lease in hex>, attached to the lease. The client
// keeps that lease alive: one concurrency.Session per worker, as for
// etcd-mutex (the session code is etcd-mutex's), whose lease is passed to
// every Lock; the session's Done channel is the lost-lock notice.
//
// Acquire calls Lock with the op deadline, then reads the returned key's
// create revision, the token (the service returns only the key and a
// header, whose revision is the store's when the wait ended, not the
// key's), and renews the lease once with KeepAliveOnce, so that
// ValidUntil = Config.Now before that renewal + the lease TTL is a lower
// bound of the lease's end. A Lock refused because the lease had already
// expired is a fail (the session is replaced). Any other failed Lock (its
// deadline passed while it waited, its reply lost) revokes the session's
// lease: the server deletes the waiter's key when the call's context ends,
// but a put still in flight could land after that, and a revoked lease
// takes every key of it with it and refuses any later put. The acquire
// is then a fail when the revoke succeeded, and unknown when it did not.
// (In the one round trip between its predecessor's deletion and the
// server's final check the lock was the client's, unknown to it and with
// no token handed out; the history records a fail, as for etcd-mutex.)
//
// Release calls Unlock with the key, which the server deletes by its name:
// v3lock's Unlock takes no revision and says nothing of what it deleted,
// so a release always succeeds, also for a holder whose lease expired and
// whose lock was handed on (the checker's stale-release). The key's name
// is the same at every grant to one session, so an Unlock retried after
// its reply was lost, when the session holds the lock again, deletes the
// newer grant: etcd-io/etcd#22082's mechanism in the service itself.
//
// Mutex.Lock is re-entrant within a session, and so is the service: a
// second Lock with the same lease finds the session's key and is granted
// at once, with the same key and token.
type v3lockClient struct {
	*mutexClient
	lock v3lockpb.LockClient
}

// newV3lock builds an etcd-v3lock client; it takes no impl params.
func newV3lock(cfg impls.Config) (*v3lockClient, error) {
	b, err := newBase(cfg, "etcd-v3lock")
	if err != nil {
		return nil, err
	}
	return &v3lockClient{
		mutexClient: &mutexClient{base: b, mutexes: map[leaseID][]*concurrency.Mutex{}},
		lock:        v3lockpb.NewLockClient(b.cli.ActiveConnection()),
	}, nil
}

var (
	_ impls.Client        = (*v3lockClient)(nil)
	_ impls.GuardedWriter = (*v3lockClient)(nil)
)

// leaseGone reports whether err, returned by the lock service, says that
// the lease passed to Lock no longer exists.
func leaseGone(err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) ||
		strings.Contains(err.Error(), rpctypes.ErrLeaseNotFound.Error())
}

// Acquire implements impls.Client; see v3lockClient.
func (c *v3lockClient) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	s, err := c.session(ctx, ttlSeconds(ttl))
	if err != nil {
		return impls.Lease{}, fmt.Errorf("%w: start a session: %v", impls.ErrNotAcquired, err)
	}
	resp, err := c.lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(v3lockPrefix + lock), Lease: int64(s.Lease())})
	if err != nil {
		if leaseGone(err) {
			c.dropSession()
			return impls.Lease{}, fmt.Errorf("%w: the session's lease expired (%v)", impls.ErrNotAcquired, err)
		}
		if rerr := c.revokeSession(); rerr != nil {
			return impls.Lease{}, fmt.Errorf("lock: %w (outcome unknown; revoking the session's lease failed too: %v)", err, rerr)
		}
		return impls.Lease{}, fmt.Errorf("%w: lock: %v (revoked the session's lease, which took any key of it)", impls.ErrNotAcquired, err)
	}
	key := string(resp.Key)
	got, err := c.cli.Get(ctx, key)
	if err != nil || len(got.Kvs) == 0 {
		why := "it is gone: the session's lease expired"
		if err != nil {
			why = err.Error()
		}
		return impls.Lease{}, fmt.Errorf("locked %s but could not read its create revision (%s%s); outcome unknown", key, why, c.revokeAfterGrant())
	}
	rev := uint64(got.Kvs[0].CreateRevision)
	t0 := c.cfg.Now()
	ka, err := c.cli.KeepAliveOnce(ctx, s.Lease())
	if err != nil {
		return impls.Lease{}, fmt.Errorf("locked %s at revision %d but could not renew the session's lease (%v%s); outcome unknown", key, rev, err, c.revokeAfterGrant())
	}
	return c.hold(s, lock, key, rev, t0+time.Duration(ka.TTL)*time.Second), nil
}

// revokeAfterGrant revokes the session's lease after a grant the client
// cannot hand on, so that its key goes; it returns what to add to the
// acquire's error: "" when the revoke took effect.
func (c *v3lockClient) revokeAfterGrant() string {
	if err := c.revokeSession(); err != nil {
		return "; revoking the session's lease failed too: " + err.Error()
	}
	return ""
}

// revokeSession drops the worker's session and revokes its lease, which
// deletes every key attached to it; nil when the revoke took effect.
func (c *v3lockClient) revokeSession() error {
	if c.sess == nil {
		return nil
	}
	id := c.sess.Lease()
	c.dropSession()
	ctx, cancel := cleanupCtx()
	defer cancel()
	_, err := c.cli.Revoke(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil // expired already, with its keys
	}
	return err
}

// Release implements impls.Client; see v3lockClient.
func (c *v3lockClient) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	_, err := c.lock.Unlock(ctx, &v3lockpb.UnlockRequest{Key: []byte(l.Value)})
	if c.current == (leaseID{l.Value, l.Token}) {
		c.current = leaseID{}
	}
	if c.current.key != l.Value {
		// No newer lease of the same key is held: the notices of this
		// one end with its release.
		c.holding.Remove(l.Value)
	}
	if err != nil {
		return impls.Released{}, err
	}
	return impls.Released{Removed: l.Value}, nil
}

// GuardedRead implements impls.GuardedWriter.
func (c *v3lockClient) GuardedRead(ctx context.Context, l impls.Lease, key string) (int64, error) {
	return c.guardedRead(ctx, key)
}

// GuardedWrite implements impls.GuardedWriter: the write is a transaction
// guarded by the lock key's create revision being the lease's token.
func (c *v3lockClient) GuardedWrite(ctx context.Context, l impls.Lease, key string, value int64) (bool, error) {
	return c.guardedWrite(ctx, ownerCmp(l.Value, l.Token), key, value)
}
