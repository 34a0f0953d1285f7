// Package ssh is the cluster provider that runs the nodes of a lock service
// on hosts it reaches over SSH, the way Jepsen's control node does: it
// starts the servers the hosts have in a per-run directory, applies every
// fault on the hosts (signals by pid, iptables rules with the run's
// comment), and collects the logs at the end. The clients stay on the
// control host, so the history's times share one clock.
//
// Everything a run leaves on a host lives in <workdir>/<run id>, with the
// driver's pid and start time in its owner file, and every iptables rule
// carries the comment locktest:<run id>: Cleanup finds a killed driver's
// leftovers by them and removes nothing else.
package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/locktest/locktest/internal/shellquote"
)

// Conn is an SSH connection to one host of the inventory. Its methods are
// safe for concurrent use: each command runs in a session of its own.
type Conn struct {
	Host Host
	// Sudo says whether commands that need root run under sudo -n.
	Sudo bool
	cli  *xssh.Client
	rtt  time.Duration
	mu   sync.Mutex
	// lost says why the connection was lost (nil while it holds); closed
	// is set by Close, whose end of the connection is no loss.
	lost   error
	closed bool
	done   chan struct{}
	// redial connects to the host anew (Reconnect); revived says that it
	// did after the loss, so that commands run again, on the new
	// connection, while the loss stays recorded.
	redial  func(context.Context) (*xssh.Client, error)
	revived bool
	// The keepalives' round trips since MarkKeepalives: the slowest and
	// when it was sent, and when the one still unanswered was sent (zero
	// when none is).
	slowest   time.Duration
	slowestAt time.Time
	pending   time.Time
}

// The watch of a connection: a keepalive every KeepaliveEvery, and the
// connection counts as lost when one is not answered within LostAfter. A
// host stalled by a loaded machine answers late, not never, so LostAfter
// is generous.
var (
	KeepaliveEvery = time.Second
	LostAfter      = 15 * time.Second
)

// dialTimeout bounds the TCP connect and SSH handshake to one host.
const dialTimeout = 10 * time.Second

// Dial connects to every host of inv at once, checking host keys against
// the known_hosts file unless inv.InsecureIgnoreHostKey. On an error the
// connections made are closed and the error names the host.
func Dial(ctx context.Context, inv *Inventory) ([]*Conn, error) {
	hostKey, err := hostKeyCallback(inv)
	if err != nil {
		return nil, err
	}
	conns := make([]*Conn, len(inv.Hosts))
	errs := make([]error, len(inv.Hosts))
	var wg sync.WaitGroup
	for i, h := range inv.Hosts {
		wg.Go(func() {
			c, err := dialHost(ctx, inv, h, hostKey)
			conns[i], errs[i] = c, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		CloseAll(conns)
		for _, e := range errs {
			if e != nil {
				return nil, e
			}
		}
	}
	return conns, nil
}

// CloseAll closes every connection of conns that is not nil.
func CloseAll(conns []*Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// hostKeyCallback checks host keys against inv's known_hosts file.
func hostKeyCallback(inv *Inventory) (xssh.HostKeyCallback, error) {
	if inv.InsecureIgnoreHostKey {
		return xssh.InsecureIgnoreHostKey(), nil
	}
	path := inv.KnownHosts
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("ssh: no known_hosts file: %v (name one with known_hosts: in the inventory, or --insecure-ignore-host-key)", err)
		}
		path = filepath.Join(home, ".ssh", "known_hosts")
	} else if strings.HasPrefix(path, "~/") {
		home, _ := os.UserHomeDir()
		path = filepath.Join(home, path[2:])
	}
	cb, err := knownhosts.New(path)
	if err != nil {
		return nil, fmt.Errorf("ssh: known_hosts %s: %v (name another with known_hosts: in the inventory, or skip the check with --insecure-ignore-host-key)", path, errors.Unwrap(err))
	}
	return cb, nil
}

// auth returns how to log in on h: its key file or the ssh-agent.
func auth(h Host) ([]xssh.AuthMethod, func(), error) {
	if h.Key != "" {
		p := h.Key
		if strings.HasPrefix(p, "~/") {
			home, _ := os.UserHomeDir()
			p = filepath.Join(home, p[2:])
		}
		pem, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("ssh %s: key: %v", h.Name, err)
		}
		signer, err := xssh.ParsePrivateKey(pem)
		if err != nil {
			return nil, nil, fmt.Errorf("ssh %s: key %s: %v", h.Name, p, err)
		}
		return []xssh.AuthMethod{xssh.PublicKeys(signer)}, func() {}, nil
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil, fmt.Errorf("ssh %s: no key and no ssh-agent (SSH_AUTH_SOCK is not set): name a key in the inventory", h.Name)
	}
	ac, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh %s: ssh-agent: %v", h.Name, err)
	}
	return []xssh.AuthMethod{xssh.PublicKeysCallback(agent.NewClient(ac).Signers)}, func() { ac.Close() }, nil
}

func dialHost(ctx context.Context, inv *Inventory, h Host, hostKey xssh.HostKeyCallback) (*Conn, error) {
	redial := func(ctx context.Context) (*xssh.Client, error) { return connect(ctx, inv, h, hostKey) }
	cli, err := redial(ctx)
	if err != nil {
		return nil, err
	}
	c := &Conn{Host: h, Sudo: inv.SudoOf(h), cli: cli, done: make(chan struct{}), redial: redial}
	if _, err := c.MeasureRTT(ctx); err != nil {
		c.Close()
		return nil, err
	}
	go c.watch()
	return c, nil
}

// connect authenticates to h and runs the SSH handshake. A connect or
// handshake that times out is tried again, up to dialAttempts in all: a
// loaded host (or control host) may leave one unanswered for seconds. A
// refusal, a bad key or an unknown host key is final at once.
func connect(ctx context.Context, inv *Inventory, h Host, hostKey xssh.HostKeyCallback) (*xssh.Client, error) {
	methods, done, err := auth(h)
	if err != nil {
		return nil, err
	}
	defer done()
	cfg := &xssh.ClientConfig{User: inv.UserOf(h), Auth: methods, HostKeyCallback: hostKey, Timeout: dialTimeout}
	var cli *xssh.Client
	for attempt := 1; ; attempt++ {
		cli, err = handshake(ctx, h, cfg)
		var ne net.Error
		if err == nil || attempt == dialAttempts || ctx.Err() != nil || !errors.As(err, &ne) || !ne.Timeout() {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ssh %s (%s): %v", h.Name, h.Addr(), oneLine(err))
	}
	return cli, nil
}

// Reconnect dials the host again if its connection was lost mid-run (a
// host that stopped answering keepalives on a loaded machine is often
// back seconds later), so that what the run made there can still be
// stopped and removed. The loss stays recorded (Lost): the run that lost
// the host is not valid all the same. On a connection that holds, or was
// closed, it does nothing.
func (c *Conn) Reconnect(ctx context.Context) error {
	c.mu.Lock()
	lost, closed, revived := c.lost, c.closed, c.revived
	c.mu.Unlock()
	if lost == nil || closed || revived || c.redial == nil {
		return nil
	}
	cli, err := c.redial(ctx)
	if err != nil {
		return fmt.Errorf("reconnect after the loss: %w", err)
	}
	c.mu.Lock()
	old := c.cli
	c.cli, c.revived = cli, true
	c.mu.Unlock()
	old.Close()
	return nil
}

// client returns the connection's SSH client: the one of its dial, or of
// its Reconnect.
func (c *Conn) client() *xssh.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cli
}

// dialAttempts is how many times a connection that timed out is tried.
const dialAttempts = 3

// handshake connects to h and runs the SSH handshake, each bounded by
// dialTimeout.
func handshake(ctx context.Context, h Host, cfg *xssh.ClientConfig) (*xssh.Client, error) {
	d := net.Dialer{Timeout: dialTimeout}
	tc, err := d.DialContext(ctx, "tcp", h.Addr())
	if err != nil {
		return nil, err
	}
	tc.SetDeadline(time.Now().Add(dialTimeout))
	cc, chans, reqs, err := xssh.NewClientConn(tc, h.Addr(), cfg)
	if err != nil {
		tc.Close()
		return nil, err
	}
	tc.SetDeadline(time.Time{})
	return xssh.NewClient(cc, chans, reqs), nil
}

// watch notices the loss of the connection: the host closing it (its sshd
// killed, the host rebooted) or a keepalive not answered within LostAfter
// (its network cut). Then it records why, and closes the connection so
// that every command under way fails at once.
func (c *Conn) watch() {
	closedBy := make(chan error, 1)
	go func() { closedBy <- c.cli.Wait() }()
	tick := time.NewTicker(KeepaliveEvery)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case err := <-closedBy:
			c.setLost(fmt.Errorf("ssh %s: the host closed the connection mid-run (%v)", c.Host.Name, err))
			return
		case <-tick.C:
		}
		answered := make(chan error, 1)
		sent := time.Now()
		c.mu.Lock()
		c.pending = sent
		c.mu.Unlock()
		go func() {
			_, _, err := c.cli.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		select {
		case <-c.done:
			return
		case err := <-answered:
			c.answered(sent, time.Since(sent))
			if err != nil {
				c.setLost(fmt.Errorf("ssh %s: the connection failed mid-run (%v)", c.Host.Name, err))
				return
			}
		case <-time.After(LostAfter):
			c.answered(sent, LostAfter)
			c.setLost(fmt.Errorf("ssh %s: the host answered no keepalive for %v mid-run (its network or sshd is gone)", c.Host.Name, LostAfter))
			return
		}
	}
}

// answered records the round trip d of the keepalive sent at sent.
func (c *Conn) answered(sent time.Time, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = time.Time{}
	if d > c.slowest {
		c.slowest, c.slowestAt = d, sent
	}
}

// MarkKeepalives starts a new measure of the keepalives' round trips
// (SlowestKeepalive), as a run's workload begins.
func (c *Conn) MarkKeepalives() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slowest, c.slowestAt = 0, time.Time{}
}

// SlowestKeepalive returns the slowest round trip of a keepalive since
// MarkKeepalives (or Dial), and when it was sent: how long the host's sshd
// went without answering, which a host starved of CPU or stalled by the
// machine shows while the driver's own timer may not. A keepalive still
// unanswered counts for the time it has waited; one never answered before
// the loss counts as LostAfter. It is 0 before a keepalive was answered.
func (c *Conn) SlowestKeepalive() (time.Duration, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, at := c.slowest, c.slowestAt
	if !c.pending.IsZero() && c.lost == nil {
		if w := time.Since(c.pending); w > d {
			d, at = w, c.pending
		}
	}
	return d, at
}

// setLost records why the connection was lost, unless Close ended it,
// and closes it.
func (c *Conn) setLost(err error) {
	c.mu.Lock()
	if !c.closed && c.lost == nil {
		c.lost = err
	}
	c.mu.Unlock()
	c.cli.Close()
}

// isRevived says whether Reconnect dialed the host again after a loss.
func (c *Conn) isRevived() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.revived
}

// Lost says why the connection to the host was lost after Dial (the host
// closed it, or stopped answering keepalives), or nil while it holds or
// after Close.
func (c *Conn) Lost() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// MeasureRTT times an SSH keepalive request and its reply, the round trip
// a fault's command takes at least, and keeps the smallest of three.
func (c *Conn) MeasureRTT(ctx context.Context) (time.Duration, error) {
	best := time.Duration(0)
	for range 3 {
		t0 := time.Now()
		if _, _, err := c.cli.SendRequest("keepalive@openssh.com", true, nil); err != nil {
			return 0, fmt.Errorf("ssh %s: %v", c.Host.Name, err)
		}
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	c.mu.Lock()
	c.rtt = best
	c.mu.Unlock()
	return best, nil
}

// RTT returns the round-trip time the last MeasureRTT found.
func (c *Conn) RTT() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rtt
}

// LocalIP returns the control host's address on the connection, the
// address the host sees the clients come from.
func (c *Conn) LocalIP() string {
	host, _, _ := net.SplitHostPort(c.client().LocalAddr().String())
	return host
}

// RemoteIP returns the host's address on the connection, the one the
// clients on the control host dial it at.
func (c *Conn) RemoteIP() string {
	host, _, _ := net.SplitHostPort(c.client().RemoteAddr().String())
	return host
}

// Close closes the connection and ends its watch.
func (c *Conn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.done != nil {
			close(c.done)
		}
	}
	cli := c.cli
	c.mu.Unlock()
	return cli.Close()
}

// Run runs the shell command cmd on the host and returns its standard
// output. A failed command's error holds its exit status and the first
// line of its standard error. When ctx ends first the session is closed.
func (c *Conn) Run(ctx context.Context, cmd string) (string, error) {
	return c.run(ctx, cmd, nil)
}

// RunInput is Run with stdin as the command's standard input.
func (c *Conn) RunInput(ctx context.Context, cmd string, stdin []byte) (string, error) {
	return c.run(ctx, cmd, bytes.NewReader(stdin))
}

// Root runs cmd as root: under sudo -n when the host's inventory says so.
func (c *Conn) Root(ctx context.Context, cmd string) (string, error) {
	if c.Sudo {
		cmd = "sudo -n sh -c " + shellquote.Quote(cmd)
	}
	return c.run(ctx, cmd, nil)
}

func (c *Conn) run(ctx context.Context, cmd string, stdin io.Reader) (string, error) {
	c.mu.Lock()
	lost := c.lost
	if c.revived {
		lost = nil
	}
	c.mu.Unlock()
	if lost != nil {
		return "", lost
	}
	s, err := c.client().NewSession()
	if err != nil {
		if lost := c.Lost(); lost != nil && !c.isRevived() {
			return "", lost
		}
		return "", fmt.Errorf("ssh %s: %v", c.Host.Name, err)
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	if stdin != nil {
		s.Stdin = stdin
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Close()
		return out.String(), fmt.Errorf("ssh %s: %w", c.Host.Name, ctx.Err())
	}
	if err != nil {
		if lost := c.Lost(); lost != nil {
			return out.String(), lost
		}
		msg := strings.TrimSpace(errb.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg != "" {
			return out.String(), fmt.Errorf("ssh %s: %s: %v: %s", c.Host.Name, short(cmd), err, msg)
		}
		return out.String(), fmt.Errorf("ssh %s: %s: %v", c.Host.Name, short(cmd), err)
	}
	return out.String(), nil
}

// short cuts a command for an error message.
func short(cmd string) string {
	cmd = strings.Join(strings.Fields(cmd), " ")
	if len(cmd) > 80 {
		return cmd[:77] + "..."
	}
	return cmd
}

func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
