package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/procfs"
)

// errAddrInUse marks a SQL server that could not bind its port.
var errAddrInUse = errors.New("address already in use")

// Timings of the one-node SQL servers (MariaDB, PostgreSQL).
const (
	// sqlStopGrace is how long Stop waits for a clean shutdown before
	// SIGKILL.
	sqlStopGrace = 10 * time.Second
	// sqlReadyTimeout bounds the wait for a started server to answer a
	// query when the caller's context has no earlier deadline. A database
	// that recovers after a kill may take a few seconds.
	sqlReadyTimeout = 30 * time.Second
	// sqlGroupGone bounds the wait for the last process of a killed
	// server's process group (PostgreSQL's backends) to disappear.
	sqlGroupGone = 5 * time.Second
)

// SQLOptions configures a local one-node SQL server, MariaDB or PostgreSQL.
// The zero value is not usable: Dir is required.
type SQLOptions struct {
	// Dir is the run directory; the node n1 keeps its files under
	// Dir/nodes/n1 (data directory data/, the server's log, its socket).
	// A relative Dir is made absolute when the cluster is created.
	Dir string
	// Port fixes the TCP port; 0 picks a free one at the first start (the
	// backend's standard port when Host has a network namespace of its
	// own). A fixed port that is in use makes Start fail.
	Port int
	// Host places the node (its address and network namespace); the zero
	// Host is loopback in the driver's namespace.
	Host Host
	// Server is the server program (mariadbd, postgres): a name looked up
	// in PATH or a path; empty means the Debian package's.
	Server string
	// Init is the program that creates a data directory
	// (mariadb-install-db, initdb); empty means the one that comes with
	// Server.
	Init string
	// NodeEnv, if set, returns extra environment for the node's process
	// (the clock shim).
	NodeEnv func(node string) []string
	// Logger receives node starts, exits, kills and pauses with the keys
	// node, pid and addr; nil discards them.
	Logger *slog.Logger
}

// sqlEngine is what differs between the SQL servers this package runs.
type sqlEngine interface {
	// kind names the server in errors and logs: "mariadb", "postgres".
	kind() string
	// standardPort is the port a node in its own namespace uses.
	standardPort() int
	// prepare makes n ready to start: it creates and initialises the data
	// directory on the first start and writes the configuration. Its
	// programs' output goes to n.logPath.
	prepare(ctx context.Context, n *sqlNode) error
	// spec says how to start n's server.
	spec(n *sqlNode) spawnSpec
	// ping runs one real query over TCP at addr.
	ping(ctx context.Context, addr string) error
	// stopSignal asks the server for a clean, quick shutdown.
	stopSignal() syscall.Signal
	// cleanup removes what a stopped server leaves outside its directory.
	cleanup(n *sqlNode)
}

// sqlServer runs one node of an sqlEngine: the shared machinery of
// [MariaDB] and [Postgres]. Its methods are safe for concurrent use; each
// holds the server's lock for its whole duration.
type sqlServer struct {
	eng     sqlEngine
	nodeEnv func(node string) []string
	n       *sqlNode // the one node, n1

	nodeSet[*sqlNode]
}

// sqlNode is the node's fixed paths and its current process, if any.
type sqlNode struct {
	member
	dataDir string // dir/data
	port    int    // 0 until the first start picks one
	fixed   bool   // port given by the user: never replaced
}

func (n *sqlNode) addr() string {
	if n.port == 0 {
		return ""
	}
	return n.host.Addr(n.port)
}

// newSQLServer checks opts and lays out the node n1.
func newSQLServer(eng sqlEngine, opts SQLOptions, logName string) (*sqlServer, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("local %s: SQLOptions.Dir (the run directory) is required", eng.kind())
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("local %s: port %d out of range", eng.kind(), opts.Port)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("local %s: %w", eng.kind(), err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nd := filepath.Join(dir, "nodes", "n1")
	n := &sqlNode{member: member{name: "n1", dir: nd, logPath: filepath.Join(nd, logName), host: opts.Host},
		dataDir: filepath.Join(nd, "data"), port: opts.Port, fixed: opts.Port != 0}
	srv := &sqlServer{eng: eng, nodeEnv: opts.NodeEnv, n: n}
	srv.nodeSet = nodeSet[*sqlNode]{kind: "local " + eng.kind(), log: log, nodes: []*sqlNode{n},
		restart: func(ctx context.Context, _ *sqlNode) error { return srv.startNode(ctx, false) }}
	srv.group = sqlGroup{srv}
	return srv, nil
}

// Pid returns the server's pid, or 0 when it is not running.
func (s *sqlServer) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n.proc.running() {
		return s.n.proc.pid
	}
	return 0
}

// Start initialises the data directory on the first start, starts the
// server unless it runs, and returns once it answers a query over TCP. The
// node keeps its port across Stop and Start. A failure leaves no process
// and is one line naming the node and its log file.
func (s *sqlServer) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n.proc.running() {
		return nil
	}
	return s.startNode(ctx, true)
}

// sqlGroup stops, kills, pauses and resumes a SQL server together with
// every process it started (PostgreSQL runs one per connection).
type sqlGroup struct{ s *sqlServer }

// stop shuts the server down cleanly with its own stop signal, SIGKILLs
// it and every process it started if it has not exited within
// sqlStopGrace (at once if ctx ends first), and returns once no process
// of it is left.
func (g sqlGroup) stop(ctx context.Context, n *sqlNode, p *proc) {
	if p.running() {
		p.ended.Store(true)
		_ = p.signal(g.s.eng.stopSignal())
		for _, k := range descendants(p.pid) { // a paused server must see it
			_ = syscall.Kill(k, syscall.SIGCONT)
		}
		_ = p.signal(syscall.SIGCONT)
		t := time.NewTimer(sqlStopGrace)
		graceful := true
		select {
		case <-p.done:
		case <-t.C:
			graceful = false
		case <-ctx.Done():
			graceful = false
		}
		t.Stop()
		g.s.log.Info("node stopped", "node", n.name, "pid", p.pid, "addr", n.addr(), "graceful", graceful)
	}
	killGroup(p) // whatever is left of the group, e.g. backends of a crashed postmaster
	g.s.eng.cleanup(n)
}

// kill SIGKILLs the server and every process it started.
func (g sqlGroup) kill(n *sqlNode, p *proc) {
	killGroup(p)
	g.s.eng.cleanup(n)
}

// pause stops the server first, so that it starts no process while its
// children are being stopped, then each child, and waits until the
// kernel reports each stopped.
func (g sqlGroup) pause(n *sqlNode) error {
	if !n.proc.running() {
		return errors.New("node is not running")
	}
	if err := n.proc.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pids := append([]int{n.proc.pid}, descendants(n.proc.pid)...)
	for _, pid := range pids[1:] {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range pids {
		if err := procfs.WaitStopped(pid, clusters.PauseWait); err != nil && !errors.Is(err, os.ErrNotExist) && pidAlive(pid) {
			return fmt.Errorf("pid %d: %w", pid, err)
		}
	}
	return nil
}

// resume continues every process the server started, then the server.
func (g sqlGroup) resume(n *sqlNode) error {
	for _, pid := range descendants(n.proc.pid) {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := n.proc.signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// startNode prepares the node and starts it. When repick is set and the
// port was picked automatically, a port lost to a race is replaced by a
// fresh one, up to startAttempts times. s.mu must be held.
func (s *sqlServer) startNode(ctx context.Context, repick bool) error {
	n, kind := s.n, s.eng.kind()
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("local %s: node %s: %w", kind, n.name, err)
	}
	if n.fixed && n.host.NetNS == "" && !portFreeOn(n.host.ip(), n.port) {
		return fmt.Errorf("local %s: node %s: port %d on %s is in use (log %s)", kind, n.name, n.port, n.host.ip(), n.logPath)
	}
	for attempt := 1; ; attempt++ {
		if n.port == 0 {
			p, err := n.host.port(s.eng.standardPort())
			if err != nil {
				return fmt.Errorf("local %s: node %s: %w", kind, n.name, err)
			}
			n.port = p
		}
		if err := s.eng.prepare(ctx, n); err != nil {
			return err
		}
		err := s.spawnNode(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errAddrInUse) {
			return err
		}
		if n.fixed || !repick || attempt == startAttempts {
			return fmt.Errorf("local %s: node %s: port %d on %s is in use (log %s)", kind, n.name, n.port, n.host.ip(), n.logPath)
		}
		s.log.Warn("port taken, retrying on another", "node", n.name, "addr", n.addr())
		n.port = 0
	}
}

// spawnNode starts the node's server and waits until it answers a query.
// On failure no process of it is left when it returns.
func (s *sqlServer) spawnNode(ctx context.Context) error {
	n, kind := s.n, s.eng.kind()
	spec := s.eng.spec(n)
	spec.Dir, spec.LogPath, spec.Host = n.dir, n.logPath, n.host
	if s.nodeEnv != nil {
		spec.Env = append(spec.Env, s.nodeEnv(n.name)...)
	}
	p, off, err := spawnWith(spec)
	if err != nil {
		return fmt.Errorf("local %s: node %s: start %s: %v (log %s)", kind, n.name, spec.Bin, err, n.logPath)
	}
	werr := s.waitReady(ctx, p)
	if werr == nil {
		s.adopt(n, p, "data", n.dataDir)
		return nil
	}
	exited := !p.running()
	killGroup(p)
	s.eng.cleanup(n)
	tail := logTail(n.logPath, off, logTailLines)
	if exited && slices.ContainsFunc(tail, func(l string) bool { return strings.Contains(l, "Address already in use") }) {
		return fmt.Errorf("%w: %s", errAddrInUse, n.addr())
	}
	return s.notStarted(n, p, exited, werr, "; log "+n.logPath+lastLine(tail))
}

// waitReady polls the server with a real query until it answers, p exits,
// or ctx (capped at sqlReadyTimeout) ends.
func (s *sqlServer) waitReady(ctx context.Context, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, sqlReadyTimeout)
	defer cancel()
	last := errors.New("no answer yet")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if !p.running() {
			return errors.New("process exited")
		}
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		last = s.eng.ping(qctx, s.n.addr())
		qcancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return errors.New("process exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), oneLine(last.Error()))
		case <-tick.C:
		}
	}
}

// lastLine renders the last line of a log tail for a one-line error.
func lastLine(tail []string) string {
	if len(tail) == 0 {
		return ""
	}
	return ", which ends: " + strconv.Quote(oneLine(tail[len(tail)-1]))
}

// oneLine joins the lines of s with " / ".
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " / ")), " ")
}

// killGroup kills the server p and every process it started, and returns
// once p is reaped and none of them is left (or after sqlGroupGone). A
// PostgreSQL backend makes itself a session leader, so the process group
// alone does not reach it: p is frozen first, so that it starts no more
// children, and then its descendants are killed by pid.
func killGroup(p *proc) {
	p.ended.Store(true)
	_ = p.signal(syscall.SIGSTOP)
	kids := descendants(p.pid)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = p.signal(syscall.SIGKILL)
	<-p.done
	deadline := time.Now().Add(sqlGroupGone)
	for _, k := range kids {
		for pidAlive(k) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// descendants returns the pids of the processes below pid in the process
// tree, parents before their children.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name in parentheses may hold spaces; the fields after
		// its closing parenthesis are state, ppid, pgrp.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], child)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, c := range children[q] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// pidAlive reports whether a process with that pid exists and is not a
// zombie.
func pidAlive(pid int) bool {
	st, err := procfs.State(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && st != 'Z'
}

// portFreeOn reports whether ip:port can be listened on right now.
func portFreeOn(ip string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
