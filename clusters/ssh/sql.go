package ssh

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/internal/shellquote"
)

// The server programs of the one-node SQL servers, which a node's pid is
// checked against before a signal, and a cleanup's kill.
var (
	mariadbProgram  = backend.Kinds()[backend.KindMariaDB].Program
	postgresProgram = backend.Kinds()[backend.KindPostgres].Program
)

// sqlProbeTimeout bounds the look-up of a host's SQL programs;
// sqlInitTimeout the kill of a server whose start failed, which runs on
// when the run is interrupted.
const (
	sqlProbeTimeout = 30 * time.Second
	sqlInitTimeout  = 2 * time.Minute
)

// isSQL reports whether n runs a one-node SQL server (MariaDB or
// PostgreSQL): a server whose kind asks it for its data directory.
func (n *node) isSQL() bool { return kindOf(n).DataDirQuery != nil }

// sqlDataDir is n's data directory, which the server's command line names:
// a pid is taken for n's server only if its command line holds it.
func (n *node) sqlDataDir() string { return path.Join(n.dir, "data") }

// sqlShell defines the shell functions of the SQL nodes' commands on a
// host, in POSIX sh (read, set and parameter expansion; awk, grep, sed,
// sleep and ipcrm besides):
//
//   - lt_state PID sets st to the process's state letter (R, S, T, Z…),
//     and fails when it is gone;
//   - lt_alive PID succeeds while it exists and is no zombie;
//   - lt_tree PID prints the pids below PID in the process tree, parents
//     first (PostgreSQL's backends make themselves session leaders, so its
//     process group does not hold them);
//   - lt_is PID PROGRAM DATADIR succeeds when PID's command line holds the
//     program's name and the node's data directory;
//   - lt_stop and lt_cont PID pause and resume the server and every
//     process below it (the server first, so it starts no process
//     meanwhile; on resume last), lt_stop waiting until each is stopped;
//   - lt_kill PID freezes the server, SIGKILLs every process below it,
//     its process group and itself, waits until each is gone, and then
//     removes the System V shared memory segments the server created that
//     no process is attached to any more: a killed PostgreSQL leaves one,
//     which only a clean shutdown removes (found by its creator's pid, not
//     by postmaster.pid, which names it only a moment after its
//     creation). It removes them as their owner: root in a container may
//     lack the capability to remove another user's.
const sqlShell = `rp=') '
lt_state() { st=; { read -r l < /proc/$1/stat; } 2>/dev/null || return 1; set -- ${l##*"$rp"}; st=$1; }
lt_alive() { lt_state $1 && [ "$st" != Z ]; }
lt_tree() {
	for f in /proc/[0-9]*/stat; do { read -r l < $f; } 2>/dev/null || continue; p=${f#/proc/}; set -- ${l##*"$rp"}; echo "${p%/stat} $2"; done |
		awk -v root="$1" '{kids[$2] = kids[$2] " " $1}
			END {n = split(kids[root], q, " "); for (i = 1; i <= n; i++) {print q[i]; m = split(kids[q[i]], more, " "); for (j = 1; j <= m; j++) q[++n] = more[j]}}'
}
lt_is() { grep -qa -e "$2" /proc/$1/cmdline 2>/dev/null && grep -qaF -e "$3" /proc/$1/cmdline 2>/dev/null; }
lt_stop() {
	kill -STOP $1 || return 1
	kids=$(lt_tree $1); [ -z "$kids" ] || kill -STOP $kids 2>/dev/null
	for p in $1 $kids; do i=0; while lt_alive $p && [ "$st" != T ] && [ $i -lt 100 ]; do sleep 0.02; i=$((i+1)); done; done
	true
}
lt_cont() { kids=$(lt_tree $1); [ -z "$kids" ] || kill -CONT $kids 2>/dev/null; kill -CONT $1; }
lt_kill() {
	kill -STOP $1 2>/dev/null
	kids=$(lt_tree $1); [ -z "$kids" ] || kill -KILL $kids 2>/dev/null
	kill -KILL -$1 2>/dev/null; kill -KILL $1 2>/dev/null
	for p in $1 $kids; do i=0; while lt_alive $p && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; done
	if lt_alive $1; then echo "pid $1 outlived SIGKILL for 10 s" >&2; return 1; fi
	awk -v p="$1" '$5 == p && $7 == 0 {print $2, $8, $9}' /proc/sysvipc/shm 2>/dev/null | while read -r seg u g; do
		as=; [ "$(id -u)" = 0 ] && [ "$u" != 0 ] && as="setpriv --reuid=$u --regid=$g --clear-groups"
		$as ipcrm -m $seg || { echo "the killed server's shared memory segment $seg is left" >&2; exit 1; }
	done
}
`

// sqlSignal is the command that sends sig (STOP, CONT or KILL) to n's
// server at pid and to every process below it, after checking that pid is
// n's server (its program, and n's data directory on its command line).
func (n *node) sqlSignal(pid int, sig string) string {
	fn := map[string]string{"STOP": "lt_stop %d", "CONT": "lt_cont %d", "KILL": "lt_kill %d"}[sig]
	if fn == "" {
		fn = "kill -" + sig + " %d"
	}
	return sqlShell + fmt.Sprintf("lt_is %[1]d %[2]s %[3]s || { echo 'pid %[1]d is not the %[2]s of node %[4]s' >&2; exit 1; }\n", pid, n.program(), shellquote.Quote(n.sqlDataDir()), n.name) +
		fmt.Sprintf(fn, pid)
}

// sqlCleanup is the command that kills, with every process below it, each
// SQL server a run in dir started (node.pid in a node directory, checked
// to be a mariadbd or postgres whose command line names that node's data
// directory), and removes what a killed PostgreSQL leaves; Cleanup runs it
// for a dead driver's run.
func sqlCleanup(dir string) string {
	return sqlShell + fmt.Sprintf("for f in %s/*/node.pid; do [ -f \"$f\" ] || continue; d=${f%%/node.pid}/data; read -r pid < \"$f\" || continue; "+
		"{ lt_is \"$pid\" %s \"$d\" || lt_is \"$pid\" %s \"$d\"; } && lt_kill \"$pid\"; done; true\n", shellquote.Quote(dir), mariadbProgram, postgresProgram)
}

// sqlHost is what n's host runs a SQL server with, as the host resolved
// it: the server and the program that creates its data directory, and
// the user the server runs as.
type sqlHost struct {
	server, init string
	// user is the login's user name (mariadbd's --user).
	user string
	// uid and gid are the postgres user's when the login is root, which
	// PostgreSQL refuses to run as; empty otherwise.
	uid, gid string
}

// probeSQL resolves, on n's host, the programs of n's server: those the
// inventory's binaries: map gives, else the host's (mariadbd and
// mariadb-install-db in the PATH or /usr/sbin; the postgres and initdb of
// the highest /usr/lib/postgresql/<version>/bin, else the PATH). A host
// that lacks one is an error that names the program and says how to get
// it.
func (cl *Hosts) probeSQL(ctx context.Context, n *node) (sqlHost, error) {
	h := n.conn.Host
	var b strings.Builder
	b.WriteString("fail() { echo \"no $1 on the host ($2, or give its path under binaries: in the inventory)\" >&2; exit 3; }\n")
	find := func(v, program, fallback, install string) {
		if given := h.Binaries[program]; given != "" {
			fmt.Fprintf(&b, "%s=$(command -v %s) || fail %s %s\n", v, shellquote.Quote(given), shellquote.Quote(given), shellquote.Quote(install))
			return
		}
		fmt.Fprintf(&b, "%s=$(command -v %s || command -v %s) || fail %s %s\n", v, program, fallback, program, shellquote.Quote(install))
	}
	if n.kind == kindMariaDB {
		const install = "install mariadb-server"
		find("s", mariadbProgram, "/usr/sbin/mariadbd", install)
		find("i", "mariadb-install-db", "/usr/bin/mariadb-install-db", install)
		b.WriteString("echo \"$s\"; echo \"$i\"; id -un\n")
	} else {
		const install = "install postgresql: /usr/lib/postgresql/<version>/bin/postgres"
		if given := h.Binaries[postgresProgram]; given != "" {
			fmt.Fprintf(&b, "s=$(command -v %s) || fail %s %s\n", shellquote.Quote(given), shellquote.Quote(given), shellquote.Quote(install))
		} else {
			b.WriteString("s=; v=0; for c in /usr/lib/postgresql/*/bin/postgres; do [ -x \"$c\" ] || continue; w=${c#/usr/lib/postgresql/}; w=${w%%/*}; " +
				"case $w in *[!0-9]*) continue;; esac; [ \"$w\" -gt \"$v\" ] && { v=$w; s=$c; }; done\n")
			fmt.Fprintf(&b, "[ -n \"$s\" ] || s=$(command -v postgres) || fail postgres %s\n", shellquote.Quote(install))
		}
		if given := h.Binaries["initdb"]; given != "" {
			fmt.Fprintf(&b, "i=$(command -v %s) || fail %s %s\n", shellquote.Quote(given), shellquote.Quote(given), shellquote.Quote(install))
		} else {
			fmt.Fprintf(&b, "i=${s%%/*}/initdb; [ -x \"$i\" ] || fail \"$i\" %s\n", shellquote.Quote(install))
		}
		b.WriteString("echo \"$s\"; echo \"$i\"; id -un\n")
		fmt.Fprintf(&b, "if [ \"$(id -u)\" = 0 ]; then id -u %[1]s 2>/dev/null && id -g %[1]s || "+
			"{ echo 'PostgreSQL does not run as root, and the host has no user %[1]s to run it as (Debian'\\''s postgresql package creates it)' >&2; exit 3; }; fi\n", backend.PostgresUser)
	}
	ctx, cancel := context.WithTimeout(ctx, sqlProbeTimeout)
	defer cancel()
	out, err := n.conn.Run(ctx, b.String())
	if err != nil {
		return sqlHost{}, fmt.Errorf("node %s on %s: %w", n.name, h.Name, err)
	}
	f := strings.Split(strings.TrimSpace(out), "\n")
	if len(f) != 3 && len(f) != 5 {
		return sqlHost{}, fmt.Errorf("node %s on %s: the look-up of the %s programs answered %q", n.name, h.Name, n.kind, strings.TrimSpace(out))
	}
	sh := sqlHost{server: f[0], init: f[1], user: f[2]}
	if len(f) == 5 {
		sh.uid, sh.gid = f[3], f[4]
	}
	return sh, nil
}

// setupSQL checks that the cluster is one server, resolves its programs
// on n's host (probeSQL) at the first start, which then makes n's
// directory with the run's owner file (prepare). A restart reuses what
// the first probe found: a host's programs do not change during a run,
// and a loaded host answers each SSH command slowly.
func (cl *Hosts) setupSQL(ctx context.Context, n *node, first bool) (sqlHost, error) {
	if len(cl.nodes) > 1 {
		return sqlHost{}, fmt.Errorf("--provider ssh: %s runs one server, not %d nodes", n.kind, len(cl.nodes))
	}
	n.mu.Lock()
	known := n.sql
	n.mu.Unlock()
	if known != nil && !first {
		return *known, nil
	}
	sh, err := cl.probeSQL(ctx, n)
	if err != nil {
		return sh, err
	}
	n.mu.Lock()
	n.sql = &sh
	n.mu.Unlock()
	if !first {
		return sh, nil
	}
	return sh, cl.prepare(ctx, n, "")
}

// waitPortFree is a command that waits, up to 10 s, until no socket on
// the host listens on port (/proc/net/tcp: local port in hex, state 0A):
// right after a kill, the killed server's socket can outlive the wait for
// its process on a loaded host, and the restarted server would fail to
// listen.
func waitPortFree(port int) string {
	return fmt.Sprintf("i=0; while grep -q ':%04X 00000000:0000 0A' /proc/net/tcp && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n", port)
}

// waitSQL polls n's server with dataDir, a real query from the control
// host that asks the server for its data directory, until it answers;
// a server that answers with another data directory than n's (one not in
// this run's directory) is another server on n's port (the host's own,
// another run's), which is an error.
// Each query has the time backend.Patience gives it, which grows on a
// loaded host. Every tenth query it asks n's host whether the server still runs,
// and one that exited is an error quoting the last line of its log. It
// gives up after limit (the kind's ReadyTimeout, which allows for a
// crash recovery on a loaded host), or when ctx ends.
func (cl *Hosts) waitSQL(parent context.Context, n *node, limit time.Duration, dataDir func(context.Context, string) (string, error)) error {
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	n.mu.Lock()
	pid := n.pid
	n.mu.Unlock()
	logf := path.Join(n.dir, kindOf(n).Log)
	// The server may name its directory by another path (a workdir below
	// a symbolic link, which MariaDB resolves): the run's and the node's
	// part of it tell.
	mine := path.Join(path.Base(path.Dir(n.dir)), n.name, "data")
	var last error
	var patience backend.Patience
	for i := 1; ; i++ {
		qctx, done := patience.Query(ctx)
		dir, err := dataDir(qctx, n.addr())
		done(err)
		switch {
		case err == nil && strings.HasSuffix(path.Clean(dir), mine):
			return nil
		case err == nil:
			cl.abandon(ctx, n)
			return fmt.Errorf("node %s on %s: another server answers on %s, with the data directory %s (the host's own, or another run's): stop it, or give the backend other hosts", n.name, n.conn.Host.Name, n.addr(), dir)
		}
		last = err
		if i%10 == 0 {
			if last, exited := n.exited(ctx, pid, logf); exited {
				cl.abandon(ctx, n)
				return fmt.Errorf("node %s on %s: %s exited before it answered: %s (log %s on the host)", n.name, n.conn.Host.Name, n.program(), last, logf)
			}
		}
		select {
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return fmt.Errorf("node %s on %s: %w", n.name, n.conn.Host.Name, err)
			}
			return fmt.Errorf("node %s on %s: %s at %s answers no query after %s: %v (log %s on the host)", n.name, n.conn.Host.Name, n.program(), n.addr(), limit, oneLine(last), logf)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// abandon kills n's server, if it still runs, with every process below
// it, and forgets its pid: a start that failed leaves nothing for Stop to
// find. The kill runs to its end even when ctx ends meanwhile; its
// failure goes to the log.
func (cl *Hosts) abandon(ctx context.Context, n *node) {
	n.mu.Lock()
	pid := n.pid
	n.pid = 0
	n.mu.Unlock()
	if pid == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqlInitTimeout)
	defer cancel()
	cmd := sqlShell + fmt.Sprintf("if lt_is %[1]d %[2]s %[3]s; then lt_kill %[1]d; fi", pid, n.program(), shellquote.Quote(n.sqlDataDir()))
	if _, err := n.conn.Root(ctx, cmd); err != nil {
		cl.lg.Error("ssh node kill after a failed start", "node", n.name, "host", n.conn.Host.Name, "pid", pid, "err", err)
	}
}
