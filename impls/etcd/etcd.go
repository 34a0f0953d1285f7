// Package etcd holds the etcd locks, each written the way etcd's users
// write it, with go.etcd.io/etcd/client/v3:
//
//   - etcd-mutex: concurrency.Session (one lease per worker, kept alive in
//     the background) plus concurrency.Mutex, the library's own lock: every
//     waiter puts a key under the lock's prefix, the one with the lowest
//     create revision holds the lock, the others wait for the deletion of
//     their predecessor.
//   - etcd-lease-txn: the "create the key only if it does not exist" lock: a
//     transaction comparing the key's CreateRevision with 0 puts it attached
//     to a fresh lease of the test's TTL, never kept alive; release deletes
//     it.
//   - etcd-v3lock: etcd's own lock service (v3lock), which runs the
//     library's Mutex on the server over a lease the client keeps alive.
//
// All are leases: a holder that pauses past its TTL (a GC pause, SIGSTOP)
// loses the lock while it still believes it holds it, which is what Jepsen
// found in 2020 ("etcd locks did not, and can not, guarantee mutual
// exclusion" under pauses). All grant a real fencing token: the revision
// at which the holder's key was created, which etcd's single, totally
// ordered revision counter makes strictly increasing from holder to holder
// (the header revision of a response alone is not: it is the store's
// current revision, shared by every reader). All also implement
// impls.GuardedWriter for the resource mode etcd-guarded, where the write
// is itself an etcd transaction guarded by ownership (Mutex.IsOwner), so a
// stale holder's write is refused inside the lock service.
//
// etcd lease TTLs are whole seconds: the test's ttl is rounded up to the
// next second (at least one), and Lease.ValidUntil is computed from the
// rounded TTL. Acquire blocks until the lock is free or its context (the
// op timeout) ends; a timed-out wait returns impls.ErrNotAcquired only when
// the attempt certainly left nothing behind. etcd-mutex takes one impl
// param, unlock (see mutexClient); etcd-lease-txn and etcd-v3lock take
// none.
package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
)

// Key prefixes in etcd.
const (
	mutexPrefix    = "/locktest/mutex/"
	txnPrefix      = "/locktest/lock/"
	resourcePrefix = "/locktest/resource/"
)

// Client timeouts.
const (
	dialTimeout = 2 * time.Second
	// cleanupTimeout bounds the best-effort removal of what a failed
	// acquire may have left.
	cleanupTimeout = time.Second
)

func init() {
	for _, i := range []impls.Impl{
		{
			Name: "etcd-mutex", Backend: backend.Etcd, Fenced: true, Guarded: true,
			TokenSource: "etcd create revision of the holder's key", Reentrant: true, Blocking: true,
			Wait:    "waits on the server for its predecessor's key to be deleted (Mutex.Lock), until its deadline; a second acquire on the same session finds the session's own key and is granted at once",
			Notices: "the session's Done channel closes (its lease expired, or the client could not renew it before its TTL ran out)",
			Doc: "concurrency.Session (one lease per worker, kept alive) plus concurrency.Mutex, token = the create revision of the holder's key; " +
				"a holder paused past the session TTL loses its key while it still believes it holds the lock.",
			New: impls.Wrap(newMutex, func(c *mutexClient) impls.Client { return c }),
		},
		{
			Name: "etcd-lease-txn", Backend: backend.Etcd, Fenced: true, Guarded: true,
			TokenSource: "etcd create revision of the lock key", Blocking: true,
			Wait:    "watches the key for its deletion and retries the transaction (every waiter at once), until its deadline",
			Notices: "its own timer at the lease's end (the lease is never renewed, so it is then gone)",
			Doc: "a transaction that puts the lock key only if its CreateRevision is 0, attached to a lease of the TTL that is never renewed, " +
				"released by a guarded delete, token = the key's create revision; a holder that outlives its TTL loses the lock.",
			New: impls.Wrap(func(cfg impls.Config) (*base, error) { return newBase(cfg, "etcd-lease-txn") },
				func(b *base) impls.Client { return &leaseTxnClient{base: b, timers: map[string]*time.Timer{}} }),
		},
		{
			Name: "etcd-v3lock", Backend: backend.Etcd, Fenced: true, Guarded: true,
			TokenSource: "etcd create revision of the key the lock service returns", Reentrant: true, Blocking: true,
			Wait:    "waits on the server, inside the lock service's Lock call, for its predecessor's key to be deleted, until its deadline; a second Lock with the same lease is granted at once",
			Notices: "the session's Done channel closes (its lease expired, or the client could not renew it before its TTL ran out)",
			Doc: "etcd's own lock service (v3lock: Lock with a lease kept alive by a concurrency.Session, Unlock by key), token = the create revision of the key it returns; " +
				"its Unlock deletes the key by name and always succeeds, also for a holder that lost the lock.",
			New: impls.Wrap(newV3lock, func(c *v3lockClient) impls.Client { return c }),
		},
	} {
		i.Libraries = []string{"go.etcd.io/etcd/client/v3"}
		impls.Register(i)
	}
}

// base is what every client shares: the etcd client and the configuration.
type base struct {
	cli    *clientv3.Client
	cfg    impls.Config
	values impls.Values
	// holding are the leases held, for the lost-lock notices.
	holding impls.Holding
}

// newBase connects the client of impl, which takes the impl params
// params; any other param is an error.
func newBase(cfg impls.Config, impl string, params ...string) (*base, error) {
	if err := cfg.Check(backend.Etcd); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.Params)) {
		if !slices.Contains(params, k) {
			takes := "none"
			if len(params) > 0 {
				takes = strings.Join(params, ", ")
			}
			return nil, fmt.Errorf("%s: unknown impl param %q (it takes: %s)", impl, k, takes)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Addrs, DialTimeout: dialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	b := &base{cli: cli, cfg: cfg, values: impls.Values{Process: cfg.Process}}
	b.holding.Tell = cfg.Tell
	return b, nil
}

// ttlSeconds is the etcd lease TTL for ttl: whole seconds, rounded up, at
// least one.
func ttlSeconds(ttl time.Duration) int64 {
	s := int64((ttl + time.Second - 1) / time.Second)
	return max(s, 1)
}

// guardedWrite puts value under the resource key of lock if owner holds,
// in one transaction.
func (b *base) guardedWrite(ctx context.Context, owner clientv3.Cmp, lock string, value int64) (bool, error) {
	resp, err := b.cli.Txn(ctx).If(owner).Then(clientv3.OpPut(resourcePrefix+lock, strconv.FormatInt(value, 10))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// guardedRead reads the resource counter of lock with a linearizable read.
func (b *base) guardedRead(ctx context.Context, lock string) (int64, error) {
	resp, err := b.cli.Get(ctx, resourcePrefix+lock)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resource %s holds %q, not a number", lock, resp.Kvs[0].Value)
	}
	return n, nil
}

// ownerCmp is the comparison that holds while key exists with the create
// revision rev: what concurrency.Mutex.IsOwner returns for its own key.
func ownerCmp(key string, rev uint64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(key), "=", int64(rev))
}

// cleanupCtx is a short context for removing what a failed acquire left;
// it does not inherit the acquire's deadline, which has passed.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cleanupTimeout)
}
