package external

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/runstore"
)

// Serve is the client side of the protocol around the Go impl named impl:
// the reference adapter, which lets a test compare an impl driven through
// the protocol with the same impl run natively. It reads hello and
// requests from in and writes replies to out until in ends. It names
// itself goref-<impl>, and its library as the impl's first
// (impls.Impl.Libraries) at the version this program's build info gives.
// Its leases state their validity with valid_ms (ValidityReported); its
// pause points are the impl's, and it sends a lost notice whenever the
// impl tells its holder that a lease is lost.
func Serve(ctx context.Context, in io.Reader, out io.Writer, impl string) error {
	return serve(ctx, in, out, impl, "goref-"+impl)
}

// ServeAdapter is Serve under the impl's own name: the adapter that serves
// an impl built with other versions of its libraries (impls/golib), which
// a run names as the impl.
func ServeAdapter(ctx context.Context, in io.Reader, out io.Writer, impl string) error {
	return serve(ctx, in, out, impl, impl)
}

// serve is Serve, naming itself name in its hello_ok.
func serve(ctx context.Context, in io.Reader, out io.Writer, impl, name string) error {
	reg, err := impls.Lookup(impl)
	if err != nil {
		return err
	}
	s := &server{enc: json.NewEncoder(out), hello: make(chan Hello, 1), reqs: make(chan Request, 16), gos: make(chan string, 1)}
	go s.read(in)
	h, ok := <-s.hello
	if !ok {
		return errors.New("no hello on input")
	}
	library, version := "locktest/impls", "unknown: the impl names no library"
	if len(reg.Libraries) > 0 {
		library = reg.Libraries[0]
		version = runstore.LibraryVersions(reg.Libraries[:1])[library]
	}
	caps := Caps{Type: TypeHelloOK, Protocol: Version, Name: name, Library: library, Version: version,
		Fenced: reg.Fenced, Expires: true, Validity: ValidityReported, Blocking: reg.Blocking, Points: reg.Points, Notices: reg.Notices, Doc: reg.Doc}
	if err := s.send(caps); err != nil {
		return err
	}
	if h.Probe {
		for range s.reqs { // until the end of input
		}
		return nil
	}
	start := time.Now()
	now := func() time.Duration { return time.Since(start) }
	cfg := impls.Config{Process: h.Process, Now: now, Params: h.Params, Hook: s.pass, Lost: func(lock, value, reason string) {
		_ = s.send(Reply{Type: TypeLost, Lock: lock, Value: value, Reason: reason})
	}}
	for _, n := range h.Nodes {
		cfg.Addrs = append(cfg.Addrs, n.Addr)
		cfg.Nodes = append(cfg.Nodes, impls.Node{Name: n.Name, Addr: n.Addr, Role: n.Role})
	}
	client, err := reg.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	held := map[string]impls.Lease{} // by lock value
	for req := range s.reqs {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if req.DeadlineMs > 0 {
			rctx, cancel = context.WithTimeout(ctx, time.Duration(req.DeadlineMs)*time.Millisecond)
		}
		var r Reply
		switch req.Type {
		case TypeAcquire:
			sent := now()
			l, err := client.Acquire(rctx, req.Lock, time.Duration(req.TTLMs)*time.Millisecond)
			r = outcome(err, impls.ErrNotAcquired)
			if err == nil {
				held[l.Value] = l
				r.Value = l.Value
				if l.HasToken {
					r.Token = &l.Token
				}
				if l.ValidUntil != 0 {
					ms := (l.ValidUntil - sent).Milliseconds()
					r.ValidMs = &ms
				}
			}
		case TypeRelease:
			l, ok := held[req.Value]
			delete(held, req.Value)
			if !ok {
				r = Reply{Type: TypeFail, Error: "no lease with this value"}
				break
			}
			rel, err := client.Release(rctx, l)
			r = outcome(err, impls.ErrNotHeld)
			r.Removed = rel.Removed
		default:
			r = Reply{Type: TypeUnknown, Error: fmt.Sprintf("unknown request %q", req.Type)}
		}
		cancel()
		r.ID = req.ID
		if err := s.send(r); err != nil {
			return err
		}
	}
	return nil
}

// outcome is the reply type of an op's error: ok, fail when it is certain
// (notDone), else unknown.
func outcome(err, notDone error) Reply {
	switch {
	case err == nil:
		return Reply{Type: TypeOK}
	case errors.Is(err, notDone):
		return Reply{Type: TypeFail, Error: err.Error()}
	}
	return Reply{Type: TypeUnknown, Error: err.Error()}
}

// server is Serve's state: the reply encoder and what the reader hands
// on.
type server struct {
	mu    sync.Mutex
	enc   *json.Encoder
	hello chan Hello   // the hello, or closed without one
	reqs  chan Request // acquires and releases, in order
	gos   chan string  // the points of go messages
}

// read parses in: the hello first, then requests; a go goes to pass.
func (s *server) read(in io.Reader) {
	defer close(s.reqs)
	hello := s.hello
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		if first {
			first = false
			var h Hello
			if json.Unmarshal(sc.Bytes(), &h) != nil || h.Type != TypeHello {
				close(hello)
				return
			}
			hello <- h
			continue
		}
		var r Request
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		if r.Type == TypeGo {
			s.gos <- r.Point
			continue
		}
		s.reqs <- r
	}
	if first {
		close(hello)
	}
}

func (s *server) send(v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enc.Encode(v)
}

// pass reports reaching point and waits for the driver's go.
func (s *server) pass(point string) {
	if s.send(Reply{Type: TypePoint, Point: point}) != nil {
		return
	}
	<-s.gos
}
