// Package gate skips a test whose needs this machine does not meet — a
// server program, root, network namespaces, a Docker engine — naming the
// need and how to meet it. Every gate also skips under `go test -short`
// (`make test-unit`): a test that needs anything beyond Go goes through a
// gate, so that the unit tests run anywhere, as any user, with no server
// installed. It imports none of locktest's packages, so that any test may
// use it. The tests' packages and what each needs are in
// docs/testing.md.
package gate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// short skips tb under -short, naming what it needs.
func short(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: this test needs " + what)
	}
}

// Need skips the test unless every one of bins is on PATH, naming the
// first missing one and `make setup`, which installs them.
func Need(tb testing.TB, bins ...string) {
	tb.Helper()
	short(tb, fmt.Sprint("the programs ", bins))
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			tb.Skip(b + " not installed (make setup)")
		}
	}
}

// Servers skips, under -short, a test that starts the servers named by
// what; the test itself then finds out whether they are installed.
func Servers(tb testing.TB, what string) {
	tb.Helper()
	short(tb, "servers: "+what)
}

// Root skips the test unless it runs as root, saying why it needs to.
func Root(tb testing.TB, why string) {
	tb.Helper()
	short(tb, "root: "+why)
	if os.Geteuid() != 0 {
		tb.Skip("needs root: " + why)
	}
}

// Netns skips the test unless this machine can make the network lab of
// the local provider: root, ip, iptables and iptables-restore.
func Netns(tb testing.TB) {
	tb.Helper()
	Root(tb, "network namespaces, veth, iptables")
	Need(tb, "ip", "iptables", "iptables-restore")
}

// Without is the environment variable that turns needs off for one `go
// test`: LOCKTEST_WITHOUT=docker skips every test that needs the Docker
// engine (the docker provider, the images, the ssh lab), as if none
// answered; `make test-local` sets it.
const Without = "LOCKTEST_WITHOUT"

// without reports whether LOCKTEST_WITHOUT names need.
func without(need string) bool {
	for _, n := range strings.Split(os.Getenv(Without), ",") {
		if strings.TrimSpace(n) == need {
			return true
		}
	}
	return false
}

// Docker skips the test unless a Docker engine answers.
func Docker(tb testing.TB) {
	tb.Helper()
	short(tb, "a Docker engine")
	if without("docker") {
		tb.Skip(Without + " names docker: this test needs the Docker engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		tb.Skipf("needs a Docker engine: %v", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		tb.Skipf("needs a Docker engine, none answers at %s: %v", cli.DaemonHost(), err)
	}
}
