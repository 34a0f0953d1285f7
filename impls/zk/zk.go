// Package zk holds the ZooKeeper locks, both on a 3-peer ensemble and both
// with github.com/go-zookeeper/zk:
//
//   - zk-recipe: the lock recipe of the ZooKeeper documentation written
//     with the library's primitives: a protected ephemeral sequential node
//     (a GUID in its name) under the lock's node; the lowest sequence holds
//     the lock; every other contender watches only its predecessor (no
//     herd effect). A create whose reply is lost is resolved by looking the
//     node up by its GUID. Fencing token: the holder node's czxid.
//   - zk-lock: the library's own zk.NewLock / Lock / Unlock as a user calls
//     them. It exposes no token, and the library's behaviour (what it does
//     on connection loss, on session expiry, on errors halfway through) is
//     itself under test.
//
// Both are sessions, and a session is a lease: each worker opens one
// ZooKeeper session, on its first acquire, whose timeout is the test's TTL
// (or the impl parameter session-timeout); the servers clamp it to
// [2·tickTime, 20·tickTime], 400ms to 4s with the provider's 200ms tick. A
// holder believes it holds the lock while its session lives, so
// Lease.ValidUntil is the acquire time plus the negotiated session timeout.
// A holder paused (or partitioned) past its session timeout still believes
// so when it wakes, while ZooKeeper has deleted its node and handed the lock
// on: the debate's pause, with a consensus system. The client learns of the
// expiry only when it reconnects; from then on the next Release of a lease
// taken in the expired session returns an error (impls.ErrNotHeld: the
// release changed nothing) saying that the session expired while the lock
// was held, so the history's release op records it.
//
// ZooKeeper's sessions are measured by the JVM with System.nanoTime, a
// monotonic clock: the clock shim's wall-clock jumps do not expire them.
//
// Every ZooKeeper call runs under the operation's deadline (the library's
// calls take no context; a call still in flight at the deadline is
// abandoned). A timed-out acquire is a fail (impls.ErrNotAcquired) only when
// it certainly left nothing behind: its node was never created, or was
// deleted again by this client or by the expiry of its session. Otherwise
// it is unknown, and the node is deleted later, in the background or at the
// client's next operation.
package zk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
)

// HookAfterCreate is the pause point zk-recipe passes to Config.Hook right
// after its node was created, before it looks at the other contenders.
const HookAfterCreate = "zk-after-create"

// cleanupTimeout bounds the deletion of the node of an acquire that timed
// out; the acquire's own deadline has passed by then.
const cleanupTimeout = time.Second

func init() {
	impls.Register(impls.Impl{
		Name: "zk-recipe", Backend: backend.ZooKeeper, Fenced: true, Points: []string{HookAfterCreate},
		TokenSource: "ZooKeeper czxid of the holder's node", Blocking: true,
		Wait:    "watches its predecessor's node, until its deadline; a second acquire queues behind its own node",
		Notices: "the session's events Disconnected (may be lost) and Expired (lost)",
		Doc: "the ZooKeeper lock recipe (protected ephemeral sequential node, lowest holds, watch the predecessor) with the node's czxid as fencing token; " +
			"the lock is a session lease, so a holder paused past its session timeout still believes it holds it while the next holder has it.",
		Libraries: []string{"github.com/go-zookeeper/zk"},
		New:       impls.Wrap(sessionFor("zk-recipe"), func(s *session) impls.Client { return &Recipe{session: s} }),
	})
	impls.Register(impls.Impl{
		Name: "zk-lock", Backend: backend.ZooKeeper, Blocking: true,
		Wait:    "zk.Lock watches its predecessor with no deadline; the acquire gives up at its deadline",
		Notices: "the session's events Disconnected (may be lost) and Expired (lost)",
		Doc: "go-zookeeper's own zk.NewLock as a user calls it, with no fencing token; " +
			"a session lease that a paused holder outlives, and a library whose Lock takes no deadline and leaves its node behind on errors.",
		Libraries: []string{"github.com/go-zookeeper/zk"},
		New:       impls.Wrap(sessionFor("zk-lock"), func(s *session) impls.Client { return &Lock{session: s} }),
	})
}

// session is one worker's ZooKeeper session and what it learned about it.
// The connection is opened on the first acquire, with a session timeout
// derived from that acquire's ttl.
type session struct {
	cfg     impls.Config
	name    string // the impl, for error messages
	timeout time.Duration
	dialer  zk.Dialer // nil: the library's; tests cut connections with it
	log     *slog.Logger

	conn *zk.Conn
	// holding are the leases held, for the lost-lock notices the
	// session's events send.
	holding impls.Holding
	// foundByGUID counts creates whose reply was lost and whose node was
	// found by its GUID.
	foundByGUID atomic.Int64

	mu         sync.Mutex
	negotiated time.Duration // the session timeout the server granted
	expiries   int           // session expiries seen
	expiredAt  time.Duration // harness time of the last one
	// orphans are the nodes of abandoned acquires still to delete: a path,
	// or a path prefix ending in "*" for a node known only by its GUID.
	orphans []string
}

// begin starts an acquire of lock with ttl: it checks the lock's name and
// opens the session if it is not open yet (connect).
func (s *session) begin(lock string, ttl time.Duration) error {
	if err := checkLockName(s.name, lock); err != nil {
		return err
	}
	return s.connect(ttl)
}

// leases are the leases a client holds, by Lease.Value, each with what the
// client keeps of it (H) for its release. The zero value is empty and
// ready; it is safe for concurrent use.
type leases[H any] struct {
	mu sync.Mutex
	m  map[string]H
}

// put keeps h for the lease whose Lease.Value is value.
func (ls *leases[H]) put(value string, h H) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = make(map[string]H)
	}
	ls.m[value] = h
}

// take removes the lease whose Lease.Value is value and returns what was
// kept of it, and whether it was there.
func (ls *leases[H]) take(value string) (H, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	h, ok := ls.m[value]
	delete(ls.m, value)
	return h, ok
}

// sessionFor returns the builder of the sessions of the impl name.
func sessionFor(name string) func(impls.Config) (*session, error) {
	return func(cfg impls.Config) (*session, error) { return newSession(cfg, name) }
}

// newSession checks cfg. The impl parameter session-timeout, a Go
// duration, overrides the ttl as the session timeout.
func newSession(cfg impls.Config, name string) (*session, error) {
	if err := cfg.Check(name); err != nil {
		return nil, err
	}
	s := &session{cfg: cfg, name: name, log: slog.Default().With("impl", name, "process", cfg.Process)}
	s.holding.Tell = cfg.Tell
	if v := cfg.Params["session-timeout"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s: impl param session-timeout=%q is not a positive duration", name, v)
		}
		s.timeout = d
	}
	return s, nil
}

// connect opens the session if it is not open yet. The library connects in
// the background; the first request waits for it.
func (s *session) connect(ttl time.Duration) error {
	if s.conn != nil {
		return nil
	}
	if s.timeout == 0 {
		s.timeout = ttl
	}
	if s.timeout < time.Millisecond {
		return fmt.Errorf("%s: session timeout %v is below ZooKeeper's 1ms resolution", s.name, s.timeout)
	}
	dialer := s.dialer
	if dialer == nil {
		dialer = net.DialTimeout
	}
	conn, _, err := zk.Connect(s.cfg.Addrs, s.timeout, zk.WithLogger(zkLogger{s}), zk.WithEventCallback(s.onEvent), zk.WithDialer(dialer))
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.conn = conn
	return nil
}

// onEvent is the library's event callback: it must not block. It tells
// the holder of every lease held of a session event that puts it in doubt:
// Disconnected (the connection dropped; the session, and the leases with
// it, may be gone, as Curator's SUSPENDED) and Expired (they are gone).
func (s *session) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateDisconnected:
		s.holding.Lost("zk session event Disconnected: the connection to ZooKeeper dropped; the session and its nodes may be gone")
		return
	case zk.StateExpired:
		s.holding.Lost("zk session event Expired: the session expired; ZooKeeper deleted its nodes")
	default:
		return
	}
	s.mu.Lock()
	s.expiries++
	s.expiredAt = s.cfg.Now()
	at := s.expiredAt
	s.mu.Unlock()
	s.log.Warn("zk session expired", "at", at, "server", ev.Server)
}

// sessionTimeout is the negotiated session timeout, or the requested one
// before the server answered.
func (s *session) sessionTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.negotiated > 0 {
		return s.negotiated
	}
	return s.timeout
}

// hold is what a client remembers of a lease it granted: the session it
// was taken in.
type hold struct {
	sessionID int64
	expiries  int
	lost      bool // zk-recipe: a create of this acquire lost its reply
}

// newHold describes the session as it is now.
func (s *session) newHold() hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	return hold{sessionID: s.conn.SessionID(), expiries: s.expiries}
}

// expiredSince returns, if the session h was taken in has expired since,
// an explanation naming when; else "".
func (s *session) expiredSince(h hold, l impls.Lease) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expiries == h.expiries && s.conn.SessionID() == h.sessionID {
		return ""
	}
	when := "before the release"
	if s.expiries > h.expiries {
		when = fmt.Sprintf("at %v (harness clock)", s.expiredAt)
	}
	return fmt.Sprintf("zk session 0x%x expired %s while this client held %s (it believed the lease valid until %v), and ZooKeeper deleted its node",
		h.sessionID, when, l.Lock, l.ValidUntil)
}

// zkLogger routes the library's log to slog and reads the negotiated
// session timeout from its "authenticated" line, which the library prints
// before it sends any request of the new session.
type zkLogger struct{ s *session }

// authFormat is the format of go-zookeeper v1.0.4's line after a session
// was established; its arguments are the session id and timeout in ms.
const authFormat = "authenticated: id=%d, timeout=%d"

func (l zkLogger) Printf(format string, args ...any) {
	if format == authFormat && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			l.s.mu.Lock()
			l.s.negotiated = time.Duration(ms) * time.Millisecond
			l.s.mu.Unlock()
		}
	}
	msg := fmt.Sprintf(format, args...)
	lvl := slog.LevelDebug
	if strings.Contains(msg, "failed") || strings.Contains(msg, "expired") {
		lvl = slog.LevelWarn
	}
	l.s.log.Log(context.Background(), lvl, "zk: "+msg)
}

// connBroken reports whether err says that the connection a request went
// on broke before its reply came: the library's ErrConnectionClosed, or
// the socket's own error on a write to a connection the server had closed
// (EPIPE, ECONNRESET: a session that expired while its client was paused),
// which the library passes on as it is. The library then reconnects, and
// the request can be sent again on the new connection, which also tells
// whether the session lives.
func connBroken(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// call runs f, a blocking library call, until it returns or ctx ends; an
// abandoned call goes on in the background and its result is dropped.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// deleteNode deletes path, whatever its version, under ctx. A node that is
// gone already counts as deleted.
func (s *session) deleteNode(ctx context.Context, path string) error {
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// addOrphan remembers a node to delete at the next operation.
func (s *session) addOrphan(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orphans = append(s.orphans, path)
}

// deleteOrphans tries once more to delete the nodes of abandoned acquires;
// those it cannot delete stay for the next try.
func (s *session) deleteOrphans(ctx context.Context) {
	s.mu.Lock()
	todo := s.orphans
	s.orphans = nil
	s.mu.Unlock()
	for _, p := range todo {
		if err := s.deleteOrphan(ctx, p); err != nil {
			s.addOrphan(p)
		}
	}
}

// deleteOrphan deletes the node path or, if path ends in "*", every child
// of its parent whose name starts with the rest of its last element (the
// node of a create whose reply was lost, known by its GUID).
func (s *session) deleteOrphan(ctx context.Context, path string) error {
	prefix, glob := strings.CutSuffix(path, "*")
	if !glob {
		return s.deleteNode(ctx, path)
	}
	i := strings.LastIndexByte(prefix, '/')
	parent, name := prefix[:i], prefix[i+1:]
	children, err := call(ctx, func() ([]string, error) {
		ch, _, err := s.conn.Children(parent)
		return ch, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if strings.HasPrefix(ch, name) {
			if err := s.deleteNode(ctx, parent+"/"+ch); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensurePath creates path and its ancestors as persistent nodes.
func (s *session) ensurePath(ctx context.Context, path string) error {
	cur := ""
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		cur += "/" + part
		_, err := call(ctx, func() (string, error) { return s.conn.Create(cur, nil, 0, zk.WorldACL(zk.PermAll)) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// checkLockName rejects a lock name that is not a single znode name.
func checkLockName(name, lock string) error {
	if lock == "" || lock == "." || lock == ".." || strings.ContainsAny(lock, "/\x00") || lock == "zookeeper" {
		return fmt.Errorf("%s: lock name %q is not a valid znode name", name, lock)
	}
	return nil
}

// Close ends the session, which deletes its nodes at once.
func (s *session) Close() error {
	if s.conn != nil {
		s.conn.Close()
	}
	return nil
}
