package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
)

// Timings of the local provider's nodes.
const (
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 2 * time.Second
	// startAttempts is how often the nodes whose ports were picked
	// automatically are started on fresh ports after losing a race for
	// the old ones.
	startAttempts = 3
	// logTailLines is how many lines of a node's log a start-up error quotes.
	logTailLines = 8
)

// pickPort picks a port of a node that has none; tests replace it.
var pickPort = freePort

// fullCluster is what every local backend is: a cluster with all the
// abilities its node set gives it.
type fullCluster interface {
	clusters.Cluster
	clusters.Killer
	clusters.Pauser
	clusters.LogCollector
}

// member is the part of a local node that the node set manages: its name,
// folder, log, host and current process. Each backend's node type embeds
// it and adds its own paths and ports.
type member struct {
	name    string
	dir     string // Dir/nodes/<name>
	logPath string
	host    Host
	proc    *proc // nil while the node is not running
}

func (m *member) self() *member { return m }

// localNode is a backend's node type as the node set sees it: a pointer to
// a struct that embeds member, and the address clients dial ("" before the
// node's port is picked).
type localNode interface {
	self() *member
	addr() string
}

// nodeSet is the process control every local backend shares: the nodes,
// the lock that makes each method atomic, and Nodes, Pids, Stop, Kill,
// Restart, Pause, Resume and CollectLogs, which implement
// clusters.Cluster's Nodes and Stop, Killer, Pauser and LogCollector. A
// backend embeds it and keeps only what is its own: its configuration,
// how a node starts and when it is ready (restart), and its roles. Its
// methods hold mu for their whole duration, so a Stop waits for a Kill in
// progress, and the other way round; the hooks run with mu held.
type nodeSet[N localNode] struct {
	// kind names the backend in errors: "local redis".
	kind string
	log  *slog.Logger

	mu    sync.Mutex
	nodes []N

	// restart starts a node that is not running again, on its data
	// directory and ports, and returns once it is ready.
	restart func(ctx context.Context, n N) error
	// group replaces the single-process defaults of stopping, killing,
	// pausing and resuming for the nodes it takes, servers of several
	// processes; nil when there are none.
	group processGroup[N]
}

// processGroup is how a server of several processes (a SQL server and
// the processes it starts) is stopped, killed, paused and resumed. Each
// runs with the set's lock held; stop and kill get the process the node
// had, which the set has already forgotten. takes says which nodes it
// handles; the others get the set's single-process defaults.
type processGroup[N localNode] interface {
	takes(n N) bool
	stop(ctx context.Context, n N, p *proc)
	kill(n N, p *proc)
	pause(n N) error
	resume(n N) error
}

// Nodes returns the nodes in order. Addr is empty for a node whose port
// has not been picked yet (before the first Start).
func (s *nodeSet[N]) Nodes() []clusters.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodesLocked()
}

// nodesLocked is Nodes with s.mu held.
func (s *nodeSet[N]) nodesLocked() []clusters.Node {
	out := make([]clusters.Node, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = clusters.Node{Name: n.self().name, Addr: n.addr(), LogPath: n.self().logPath}
	}
	return out
}

// Pids returns each node's current pid, or 0 for a node that is not
// running.
func (s *nodeSet[N]) Pids() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pidsLocked()
}

// pidsLocked is Pids with s.mu held.
func (s *nodeSet[N]) pidsLocked() map[string]int {
	m := make(map[string]int, len(s.nodes))
	for _, n := range s.nodes {
		m[n.self().name] = 0
		if p := n.self().proc; p.running() {
			m[n.self().name] = p.pid
		}
	}
	return m
}

// Stop stops every node this cluster started: SIGTERM (or the server's own
// stop signal), then SIGKILL if the node has not exited within its grace
// (at once if ctx ends first). It returns once every process has been
// reaped, is idempotent, and leaves the data directories and logs in place.
func (s *nodeSet[N]) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range s.nodes {
		if n.self().proc == nil {
			continue
		}
		wg.Go(func() { s.stopNode(ctx, n) })
	}
	wg.Wait()
	return nil
}

// stopNode stops n's process, if any, and forgets it. s.mu must be held.
func (s *nodeSet[N]) stopNode(ctx context.Context, n N) {
	m := n.self()
	p := m.proc
	if p == nil {
		return
	}
	m.proc = nil
	if s.group != nil && s.group.takes(n) {
		s.group.stop(ctx, n, p)
		return
	}
	if !p.running() {
		return
	}
	graceful := p.stop(ctx, stopGrace)
	s.log.Info("node stopped", "node", m.name, "pid", p.pid, "addr", n.addr(), "graceful", graceful)
}

// Kill sends SIGKILL to the node (and every process it started) and
// returns once the process has been reaped. Its data directory stays for
// Restart. Killing a node that is not running does nothing.
func (s *nodeSet[N]) Kill(ctx context.Context, node clusters.Node) error {
	return s.locked(node, func(n N) error {
		m := n.self()
		p := m.proc
		m.proc = nil
		if !p.running() {
			return nil
		}
		s.killProc(n, p)
		s.log.Info("node killed", "node", m.name, "pid", p.pid, "addr", n.addr())
		return nil
	})
}

// killProc kills p, n's process, with SIGKILL (the whole tree, for a
// node the group takes) and returns once it is gone. s.mu must be held.
func (s *nodeSet[N]) killProc(n N, p *proc) {
	if s.group != nil && s.group.takes(n) {
		s.group.kill(n, p)
		return
	}
	p.kill()
}

// Restart starts a node that is not running again, with the same
// configuration, ports and data directory, and returns once it is ready
// (the backend's readiness). What the node still knows depends on its
// durability. Restarting a running node does nothing. If a port has been
// taken meanwhile, Restart fails: the node's clients know it by its
// address.
func (s *nodeSet[N]) Restart(ctx context.Context, node clusters.Node) error {
	return s.locked(node, func(n N) error {
		if n.self().proc.running() {
			return nil
		}
		return s.restart(ctx, n)
	})
}

// Pause freezes the node (and every process it started) with SIGSTOP and
// returns once the kernel reports each stopped. The kernel still accepts
// connections on its port, so clients see timeouts, not refusals. Pausing
// a node that is not running is an error.
func (s *nodeSet[N]) Pause(ctx context.Context, node clusters.Node) error {
	return s.signal(node, "pause", "node paused", func(n N) error {
		if s.group != nil && s.group.takes(n) {
			return s.group.pause(n)
		}
		return n.self().proc.pause(clusters.PauseWait)
	})
}

// Resume thaws the node (and every process it started) with SIGCONT.
// Resuming a node that is not paused, or not running, does nothing.
func (s *nodeSet[N]) Resume(ctx context.Context, node clusters.Node) error {
	return s.signal(node, "resume", "node resumed", func(n N) error {
		if !n.self().proc.running() {
			return errNotRunning
		}
		if s.group != nil && s.group.takes(n) {
			return s.group.resume(n)
		}
		return n.self().proc.resume()
	})
}

// errNotRunning tells signal that there was nothing to do (Resume of a
// node that is not running); Pause's own "not running" is an error.
var errNotRunning = errors.New("node is not running")

// signal calls do with the node called node.Name, holding the lock, and
// logs done; do's error is wrapped as "kind: verb name: err", except
// errNotRunning, which means nothing was done.
func (s *nodeSet[N]) signal(node clusters.Node, verb, done string, do func(n N) error) error {
	return s.locked(node, func(n N) error {
		m := n.self()
		switch err := do(n); {
		case err == errNotRunning:
			return nil
		case err != nil:
			return fmt.Errorf("%s: %s %s: %w", s.kind, verb, m.name, err)
		}
		s.log.Info(done, "node", m.name, "pid", m.proc.pid, "addr", n.addr())
		return nil
	})
}

// CollectLogs copies each node's log to dir/<name>.log, creating dir.
// Nodes that never started, and so have no log, are skipped.
func (s *nodeSet[N]) CollectLogs(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logs := make([]nodeLog, 0, len(s.nodes))
	for _, n := range s.nodes {
		logs = append(logs, nodeLog{n.self().name, n.self().logPath})
	}
	return collectLogs(dir, logs)
}

// locked calls f with the node called node.Name, holding s.mu.
func (s *nodeSet[N]) locked(node clusters.Node, f func(n N) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.find(node)
	if err != nil {
		return err
	}
	return f(n)
}

// find returns the node called node.Name. s.mu must be held.
func (s *nodeSet[N]) find(node clusters.Node) (N, error) {
	for _, n := range s.nodes {
		if n.self().name == node.Name {
			return n, nil
		}
	}
	var none N
	return none, fmt.Errorf("%s: no node %q", s.kind, node.Name)
}

// ask calls f with the address of the node called node.Name, outside the
// lock (f asks the node over the network): how a backend reads a node's
// role.
func (s *nodeSet[N]) ask(ctx context.Context, node clusters.Node, f func(ctx context.Context, addr string) (string, error)) (string, error) {
	s.mu.Lock()
	n, err := s.find(node)
	var addr string
	if err == nil {
		addr = n.addr()
	}
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	return f(ctx, addr)
}

// layout is where a backend's nodes go, checked: how many, their fixed
// ports and hosts, and the run folder.
type layout struct {
	kind string // "local redis", for errors
	opts string // the options type, for errors: "RedisOptions"
	// nodes is the count asked for; 0 means def.
	nodes, def int
	// ports are fixed ports of the first nodes (0: pick one); portWord
	// names them in errors ("ports", "client ports").
	ports    []int
	portWord string
	hosts    []Host
	dir      string
	// prefix names the nodes prefix1..prefixN ("n" when empty); logName
	// is each node's log file in its folder.
	prefix, logName string
}

// members checks l and returns the members it lays out, each in
// dir/nodes/<name>, and each member's fixed port (0 when it has none).
func (l layout) members() ([]member, []int, error) {
	if l.nodes < 0 {
		return nil, nil, fmt.Errorf("%s: Nodes must be at least 1, not %d", l.kind, l.nodes)
	}
	if l.nodes == 0 {
		l.nodes = l.def
	}
	if len(l.ports) > l.nodes {
		return nil, nil, fmt.Errorf("%s: %d %s given for %d nodes", l.kind, len(l.ports), l.portWord, l.nodes)
	}
	seen := map[int]bool{}
	for _, p := range l.ports {
		if p < 0 || p > 65535 {
			return nil, nil, fmt.Errorf("%s: port %d out of range", l.kind, p)
		}
		if p != 0 && seen[p] {
			return nil, nil, fmt.Errorf("%s: port %d given twice", l.kind, p)
		}
		seen[p] = true
	}
	if l.dir == "" {
		return nil, nil, fmt.Errorf("%s: %s.Dir (the run directory) is required", l.kind, l.opts)
	}
	dir, err := filepath.Abs(l.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", l.kind, err)
	}
	if l.prefix == "" {
		l.prefix = "n"
	}
	ms := make([]member, l.nodes)
	ports := make([]int, l.nodes)
	for i := range ms {
		name := fmt.Sprintf("%s%d", l.prefix, i+1)
		nd := filepath.Join(dir, "nodes", name)
		ms[i] = member{name: name, dir: nd, logPath: filepath.Join(nd, l.logName)}
		if i < len(l.hosts) {
			ms[i].host = l.hosts[i]
		}
		if i < len(l.ports) {
			ports[i] = l.ports[i]
		}
	}
	return ms, ports, nil
}

// adopt makes p the process of n, which is ready, and logs its start with
// attrs and, later, its exit: at debug level when the harness ended it,
// as a warning naming the log when it exited on its own.
func (s *nodeSet[N]) adopt(n N, p *proc, attrs ...any) {
	m := n.self()
	m.proc = p
	log := s.log.With("node", m.name, "pid", p.pid, "addr", n.addr())
	log.Info("node started", attrs...)
	go func() {
		<-p.done
		if p.ended.Load() {
			log.Debug("node exited", "status", p.exitStatus())
		} else {
			log.Warn("node exited on its own", "status", p.exitStatus(), "log", m.logPath)
		}
	}()
}

// notStarted is the error of n's process p, already killed, that did not
// get ready: it exited during start-up (exited) or did not answer (werr).
// quoted is what its log says, appended as it is.
func (s *nodeSet[N]) notStarted(n N, p *proc, exited bool, werr error, quoted string) error {
	m := n.self()
	log := s.log.With("node", m.name, "pid", p.pid, "addr", n.addr())
	if exited {
		log.Warn("node exited during start-up", "status", p.exitStatus())
		return fmt.Errorf("%s: node %s (pid %d, %s) exited during start-up (%s)%s",
			s.kind, m.name, p.pid, n.addr(), p.exitStatus(), quoted)
	}
	log.Warn("node not ready, killed", "err", werr)
	return fmt.Errorf("%s: node %s (pid %d, %s) not ready: %v%s", s.kind, m.name, p.pid, n.addr(), werr, quoted)
}

// quoteTail quotes the last lines of a log for an error: "; last lines of
// LOG:" and the lines, each on its own indented line; "" without lines.
func quoteTail(logPath string, tail []string) string {
	if len(tail) == 0 {
		return ""
	}
	return "; last lines of " + logPath + ":\n\t" + strings.Join(tail, "\n\t")
}
