package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/impls"
)

// lockRoot is the parent of the lock nodes of zk-lock: lock L is the node
// lockRoot/L, under which zk.Lock creates its contenders.
const lockRoot = "/locktest/zk-lock"

// Lock is zk-lock: go-zookeeper's zk.NewLock(conn, path, acl).Lock() and
// Unlock(), called the way its users call them, one zk.Lock per acquire.
// The library implements the same recipe as zk-recipe (protected
// ephemeral sequential node, watch the predecessor), with these
// differences, which are what the harness measures:
//
//   - Lock takes no context and has no deadline. Acquire runs it in a
//     goroutine and gives up at the operation's deadline with an unknown
//     outcome (the library may have created its node); the abandoned Lock
//     goes on, and if it gets the lock it is unlocked at once, as a careful
//     user would do.
//   - When a call fails after its node was created (a lost connection
//     while it lists or watches), Lock returns the error and leaves the
//     node in place, so the lock is stuck behind a node nobody holds until
//     the session ends. Such an acquire is also unknown.
//   - It exposes no fencing token (Lease.HasToken is false) and not its
//     node; Lease.Value is a unique name this client makes up.
//   - Nothing tells the holder that its session expired; Release calls
//     Unlock, whose delete finds no node, and the error says the session
//     expired while the lock was held.
//
// Lease.ValidUntil is the time Lock returned plus the negotiated session
// timeout: a user's belief, one round trip more optimistic than zk-recipe's,
// which counts from the request that showed it the holder.
type Lock struct {
	*session
	seq   uint64
	holds leases[lockHold]
}

// lockHold is a lease's zk.Lock and the session it was taken in.
type lockHold struct {
	lock *zk.Lock
	hold
}

var _ impls.Client = (*Lock)(nil)

// Acquire calls zk.NewLock(...).Lock() and waits for it until ctx ends.
func (c *Lock) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	if err := c.begin(lock, ttl); err != nil {
		return impls.Lease{}, err
	}
	zl := zk.NewLock(c.conn, lockRoot+"/"+lock, zk.WorldACL(zk.PermAll))
	done := make(chan error, 1)
	go func() { done <- zl.Lock() }()
	select {
	case err := <-done:
		if err != nil {
			return impls.Lease{}, fmt.Errorf("zk.Lock: %w", err)
		}
	case <-ctx.Done():
		go func() {
			if err := <-done; err == nil {
				if err := zl.Unlock(); err != nil {
					c.log.Warn("unlock of an abandoned acquire failed", "lock", lock, "err", err)
				}
			}
		}()
		return impls.Lease{}, fmt.Errorf("zk.Lock has not returned at the deadline (%w); it goes on and unlocks if it gets the lock", ctx.Err())
	}
	c.seq++
	l := impls.Lease{
		Lock: lock, Value: fmt.Sprintf("p%d-%d-s%x", c.cfg.Process, c.seq, c.conn.SessionID()),
		ValidUntil: c.cfg.Now() + c.sessionTimeout(), Node: c.conn.Server(),
	}
	c.holds.put(l.Value, lockHold{lock: zl, hold: c.newHold()})
	c.holding.Add(l)
	return l, nil
}

// Release calls Unlock. It returns impls.ErrNotHeld when the node was gone
// (the session expired, which the error says, or it was released already).
func (c *Lock) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	defer c.holding.Remove(l.Value)
	h, ok := c.holds.take(l.Value)
	if !ok {
		return impls.Released{}, fmt.Errorf("%w: no lock %s taken by this client", impls.ErrNotHeld, l.Value)
	}
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, h.lock.Unlock() })
	switch {
	case err == nil:
		return impls.Released{Removed: l.Value}, nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrNotLocked):
		if why := c.expiredSince(h.hold, l); why != "" {
			return impls.Released{}, fmt.Errorf("%w: %s", impls.ErrNotHeld, why)
		}
		return impls.Released{}, fmt.Errorf("%w: zk.Unlock: %v", impls.ErrNotHeld, err)
	default:
		if why := c.expiredSince(h.hold, l); why != "" {
			// Whatever became of the delete, the node was gone already: its
			// path holds this acquire's GUID, so it cannot be anyone else's.
			return impls.Released{}, fmt.Errorf("%w: %s (zk.Unlock: %v)", impls.ErrNotHeld, why, err)
		}
		return impls.Released{}, fmt.Errorf("zk.Unlock: %w", err)
	}
}
