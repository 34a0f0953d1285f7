// Package delayproxy is a delaying TCP proxy, one listener per node, that
// makes the delay fault where a provider's hosts have no tc netem. It
// serves every provider: it runs beside the workers, on the control host.
package delayproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a delaying TCP proxy, one listener per node, for kernels without
// netem: clients dial the proxy's address for a node instead of the node,
// and every chunk of bytes, in either direction, is held for the node's
// current delay before it is passed on (order is kept). With no delay set it
// adds only a copy. Connections are not cut by the proxy: partitions stay
// the business of iptables.
type Proxy struct {
	mu     sync.Mutex
	nodes  map[string]*proxied
	closed bool
	wg     sync.WaitGroup
}

type proxied struct {
	target string
	ln     net.Listener
	delay  atomic.Int64
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// New returns a proxy with no listeners.
func New() *Proxy { return &Proxy{nodes: map[string]*proxied{}} }

// Add listens on listenIP (a free port) for node, forwarding to target, and
// returns the address clients should dial instead of target.
func (p *Proxy) Add(node, listenIP, target string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(listenIP, "0"))
	if err != nil {
		return "", fmt.Errorf("delay proxy for %s: %w", node, err)
	}
	n := &proxied{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		ln.Close()
		return "", errors.New("delay proxy closed")
	}
	p.nodes[node] = n
	p.wg.Add(1)
	go p.serve(n)
	return ln.Addr().String(), nil
}

// Delay sets the delay of the named nodes to d and every other node's to 0.
func (p *Proxy) Delay(ctx context.Context, nodes []string, d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range nodes {
		if _, ok := p.nodes[n]; !ok {
			return fmt.Errorf("delay proxy: no node %s", n)
		}
	}
	for name, n := range p.nodes {
		v := time.Duration(0)
		for _, x := range nodes {
			if x == name {
				v = d
			}
		}
		n.delay.Store(int64(v))
	}
	return nil
}

// Mechanism names the proxy for the history.
func (p *Proxy) Mechanism() string { return "proxy" }

// Close stops every listener and connection and waits for the copiers.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for _, n := range p.nodes {
		n.ln.Close()
		n.mu.Lock()
		for c := range n.conns {
			c.Close()
		}
		n.mu.Unlock()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) serve(n *proxied) {
	defer p.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			n.pipe(c)
		}()
	}
}

func (n *proxied) track(c net.Conn, add bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if add {
		n.conns[c] = struct{}{}
	} else {
		delete(n.conns, c)
	}
}

func (n *proxied) pipe(client net.Conn) {
	n.track(client, true) // so Close can cut it while the dial is under way
	server, err := net.DialTimeout("tcp", n.target, 5*time.Second)
	if err != nil {
		client.Close()
		n.track(client, false)
		return
	}
	n.track(server, true)
	defer func() {
		client.Close()
		server.Close()
		n.track(client, false)
		n.track(server, false)
	}()
	done := make(chan struct{}, 2)
	go func() { n.copy(server, client); done <- struct{}{} }()
	go func() { n.copy(client, server); done <- struct{}{} }()
	<-done
}

// copy moves bytes from src to dst, holding each chunk until its delay (as
// set when it arrived) has passed.
func (n *proxied) copy(dst, src net.Conn) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		buf := make([]byte, 32*1024)
		for {
			k, err := src.Read(buf)
			if k > 0 {
				q <- chunk{b: append([]byte(nil), buf[:k]...), due: time.Now().Add(time.Duration(n.delay.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		if w := time.Until(c.due); w > 0 {
			time.Sleep(w)
		}
		if _, err := dst.Write(c.b); err != nil {
			// Drain so the reader is not blocked forever, then give up.
			go func() {
				for range q {
				}
			}()
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_, _ = io.Copy(io.Discard, src)
	}
}
