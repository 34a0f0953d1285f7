package ssh_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/testkit/testlab"
)

// TestConnNoticesALostHost connects to the lab's hosts and takes two of
// them away mid-connection: h2's every sshd killed (the host closes the
// connection) and h3's SSH port dropped by iptables on h3 itself (its
// network cut: the connection goes silent). Each connection must then say,
// in one line naming its host, that it was lost, and a command on it must
// fail with that line without waiting; the other hosts' connections hold.
// h2, whose sshd survives, can be reconnected to for what is left to do. The
// lab's containers, and what the test did in them, go with the lab: a
// lab of its own, not the one the package's other tests share. It mostly
// waits for the loss, in parallel with TestEveryBackendRunsOnSSH, the one
// other parallel test of the package.
func TestConnNoticesALostHost(t *testing.T) {
	t.Parallel()
	inventory := testlab.Up(t)
	ctx, conns := testlab.Dial(t, inventory)
	h1, h2, h3 := conns[0], conns[1], conns[2]
	for _, c := range conns {
		c.MarkKeepalives()
	}
	// The command's own session dies with the sshd that serves it, so
	// its error is expected; the loss is what is checked.
	h2.Run(ctx, "for f in /proc/[0-9]*/cmdline; do grep -qa -e '^sshd' -e '^/usr/sbin/sshd' $f 2>/dev/null && p=${f#/proc/} && kill -KILL ${p%/cmdline}; done")
	if _, err := h3.Run(ctx, "iptables -w -I INPUT -p tcp --dport 22 -m comment --comment locktest-test-cut -j DROP"); err != nil {
		t.Fatal(err)
	}
	// A keepalive unanswered for LostAfter (15 s) is a loss: wait for it
	// with room for a loaded machine.
	deadline := time.Now().Add(sshp.LostAfter + 45*time.Second)
	for time.Now().Before(deadline) && (h2.Lost() == nil || h3.Lost() == nil) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, tc := range []struct {
		c    *sshp.Conn
		want string
	}{{h2, "ssh h2: the host closed the connection mid-run"}, {h3, "ssh h3: the host answered no keepalive for 15s"}} {
		err := tc.c.Lost()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s lost: %v, want one line starting %q", tc.c.Host.Name, err, tc.want)
			continue
		}
		if _, rerr := tc.c.Run(context.Background(), "true"); rerr == nil || rerr.Error() != err.Error() {
			t.Errorf("a command on %s after the loss: %v, want %v", tc.c.Host.Name, rerr, err)
		}
	}
	// The keepalives' round trips: h3's unanswered one counts as
	// LostAfter; h1, which still answers, answered each in less.
	if d, _ := h3.SlowestKeepalive(); d < sshp.LostAfter {
		t.Errorf("h3's slowest keepalive %v, want the %v it went unanswered", d, sshp.LostAfter)
	}
	if d, at := h1.SlowestKeepalive(); d <= 0 || d >= sshp.LostAfter || at.IsZero() {
		t.Errorf("h1's slowest keepalive %v at %v, want an answered one", d, at)
	}
	// h2's sshd, the container's pid 1, outlives the kill: Reconnect dials
	// it again, and commands run there once more, while the loss stays
	// recorded for the run that suffered it.
	lost := h2.Lost()
	if err := h2.Reconnect(ctx); err != nil {
		t.Errorf("reconnect to h2: %v", err)
	} else if _, err := h2.Run(ctx, "true"); err != nil {
		t.Errorf("a command on h2 after its reconnect: %v", err)
	}
	if h2.Lost() == nil || h2.Lost().Error() != lost.Error() {
		t.Errorf("after the reconnect h2 says lost %v, want the loss kept: %v", h2.Lost(), lost)
	}
	for _, c := range []*sshp.Conn{conns[0], conns[3], conns[4]} {
		if err := c.Lost(); err != nil {
			t.Errorf("%s: %v, but its host was left alone", c.Host.Name, err)
		}
		if _, err := c.Run(ctx, "true"); err != nil {
			t.Errorf("%s: %v", c.Host.Name, err)
		}
	}
}
