package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/impls"
)

// mutexClient is etcd-mutex: one concurrency.Session per worker (created at
// the first acquire and again after it expired) and a concurrency.Mutex per
// acquire.
//
// Acquire calls Mutex.Lock with the op deadline. On success the token is the
// create revision of the holder's key (the one Mutex.IsOwner compares), and
// Lease.Value is the key itself (prefix/lease-id, unique per session). The
// session's lease is then renewed once with KeepAliveOnce, so that
// ValidUntil = Config.Now before that renewal + the lease TTL is a lower
// bound of the lease's end on the leader; the session's own keep-alives
// extend it further while the worker runs, but a paused worker sends none.
//
// When Lock fails, the acquire is a fail only when the library removed the
// waiter key itself (Mutex.Key() is then "\x00"): Lock timed out while it
// waited behind an older key, so it never owned the lock. (Lock does the
// same cleanup when the deadline strikes in the one round trip between the
// last predecessor's deletion and its final check of its own key; the lock
// was then the client's for that round trip, unknown to it and with no
// token handed out, and the history records a fail.) Any other failure
// (the first transaction's reply lost, the session's key gone) is unknown,
// except a first transaction refused because the session's lease had
// already expired (a fail; the session is replaced):
// the client deletes its key as a best effort, orphans the session if it
// cannot, and returns an error that is not impls.ErrNotAcquired.
//
// Release, with the impl param unlock=fenced (the default), deletes the
// holder's key in a transaction guarded by IsOwner: it is the library's
// Unlock plus the guard, which changes nothing for a live holder and
// tells an expired one apart: the release then fails with
// impls.ErrNotHeld, and its error says whether Session.Done() had fired
// (the worker saw its lease expire while it believed it held the lock).
// The guard is also the fix proposed for etcd-io/etcd#22082
// (etcd-io/etcd#22115): the key of a session is the same name at every
// acquire, so an Unlock retried after its first try's reply was lost,
// when the session holds the lock again, deletes by name the newer key.
// With unlock=library, Release calls the released library's
// Mutex.Unlock as it is, which deletes the key by name, and so shows that
// bug; a release then never fails (a key already gone deletes nothing).
//
// Each grant's mutex is kept, by the lease's key and create revision,
// until a release of it completes ok or fail: a release of unknown
// outcome leaves it, and a later release of the same lease (the worker's
// --retry-release) goes through a concurrency.Mutex of that lease, as an
// application that retries its Unlock does, while the client may hold a
// newer lease of the same key. A re-entrant grant (the same key and
// revision again) is a mutex of its own: after a release of one of the
// two, the other is still kept.
//
// A release whose deadline passes is of unknown outcome, and the session is
// kept, as the library's users keep it. Mutex.Lock is re-entrant within a
// session, so the next Acquire finds the session's key still there when
// the release has not taken effect, and is granted it at once with the same
// key and token: the same hold going on. The release may still be applied
// later (a request delivered after a partition heals gets a fresh server
// deadline); it then deletes that key, and the hold ends before ValidUntil
// (docs/findings.md: a re-grant overtaken by a late release).
//
// A lost-lock notice goes to the holder (Config.Lost) when the session's
// Done channel closes while a lease is held: the session's lease expired,
// or its keep-alive could not renew it before the TTL ran out, the way
// the library tells its users.
type mutexClient struct {
	*base
	sess    *concurrency.Session
	sessTTL int64
	// dropped is set when this client ends its session itself, whose
	// Done then closes too: that is no news of a lost lease.
	dropped *atomic.Bool
	// unlock is how Release deletes the key: unlockFenced or
	// unlockLibrary.
	unlock string
	// mutexes are the mutexes of the grants not yet released (no release
	// of theirs completed ok or fail), by lease, one per grant: the mutexes
	// of one lease are alike (the same key and revision, the same
	// session), so a release takes the last.
	mutexes map[leaseID][]*concurrency.Mutex
	// current is the lease of the last grant, until its release returns;
	// zero when none.
	current leaseID
}

// leaseID names an etcd-mutex lease: its key (Lease.Value), which is the
// same at every grant to one session, and the key's create revision
// (Lease.Token), which is not.
type leaseID struct {
	key string
	rev uint64
}

// The values of etcd-mutex's impl param unlock.
const (
	// unlockFenced deletes the key only while it has the holder's create
	// revision (Mutex.IsOwner), in one transaction.
	unlockFenced = "fenced"
	// unlockLibrary calls concurrency.Mutex.Unlock, which deletes the key
	// by its name.
	unlockLibrary = "library"
)

// newMutex builds an etcd-mutex client, reading its impl param unlock.
func newMutex(cfg impls.Config) (*mutexClient, error) {
	unlock := cmp.Or(cfg.Params["unlock"], unlockFenced)
	if unlock != unlockFenced && unlock != unlockLibrary {
		return nil, fmt.Errorf("etcd-mutex: impl param unlock=%q: want %s or %s", unlock, unlockFenced, unlockLibrary)
	}
	b, err := newBase(cfg, "etcd-mutex", "unlock")
	if err != nil {
		return nil, err
	}
	return &mutexClient{base: b, unlock: unlock, mutexes: map[leaseID][]*concurrency.Mutex{}}, nil
}

var (
	_ impls.Client        = (*mutexClient)(nil)
	_ impls.GuardedWriter = (*mutexClient)(nil)
)

// sessionExpired reports whether s's keep-alive has stopped: its lease
// expired, or could not be renewed before its TTL ran out.
func sessionExpired(s *concurrency.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

// session returns the worker's live session of sec seconds, creating one
// when there is none or the last one expired. The lease is granted with
// ctx, so a cluster that does not answer costs at most the op timeout;
// the session keeps it alive in the background.
func (c *mutexClient) session(ctx context.Context, sec int64) (*concurrency.Session, error) {
	if c.sess != nil && (sessionExpired(c.sess) || c.sessTTL != sec) {
		c.dropSession()
	}
	if c.sess != nil {
		return c.sess, nil
	}
	g, err := c.cli.Grant(ctx, sec)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(int(sec)), concurrency.WithLease(g.ID))
	if err != nil {
		return nil, err
	}
	c.sess, c.sessTTL, c.dropped = s, sec, &atomic.Bool{}
	go c.watch(s, c.dropped)
	return s, nil
}

// watch tells of every lease held when s's Done closes, unless this
// client dropped s itself.
func (c *mutexClient) watch(s *concurrency.Session, dropped *atomic.Bool) {
	<-s.Done()
	if !dropped.Load() {
		c.holding.Lost("the etcd session's lease expired or could not be renewed (Session.Done closed)")
	}
}

// dropSession stops renewing the session's lease and forgets it; the lease
// and every key attached to it expire within the TTL.
func (c *mutexClient) dropSession() {
	if c.sess != nil {
		c.dropped.Store(true)
		c.sess.Orphan()
		c.sess = nil
	}
}

// Acquire implements impls.Client; see mutexClient.
func (c *mutexClient) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	s, err := c.session(ctx, ttlSeconds(ttl))
	if err != nil {
		return impls.Lease{}, fmt.Errorf("%w: start a session: %v", impls.ErrNotAcquired, err)
	}
	m := concurrency.NewMutex(s, mutexPrefix+lock)
	if err := m.Lock(ctx); err != nil {
		return impls.Lease{}, c.lockFailed(m, err)
	}
	key := m.Key()
	owner := m.IsOwner()
	rev := uint64(owner.GetCompare().GetCreateRevision())
	t0 := c.cfg.Now()
	ka, err := c.cli.KeepAliveOnce(ctx, s.Lease())
	if err != nil {
		c.abandon(key)
		return impls.Lease{}, fmt.Errorf("locked %s at revision %d but could not renew the session's lease (%v); deleted the key, outcome unknown", key, rev, err)
	}
	c.mutexes[leaseID{key, rev}] = append(c.mutexes[leaseID{key, rev}], m)
	return c.hold(s, lock, key, rev, t0+time.Duration(ka.TTL)*time.Second), nil
}

// hold records the grant of lock to session s, its key created at
// revision rev and its lease valid until validUntil, as the current lease
// whose loss the session's Done tells of, and returns it.
func (c *mutexClient) hold(s *concurrency.Session, lock, key string, rev uint64, validUntil time.Duration) impls.Lease {
	c.current = leaseID{key, rev}
	l := impls.Lease{Lock: lock, Token: rev, HasToken: true, Value: key, ValidUntil: validUntil}
	c.holding.Add(l)
	if sessionExpired(s) {
		// Done closed between the grant and now: no notice named l.
		c.holding.Lost("the etcd session's lease expired or could not be renewed (Session.Done closed)")
	}
	return l
}

// lockFailed classifies a failed Mutex.Lock and cleans up after it.
func (c *mutexClient) lockFailed(m *concurrency.Mutex, err error) error {
	switch key := m.Key(); {
	case key == "\x00":
		return fmt.Errorf("%w: gave up waiting for an older waiter to go: %v", impls.ErrNotAcquired, err)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// The first transaction was refused whole: the session's lease
		// had expired before Session.Done fired.
		c.dropSession()
		return fmt.Errorf("%w: the session's lease expired (%v)", impls.ErrNotAcquired, err)
	case errors.Is(err, concurrency.ErrSessionExpired):
		c.dropSession()
		return fmt.Errorf("session expired while waiting for the lock (Session.Done): %w", err)
	default:
		c.abandon(key)
		return fmt.Errorf("lock: %w (outcome unknown)", err)
	}
}

// abandon deletes key as a best effort; if it cannot, it drops the session
// so the key expires with its lease instead of blocking the lock forever.
func (c *mutexClient) abandon(key string) {
	if key == "" {
		return
	}
	ctx, cancel := cleanupCtx()
	defer cancel()
	if _, err := c.cli.Delete(ctx, key); err != nil {
		c.dropSession()
	}
}

// Release implements impls.Client; see mutexClient.
func (c *mutexClient) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	id := leaseID{l.Value, l.Token}
	m := c.mutex(id)
	var rel impls.Released
	var err error
	if c.unlock == unlockLibrary {
		rel, err = c.unlockByName(ctx, m, l)
	} else {
		rel, err = c.unlockFenced(ctx, m, l)
	}
	if ms := c.mutexes[id]; len(ms) > 0 && (err == nil || errors.Is(err, impls.ErrNotHeld)) {
		if c.mutexes[id] = ms[:len(ms)-1]; len(ms) == 1 {
			delete(c.mutexes, id)
		}
	}
	if id == c.current {
		c.current = leaseID{}
	}
	if c.current.key != l.Value {
		// No newer lease of the same key is held: the notices of this
		// one end with its release.
		c.holding.Remove(l.Value)
	}
	return rel, err
}

// mutex returns the last mutex kept of the lease id, nil when none.
func (c *mutexClient) mutex(id leaseID) *concurrency.Mutex {
	if ms := c.mutexes[id]; len(ms) > 0 {
		return ms[len(ms)-1]
	}
	return nil
}

// unlockFenced deletes l's key in a transaction guarded by its mutex's
// IsOwner (by l's own key and revision when m is nil).
func (c *mutexClient) unlockFenced(ctx context.Context, m *concurrency.Mutex, l impls.Lease) (impls.Released, error) {
	owner := ownerCmp(l.Value, l.Token)
	if m != nil {
		owner = m.IsOwner()
	}
	expired := c.sess == nil || sessionExpired(c.sess)
	resp, err := c.cli.Txn(ctx).If(owner).Then(clientv3.OpDelete(l.Value)).Commit()
	if err != nil {
		return impls.Released{}, err
	}
	if !resp.Succeeded {
		if expired {
			return impls.Released{}, fmt.Errorf("%w: the session expired while the lock was held (Session.Done fired); key %s is gone", impls.ErrNotHeld, l.Value)
		}
		return impls.Released{}, fmt.Errorf("%w: key %s with revision %d is gone: the session's lease expired, or a release of it took effect", impls.ErrNotHeld, l.Value, l.Token)
	}
	return impls.Released{Removed: l.Value}, nil
}

// unlockByName calls m.Unlock, the library's own release, which deletes
// l's key by its name whatever its revision.
func (c *mutexClient) unlockByName(ctx context.Context, m *concurrency.Mutex, l impls.Lease) (impls.Released, error) {
	if m == nil {
		return impls.Released{}, fmt.Errorf("%w: no mutex of this client holds key %s at revision %d", impls.ErrNotHeld, l.Value, l.Token)
	}
	if err := m.Unlock(ctx); err != nil {
		return impls.Released{}, err
	}
	return impls.Released{Removed: l.Value}, nil
}

// GuardedRead implements impls.GuardedWriter.
func (c *mutexClient) GuardedRead(ctx context.Context, l impls.Lease, key string) (int64, error) {
	return c.guardedRead(ctx, key)
}

// GuardedWrite implements impls.GuardedWriter: the write is a transaction
// guarded by Mutex.IsOwner() of l's mutex.
func (c *mutexClient) GuardedWrite(ctx context.Context, l impls.Lease, key string, value int64) (bool, error) {
	owner := ownerCmp(l.Value, l.Token)
	if m := c.mutex(leaseID{l.Value, l.Token}); m != nil {
		owner = m.IsOwner()
	}
	return c.guardedWrite(ctx, owner, key, value)
}

// Close revokes the session's lease, releasing any key still attached, and
// closes the client.
func (c *mutexClient) Close() error {
	var err error
	if c.sess != nil {
		c.dropped.Store(true)
		err = c.sess.Close()
		c.sess = nil
	}
	return errors.Join(err, c.cli.Close())
}
