package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/locktest/locktest/impls"
)

// Client is one worker's client program, driven through the protocol. It
// implements impls.Client. It is not safe for concurrent use.
type Client struct {
	p    *program
	cfg  impls.Config
	caps Caps
	next int64 // the id of the next request
	// late are the acquires that got no answer before their deadline, by
	// id; a late ok to one of them is given back (giveBack) before the
	// next request, since the worker gave up on it.
	late     map[int64]string
	giveBack []Request
}

var _ impls.Client = (*Client)(nil)

// Run is what a worker tells its program in hello besides the nodes.
type Run struct {
	Locks    []string
	TTL      time.Duration
	Deadline time.Duration
}

// New starts spec's program in the caller's process group, says hello with
// cfg's nodes and process and with run, and returns the client once the
// program answered. The lost notices the program prints go to cfg.Lost as
// they come. The program's stderr goes to stderr. New fails, in one
// line, when the program cannot start, exits or stays silent at start, or
// does not answer hello as this protocol says.
func New(ctx context.Context, spec Spec, cfg impls.Config, run Run, stderr io.Writer) (*Client, error) {
	if cfg.Now == nil {
		return nil, errors.New("external: Config.Now is required (the harness clock for ValidUntil)")
	}
	p, err := start(spec, stderr, false, func(r Reply) {
		reason := r.Reason
		if reason == "" {
			reason = "the client said the lease is lost"
		}
		cfg.Tell(r.Lock, r.Value, reason)
	})
	if err != nil {
		return nil, err
	}
	h := Hello{Process: cfg.Process, Backend: spec.Backend, Locks: run.Locks, Params: spec.Params,
		TTLMs: run.TTL.Milliseconds(), DeadlineMs: run.Deadline.Milliseconds()}
	for _, n := range cfg.Nodes {
		h.Nodes = append(h.Nodes, Node{Name: n.Name, Addr: n.Addr, Role: n.Role})
	}
	if len(h.Nodes) == 0 {
		for i, a := range cfg.Addrs {
			h.Nodes = append(h.Nodes, Node{Name: fmt.Sprintf("n%d", i+1), Addr: a})
		}
	}
	caps, err := p.hello(ctx, h)
	if err != nil {
		p.stop(time.Second, false)
		return nil, fmt.Errorf("client program %s: %w", spec.Command[0], err)
	}
	return &Client{p: p, cfg: cfg, caps: caps}, nil
}

// Caps returns what the program said of itself in hello_ok.
func (c *Client) Caps() Caps { return c.caps }

// Acquire asks the program for lock. An ok reply is a lease: its token
// only when the program said it is fenced, and, when its leases expire,
// valid from when the request was sent for valid_ms, or without it for
// the ttl (validity "ttl") or for ever (validity "valid_ms").
func (c *Client) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	sent := c.cfg.Now()
	r, err := c.do(ctx, Request{Type: TypeAcquire, Lock: lock, TTLMs: ttl.Milliseconds()})
	if err != nil {
		return impls.Lease{}, err
	}
	switch r.Type {
	case TypeOK:
		l := impls.Lease{Lock: lock, Value: r.Value}
		if c.caps.Fenced && r.Token != nil {
			l.Token, l.HasToken = *r.Token, true
		}
		switch {
		case !c.caps.Expires:
		case r.ValidMs != nil:
			l.ValidUntil = max(sent+time.Duration(*r.ValidMs)*time.Millisecond, 1) // 0 would mean a lease that never ends
		case c.caps.Validity != ValidityReported:
			l.ValidUntil = sent + ttl
		}
		return l, nil
	case TypeFail:
		return impls.Lease{}, fmt.Errorf("%w: %s", impls.ErrNotAcquired, r.Error)
	case TypeUnknown:
		return impls.Lease{}, fmt.Errorf("the client does not know whether it got the lock: %s", r.Error)
	}
	return impls.Lease{}, fmt.Errorf("the client answered acquire with %q", r.Type)
}

// Release asks the program to release l.
func (c *Client) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	req := Request{Type: TypeRelease, Lock: l.Lock, Value: l.Value}
	if l.HasToken {
		req.Token = &l.Token
	}
	r, err := c.do(ctx, req)
	if err != nil {
		return impls.Released{}, err
	}
	switch r.Type {
	case TypeOK:
		return impls.Released{Removed: r.Removed}, nil
	case TypeFail:
		return impls.Released{}, fmt.Errorf("%w: %s", impls.ErrNotHeld, r.Error)
	case TypeUnknown:
		return impls.Released{}, fmt.Errorf("the client does not know whether it released the lock: %s", r.Error)
	}
	return impls.Released{}, fmt.Errorf("the client answered release with %q", r.Type)
}

// Close stops the program: end of input, a second to exit, then SIGKILL.
func (c *Client) Close() error {
	c.p.stop(time.Second, false)
	return nil
}

// do sends req with a fresh id and the time left before ctx's deadline,
// and returns the program's reply to it. On the way it lets the program
// go on from each pause point it reports, once Config.Pass has returned,
// and skips late replies to earlier requests. An acquire that was granted
// after its deadline, which the history records as of unknown outcome, is
// released before the next request, and that release is not recorded. Its error, which leaves the
// op's outcome unknown, says what went wrong: the deadline passed, the
// program printed garbage or answered another request, or it exited
// (impls.ErrDead).
func (c *Client) do(ctx context.Context, req Request) (Reply, error) {
	c.drainLate()
	for _, g := range c.giveBack {
		c.next++
		g.ID = c.next
		if err := c.p.send(g); err != nil {
			break
		}
	}
	c.giveBack = nil
	c.next++
	req.ID = c.next
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineMs = max(time.Until(dl).Milliseconds(), 1)
	}
	if err := c.p.send(req); err != nil {
		select {
		case <-c.p.exited:
			return Reply{}, c.p.died()
		case <-time.After(100 * time.Millisecond):
			return Reply{}, fmt.Errorf("write to the client program: %w", err)
		}
	}
	for {
		line, err := c.p.next(ctx)
		if err != nil {
			if errors.Is(err, impls.ErrDead) {
				return Reply{}, err
			}
			if req.Type == TypeAcquire {
				if c.late == nil {
					c.late = map[int64]string{}
				}
				c.late[req.ID] = req.Lock
			}
			return Reply{}, fmt.Errorf("the client program did not answer %s %d before the deadline", req.Type, req.ID)
		}
		var r Reply
		if err := json.Unmarshal(line, &r); err != nil || r.Type == "" {
			return Reply{}, fmt.Errorf("the client program printed garbage: %q", truncate(line))
		}
		if r.Type == TypePoint {
			if !slices.Contains(c.caps.Points, r.Point) {
				return Reply{}, fmt.Errorf("the client program reported pause point %q, which it did not announce", r.Point)
			}
			c.cfg.Pass(r.Point)
			if err := c.p.send(Request{Type: TypeGo, Point: r.Point}); err != nil {
				return Reply{}, c.p.died()
			}
			continue
		}
		if r.ID < req.ID && r.ID > 0 {
			c.lateReply(r)
			continue
		}
		if r.ID != req.ID {
			return Reply{}, fmt.Errorf("the client program answered request %d while %s %d waited", r.ID, req.Type, req.ID)
		}
		if ctx.Err() != nil {
			return Reply{}, fmt.Errorf("the client program answered %s %d after the deadline", req.Type, req.ID)
		}
		return r, nil
	}
}

// lateReply handles a late answer to a request that already timed out, or
// the answer to a give-back: a lock granted too late is to be given back,
// since nobody would ever release it.
func (c *Client) lateReply(r Reply) {
	lock, ok := c.late[r.ID]
	if !ok {
		return
	}
	delete(c.late, r.ID)
	if r.Type == TypeOK {
		c.giveBack = append(c.giveBack, Request{Type: TypeRelease, Lock: lock, Value: r.Value, Token: r.Token})
	}
}

// drainLate reads what the program printed while no request was in
// flight: late answers, which lateReply handles, and anything else, which
// answers nothing and is dropped.
func (c *Client) drainLate() {
	for {
		select {
		case line := <-c.p.lines:
			var r Reply
			if json.Unmarshal(line, &r) == nil {
				c.lateReply(r)
			}
		default:
			return
		}
	}
}
