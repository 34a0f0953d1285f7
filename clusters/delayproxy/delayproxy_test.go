package delayproxy

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestProxyDelaysOnlyTheChosenNode passes an echo through the delaying
// proxy and checks that a round trip through the delayed node takes at
// least the delay (twice: one chunk each way), and that healing removes it.
func TestProxyDelaysOnlyTheChosenNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c)
		}
	}()
	p := New()
	defer p.Close()
	a, err := p.Add("n1", "127.0.0.1", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Add("n2", "127.0.0.1", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	roundTrip := func(addr string) time.Duration {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo through the proxy: %q %v", buf, err)
		}
		return time.Since(start)
	}
	const d = 150 * time.Millisecond
	if err := p.Delay(context.Background(), []string{"n1"}, d); err != nil {
		t.Fatal(err)
	}
	if rt := roundTrip(a); rt < 2*d {
		t.Errorf("round trip through the delayed node took %v, want at least %v", rt, 2*d)
	}
	// The other node is not delayed: its round trip is faster than the
	// delayed one (no upper bound in absolute time, which load would break).
	if rt, rd := roundTrip(b), roundTrip(a); rt >= rd {
		t.Errorf("round trip through the undelayed node took %v, through the delayed one %v", rt, rd)
	}
	if err := p.Delay(context.Background(), []string{"n9"}, d); err == nil {
		t.Error("delaying an unknown node succeeded")
	}
	if err := p.Delay(context.Background(), nil, 0); err != nil {
		t.Fatal(err)
	}
	p.Delay(context.Background(), []string{"n2"}, d)
	if rt, rd := roundTrip(a), roundTrip(b); rt >= rd {
		t.Errorf("after the heal of n1, its round trip took %v, the delayed n2's %v", rt, rd)
	}
}
