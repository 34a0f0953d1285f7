package ssh_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/internal/shellquote"
	"github.com/locktest/locktest/testkit/testlab"
)

// TestRemoveRunDirsKillsServersOfUnknownPid: a redis-server started in a
// run's directory whose pid the driver never learnt (a restart whose host
// stopped answering before it replied, as under stress-ng at 94e275f) is
// killed by RemoveRunDirs, by the pid file in that directory, and the
// directory goes; the server of another run's directory on the same host
// is left alone.
func TestRemoveRunDirsKillsServersOfUnknownPid(t *testing.T) {
	inventory := testlab.Shared(t)
	ctx, conns := testlab.Dial(t, inventory)
	h1 := conns[0]
	mine, other := sshp.NewRunID(), sshp.NewRunID()
	start := func(id string, port int) int {
		t.Helper()
		dir := sshp.RunDir(h1.Host, id) + "/n1"
		out, err := h1.Run(ctx, fmt.Sprintf("mkdir -p %[1]s && %[3]s --port %[2]d --daemonize yes --pidfile %[1]s/redis.pid --dir %[1]s --save '' --logfile %[1]s/redis.log && "+
			"i=0; while [ ! -s %[1]s/redis.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; cat %[1]s/redis.pid", shellquote.Quote(dir), port, shellquote.Quote(h1.Host.Binary("redis-server"))))
		pid, aerr := strconv.Atoi(strings.TrimSpace(out))
		if err != nil || aerr != nil {
			t.Fatalf("start a redis-server in %s: %v %q", dir, err, out)
		}
		return pid
	}
	alive := func(pid int) bool {
		t.Helper()
		out, err := h1.Run(ctx, fmt.Sprintf("[ -e /proc/%[1]d ] && [ \"$(awk '{print $3}' /proc/%[1]d/stat)\" != Z ] && echo alive; true", pid))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out) == "alive"
	}
	gone, kept := start(mine, 6391), start(other, 6392)
	t.Cleanup(func() { sshp.RemoveRunDirs(ctx, conns[:1], other) })
	if err := sshp.RemoveRunDirs(ctx, conns[:1], mine); err != nil {
		t.Fatal(err)
	}
	if alive(gone) {
		t.Errorf("the run's redis-server (pid %d) outlived the removal of its directory", gone)
	}
	if !alive(kept) {
		t.Errorf("another run's redis-server (pid %d) was killed", kept)
	}
	if out, _ := h1.Run(ctx, "ls -d "+shellquote.Quote(sshp.RunDir(h1.Host, mine))+" 2>/dev/null; true"); strings.TrimSpace(out) != "" {
		t.Errorf("the run's directory is still there: %s", out)
	}
}
