package zk

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/impls"
)

// recipeRoot is the parent of the lock nodes of zk-recipe: lock L is the
// node recipeRoot/L, and its contenders are its children.
const recipeRoot = "/locktest/zk-recipe"

// protectedPrefix marks a contender's node; the GUID follows it. It is the
// prefix the Java client Curator and go-zookeeper use for protected nodes.
const protectedPrefix = "_c_"

// Recipe is zk-recipe, the lock recipe of the ZooKeeper documentation:
//
//  1. Create the ephemeral sequential node <lock>/_c_<guid>-lock-<seq>. If
//     the connection breaks before the reply, the node may or may not
//     exist: sync, list the children and look for the GUID; create again
//     only if it is not there. A node of this session cannot outlive the
//     session, so a create that failed with session expiry left nothing.
//  2. List the children. The acquire's node is its lowest child with the
//     GUID (a create whose reply was lost may still add a second one, which
//     is deleted). If it has the lowest sequence number of all, we hold the
//     lock: read its czxid (the zxid of the transaction that created it) as
//     the fencing token.
//  3. Otherwise watch only the next lower node (a get with a watch; no
//     watch on the parent, so a release wakes one contender, not all) and
//     go back to 2 when it changes or is gone.
//
// Release deletes the node. Acquire blocks until it holds the lock or the
// operation's deadline passes; at the deadline it deletes its node (fail)
// or, if it cannot, leaves the outcome unknown and retries the delete at
// its next operation. It is not reentrant: a second acquire of a held lock
// by the same client queues behind its own first node until the deadline.
//
// Token: the czxid, not the sequence number. Within one lock both increase
// from holder to holder (the lowest sequence, i.e. the earliest create,
// holds), but the sequence number is a per-parent counter, ten digits that
// wrap at 2^31 and restart if the lock node is ever deleted and created
// again, while the czxid is the ensemble's transaction id: unique for every
// node ever created and increasing across all locks, restarts and leader
// elections (the epoch is its high 32 bits). A resource guarded by several
// locks, or a lock node that is cleaned up, keeps a monotonic token.
type Recipe struct {
	*session
	holds leases[hold] // by node path (Lease.Value)
}

var _ impls.Client = (*Recipe)(nil)

// Acquire takes lock, waiting for it until ctx ends; see Recipe.
func (c *Recipe) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	if err := c.begin(lock, ttl); err != nil {
		return impls.Lease{}, err
	}
	c.deleteOrphans(ctx)
	parent := recipeRoot + "/" + lock
	var g [16]byte
	rand.Read(g[:])
	mine := protectedPrefix + hex.EncodeToString(g[:])
	r, err := c.create(ctx, parent, mine)
	if err != nil {
		return impls.Lease{}, err
	}
	c.cfg.Pass(HookAfterCreate)
	l, err := c.wait(ctx, lock, parent, mine)
	if err != nil {
		return impls.Lease{}, c.abandon(r, err)
	}
	h := c.newHold()
	h.lost = r.lost
	c.holds.put(l.Value, h)
	c.holding.Add(l)
	return l, nil
}

// created is the outcome of a create: the node's path or why there is none.
type created struct {
	parent, mine string // the lock node and this acquire's name prefix
	path         string
	// lost says a create's reply was lost: the request may still be
	// applied later, so a second node with this GUID may show up.
	lost bool
	err  error
}

// glob is the orphan pattern of every node of this acquire.
func (r created) glob() string { return r.parent + "/" + r.mine + "*" }

// create makes this acquire's protected node, named mine-lock-<seq>, under
// parent. If ctx ends first, the create goes on in the background, which
// deletes the node once it exists; the acquire's outcome is then unknown.
func (c *Recipe) create(ctx context.Context, parent, mine string) (created, error) {
	ch := make(chan created, 1)
	go func() { ch <- c.createProtected(parent, mine) }()
	select {
	case r := <-ch:
		switch {
		case r.err == nil:
			return r, nil
		case r.lost || errors.Is(r.err, zk.ErrConnectionClosed):
			// A create may have been applied; its node is found by its
			// GUID and deleted at the next operation.
			c.addOrphan(r.glob())
			return r, fmt.Errorf("create under %s: %w", parent, r.err)
		default:
			// The server refused the create, the request was never sent, or
			// the session expired, which takes its nodes with it: nothing
			// was created.
			return r, fmt.Errorf("%w: create under %s: %v", impls.ErrNotAcquired, parent, r.err)
		}
	case <-ctx.Done():
		go func() {
			r := <-ch
			if r.path != "" || r.lost {
				dctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
				defer cancel()
				if err := c.deleteOrphan(dctx, r.glob()); err != nil {
					c.addOrphan(r.glob())
				}
			}
		}()
		return created{}, fmt.Errorf("create under %s unanswered at the deadline (%w); the node, if any, is deleted when the reply comes", parent, ctx.Err())
	}
}

// createProtected is step 1 of the recipe, with the library's blocking
// calls. It creates the lock's ancestors when they are missing.
func (c *Recipe) createProtected(parent, mine string) created {
	r := created{parent: parent, mine: mine}
	prefix := parent + "/" + mine + "-lock-"
	for range 3 {
		path, err := c.conn.Create(prefix, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		r.err = err
		switch {
		case err == nil:
			r.path = path
			return r
		case errors.Is(err, zk.ErrNoNode):
			if r.err = c.ensurePath(context.Background(), parent); r.err != nil {
				return r
			}
		case errors.Is(err, zk.ErrConnectionClosed):
			// The request may have been applied with its reply lost. Sync
			// makes the server now connected catch up with the leader, then
			// the children show whether the node exists.
			r.lost = true
			if _, serr := c.conn.Sync(parent); serr != nil && !errors.Is(serr, zk.ErrNoNode) {
				r.err = fmt.Errorf("create's reply lost (%w), then sync %s: %w", err, parent, serr)
				return r
			}
			children, _, lerr := c.conn.Children(parent)
			if errors.Is(lerr, zk.ErrNoNode) {
				continue // no parent, so no node: the next try creates both
			}
			if lerr != nil {
				r.err = fmt.Errorf("create's reply lost (%w), then list %s: %w", err, parent, lerr)
				return r
			}
			for _, ch := range children {
				if strings.HasPrefix(ch, mine) {
					c.foundByGUID.Add(1)
					c.log.Info("found own node by its GUID after a lost create reply", "node", parent+"/"+ch)
					r.path, r.err = parent+"/"+ch, nil
					return r
				}
			}
		case errors.Is(err, zk.ErrSessionExpired):
			// The expired session's nodes are gone; the library opens a
			// new session and the next try uses it.
		default:
			return r
		}
	}
	return r
}

// seqOf returns the sequence number of a contender's node name.
func seqOf(name string) (int64, bool) {
	i := strings.LastIndex(name, "-lock-")
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[i+len("-lock-"):], 10, 64)
	return n, err == nil
}

// contender is a child of a lock node.
type contender struct {
	seq  int64
	name string
}

// wait is steps 2 and 3: it returns the lease once this acquire's node has
// the lowest sequence under parent.
func (c *Recipe) wait(ctx context.Context, lock, parent, mine string) (impls.Lease, error) {
	for {
		start := c.cfg.Now()
		children, err := call(ctx, func() ([]string, error) {
			ch, _, err := c.conn.Children(parent)
			return ch, err
		})
		if err != nil {
			return impls.Lease{}, fmt.Errorf("list %s: %w", parent, err)
		}
		var own, others []contender
		for _, ch := range children {
			s, ok := seqOf(ch)
			switch {
			case !ok:
			case strings.HasPrefix(ch, mine):
				own = append(own, contender{s, ch})
			default:
				others = append(others, contender{s, ch})
			}
		}
		if len(own) == 0 {
			return impls.Lease{}, errNodeGone
		}
		slices.SortFunc(own, func(a, b contender) int { return cmp.Compare(a.seq, b.seq) })
		for _, extra := range own[1:] {
			if err := c.deleteNode(ctx, parent+"/"+extra.name); err != nil {
				c.addOrphan(parent + "/" + extra.name)
			}
		}
		path, ownSeq := parent+"/"+own[0].name, own[0].seq
		var pred *contender
		for i, o := range others {
			if o.seq < ownSeq && (pred == nil || o.seq > pred.seq) {
				pred = &others[i]
			}
		}
		if pred == nil {
			stat, err := call(ctx, func() (*zk.Stat, error) {
				ok, st, err := c.conn.Exists(path)
				if err == nil && !ok {
					err = errNodeGone
				}
				return st, err
			})
			if errors.Is(err, errNodeGone) {
				return impls.Lease{}, err
			}
			if err != nil {
				return impls.Lease{}, fmt.Errorf("stat %s: %w", path, err)
			}
			return impls.Lease{
				Lock: lock, Token: uint64(stat.Czxid), HasToken: true, Value: path,
				ValidUntil: start + c.sessionTimeout(), Node: c.conn.Server(),
			}, nil
		}
		watch, err := call(ctx, func() (<-chan zk.Event, error) {
			_, _, w, err := c.conn.GetW(parent + "/" + pred.name)
			return w, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone already: look again
		}
		if err != nil {
			return impls.Lease{}, fmt.Errorf("watch %s: %w", pred.name, err)
		}
		select {
		case ev := <-watch:
			if ev.Err != nil && !errors.Is(ev.Err, zk.ErrSessionExpired) {
				return impls.Lease{}, fmt.Errorf("watch %s: %w", pred.name, ev.Err)
			}
		case <-ctx.Done():
			return impls.Lease{}, fmt.Errorf("waiting for %s: %w", pred.name, ctx.Err())
		}
	}
}

// errNodeGone is an acquire whose own node vanished: its session expired.
var errNodeGone = errors.New("own node is gone: the session expired while waiting")

// abandon ends an acquire that failed after its node was created: it
// deletes every node of the acquire, with a deadline of its own, and
// returns a certain failure if they are gone, else an unknown outcome (the
// delete is retried at the next operation). After a lost create reply a
// late node may still appear, so that acquire stays unknown.
func (c *Recipe) abandon(r created, cause error) error {
	if errors.Is(cause, errNodeGone) && !r.lost {
		return fmt.Errorf("%w: %w", impls.ErrNotAcquired, cause)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := c.deleteOrphan(ctx, r.glob()); err != nil {
		c.addOrphan(r.glob())
		return fmt.Errorf("%v; deleting own node under %s failed too (%v), retried at the next operation", cause, r.parent, err)
	}
	if r.lost {
		c.addOrphan(r.glob())
		return fmt.Errorf("%v; own nodes deleted, but a create whose reply was lost may still add one", cause)
	}
	return fmt.Errorf("%w: %w; own node deleted", impls.ErrNotAcquired, cause)
}

// Release deletes the lease's node. It returns impls.ErrNotHeld if the
// node is gone: the session it was created in expired (the error says
// when), or it was released already.
func (c *Recipe) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	defer c.holding.Remove(l.Value)
	h, ok := c.holds.take(l.Value)
	if c.conn == nil {
		return impls.Released{}, impls.ErrNotHeld
	}
	c.deleteOrphans(ctx)
	if ok {
		if why := c.expiredSince(h, l); why != "" {
			return impls.Released{}, fmt.Errorf("%w: %s", impls.ErrNotHeld, why)
		}
	}
	// A delete whose connection broke is sent again (connBroken): the path
	// is this acquire's alone, so a second delete cannot remove another's
	// node, and the new connection tells whether the session survived.
	var err error
	for {
		_, err = call(ctx, func() (struct{}, error) { return struct{}{}, c.conn.Delete(l.Value, -1) })
		if !connBroken(err) || ctx.Err() != nil {
			break
		}
	}
	switch {
	case err == nil:
		if ok && h.lost {
			// A late node of this acquire's lost create may exist.
			if i := strings.LastIndex(l.Value, "-lock-"); i > 0 {
				c.addOrphan(l.Value[:i] + "*")
				c.deleteOrphans(ctx)
			}
		}
		return impls.Released{Removed: l.Value}, nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		if ok {
			if why := c.expiredSince(h, l); why != "" {
				return impls.Released{}, fmt.Errorf("%w: %s", impls.ErrNotHeld, why)
			}
		}
		return impls.Released{}, fmt.Errorf("%w: node %s: %v", impls.ErrNotHeld, l.Value, err)
	default:
		// The delete may still be applied; try again at the next operation.
		c.addOrphan(l.Value)
		return impls.Released{}, fmt.Errorf("delete %s: %w", l.Value, err)
	}
}
