package ssh

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/internal/procfs"
	"github.com/locktest/locktest/internal/shellquote"
)

// Leftover is a run directory that a driver left on a host.
type Leftover struct {
	Host  string
	RunID string
	// Owner is the owner file's line: control host, driver pid, start.
	Owner string
}

// ownerAlive reports whether the driver an owner line names still runs
// on this control host. A line of another control host counts as alive:
// only that host can tell.
func ownerAlive(line string) bool {
	f := strings.Fields(line)
	if len(f) < 2 {
		return false
	}
	if host, _ := os.Hostname(); f[0] != host {
		return true
	}
	start := procfs.StartTime(atoi(f[1]))
	if start == "" {
		return false
	}
	return len(f) < 3 || f[2] == start
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// killRunServers is the shell command that kills, on a host, the servers
// of the run whose directory is dir: the pids of its nodes' pid files,
// each checked to be a redis-server, a sentinel (whose command line reads
// "redis-server <addr> [sentinel]", or "redis-sentinel ..." when started
// by that name), locktest's node program or a ZooKeeper peer before the
// signal, and its SQL servers (sqlCleanup). Each is killed as a SQL
// server is (lt_kill: with the processes below it, and waited for until
// it is gone or a zombie, up to 10 s): a kill's signal is handled later
// than the kill returns (an idle suite at 1a9b6ff found a redis-server
// still alive just after it). It needs root.
func killRunServers(dir string) string {
	return sqlCleanup(dir) + fmt.Sprintf("for p in %s/*/redis.pid %s/*/node.pid; do [ -f \"$p\" ] || continue; pid=$(cat \"$p\"); grep -qa -e redis-server -e redis-sentinel -e %s -e %s /proc/$pid/cmdline 2>/dev/null && lt_kill $pid; done; true", shellquote.Quote(dir), shellquote.Quote(dir), nodeProgram, backend.Kinds()[backend.KindZooKeeper].Program)
}

// Cleanup finds, on every host of conns, the run directories whose driver
// is gone (their owner file names this control host and a process that no
// longer runs) and, unless dry, kills the servers they started (by the
// pids in their pid files, each checked to be a redis-server, a sentinel
// (whose command line reads "redis-server <addr> [sentinel]", or
// "redis-sentinel ..." when started by that name), locktest's node program
// or a ZooKeeper peer before the signal), removes the
// run's iptables rules and removes the directory. Runs still going, and
// runs of other control hosts, are left alone. It returns what it found.
func Cleanup(ctx context.Context, conns []*Conn, dry bool) ([]Leftover, error) {
	var out []Leftover
	var errs []error
	for _, c := range conns {
		list, err := c.Run(ctx, fmt.Sprintf("for f in %s/locktest-*/owner; do [ -f \"$f\" ] && echo \"$f $(cat \"$f\")\"; done; true", shellquote.Quote(c.Host.Workdir)))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(list), "\n") {
			file, owner, ok := strings.Cut(l, " ")
			if !ok || ownerAlive(owner) {
				continue
			}
			dir := path.Dir(file)
			id := strings.TrimPrefix(path.Base(dir), "locktest-")
			out = append(out, Leftover{Host: c.Host.Name, RunID: id, Owner: owner})
			if dry {
				continue
			}
			if _, err := c.Root(ctx, killRunServers(dir)); err != nil {
				errs = append(errs, err)
			}
			if err := RemoveRules(ctx, []*Conn{c}, id); err != nil {
				errs = append(errs, err)
			}
			if _, err := c.Run(ctx, "rm -rf "+shellquote.Quote(dir)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return out, errors.Join(errs...)
}
