package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"

	"github.com/locktest/locktest/internal/procfs"
	"github.com/locktest/locktest/internal/shellquote"
	"github.com/locktest/locktest/internal/tick"
)

// Programs are the server programs the provider runs, by the names an
// inventory's binaries: map gives paths for: the host programs of the
// backends' kinds of node (backend.Kind.Programs), in the order of
// backend.All, but those of a kind that runs in locktest's node program,
// which the provider uploads.
var Programs = hostPrograms()

// hostPrograms returns the host programs of every backend's kinds of node
// that do not run in locktest's node program, each once.
func hostPrograms() []string {
	var out []string
	for _, b := range backend.All() {
		l, err := backend.NewLayout(b, 0, nil)
		if err != nil {
			continue
		}
		for _, n := range l.Nodes {
			k, err := backend.KindOf(n.Kind)
			if err != nil || k.Program == backend.NodeProgram {
				continue
			}
			for _, p := range k.Programs {
				if !slices.Contains(out, p.Name) {
					out = append(out, p.Name)
				}
			}
		}
	}
	return out
}

// The nodes of a cluster are placed on its hosts in turn; the k-th node of
// a kind on one host (k from 0) listens on its kind's ports in slot k
// (backend.Port.At), so a host with one node of a kind uses the kind's
// first ports, and nodes that share a host each have ports of their own.
// A Redis Cluster node's bus port is one of the ports its first port
// brings (backend.Layout.MorePorts).

// kindMariaDB is the kind whose programs the SQL probe finds as MariaDB's
// (setupSQL); the other SQL kind is PostgreSQL.
const kindMariaDB = backend.KindMariaDB

// startCommandTimeout bounds the commands that prepare a node's host
// (uploads included) and start its server, which an interrupted run still
// lets finish.
const startCommandTimeout = 2 * time.Minute

// Options says what cluster New makes.
type Options struct {
	// Backend is the backend whose nodes run ("redis").
	Backend string
	// Nodes is the number of nodes (of redis-sentinel: data nodes, a
	// master and its replicas; three sentinels come with them). The nodes
	// are placed on the hosts the inventory gives the backend in turn,
	// node i on host i modulo their number; 0 means the backend's default
	// (backend.DefaultNodes).
	Nodes int
	// Conns are the connections to the inventory's hosts (Dial).
	Conns []*Conn
	// Inventory is the inventory the connections were made from.
	Inventory *Inventory
	// RunID names the run's directory on each host and its iptables rules.
	RunID string
	// Persistence is Redis's durability: off (default), everysec, always.
	Persistence string
	// Params are the backend's settings (--cluster-opt): redis-sentinel's
	// replicas, down-after and failover-timeout, redis-cluster's
	// node-timeout (docs/backends.md). The other backends take none.
	Params map[string]string
	// NodeCommand is locktest's own node program on this host (its
	// `node etcd` runs an etcd member), with arguments to put before
	// "node etcd"; it is uploaded to each etcd host. NodeEnv is its
	// environment there.
	NodeCommand []string
	NodeEnv     []string
	// SyncRecords makes each node of a backend whose syncs locktest can
	// record (backend.Layout.SyncRecordReason) record what it syncs into
	// syncs.log in its directory: a C server through the clock shim
	// (ClockShim must be set), a server of the node program under the
	// program's sync tracer. It uploads NodeCommand's program to read the
	// record: the cluster can then cut a node's power
	// (clusters.PowerCutter).
	SyncRecords bool
	// ClockShim is the clock shim library on the control host
	// (clockshim.Build); when set, it is uploaded into the run's
	// directory on each Redis host and preloaded into the node, and the
	// cluster moves the nodes' clocks (Set). Empty: clocks stay put.
	ClockShim string
	// Logger receives the provider's log.
	Logger *slog.Logger
}

// NewRunID returns a fresh run id.
func NewRunID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Hosts is a backend's nodes on SSH hosts. It is a backend.Hosts over
// this provider's driver: a clusters.Hosts, Killer, GroupRestarter,
// Pauser, LogCollector, RoleReader and Targeter and, when its nodes run
// under the clock shim (ClockReason is ""), clusters.Clocks; its Network
// method gives the iptables faults. Its methods are safe for concurrent
// use; each that starts, stops or changes a node holds the cluster's lock
// for its whole duration.
type Hosts struct {
	// Cluster is the nodes as every provider runs them (their lock,
	// formation, roles and targets), over this provider's driver.
	*backend.Deployment[*node]

	opts  Options
	nodes []*node
	lg    *slog.Logger
	// layout is the backend's nodes and settings, as every provider
	// makes them.
	layout backend.Layout

	// hostMu serializes the preparation of the nodes of one host (by host
	// name), which upload files into the run's directory there.
	hostMu map[string]*sync.Mutex

	clockMu  sync.Mutex
	clockWhy string
	offsets  map[string]time.Duration
}

// node is one server on one host.
type node struct {
	name string
	conn *Conn
	dir  string // the node's directory on the host
	// kind is the node's server (a backend.Kind's name).
	kind string
	// slot is the number of nodes of the same kind placed on the node's
	// host before it: its ports are its kind's first ports plus slot.
	slot int
	mu   sync.Mutex
	pid  int // 0 when not running
	// serving is set while the server of pid answered its readiness
	// query at its start and no kill or power cut of it has been tried
	// since: a restart leaves such a server alone, and kills any other
	// recorded server first (restart).
	serving bool
	env     []string // the clock shim's environment, when the node runs under it
	// sql is what the first start's probe found n's host runs a SQL
	// server with; a restart reuses it rather than ask the host again.
	sql *sqlHost
}

// New checks opts and returns the cluster, not started. The nodes are
// placed on the hosts the inventory gives the backend in turn (a host may
// get more than one); a redis-sentinel's sentinels follow its data nodes.
func New(opts Options) (*Hosts, error) {
	if _, err := backend.CheckPersistence(opts.Persistence); err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	layout, err := backend.NewLayout(opts.Backend, opts.Nodes, opts.Params)
	if err != nil {
		return nil, fmt.Errorf("ssh %w", err)
	}
	hosts := opts.Inventory.HostsFor(opts.Backend)
	if len(hosts) == 0 {
		return nil, fmt.Errorf("--provider ssh: inventory %s gives %s no host", opts.Inventory.Source, opts.Backend)
	}
	byName := map[string]*Conn{}
	for _, c := range opts.Conns {
		byName[c.Host.Name] = c
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	cl := &Hosts{opts: opts, layout: layout, lg: lg, offsets: map[string]time.Duration{}, hostMu: map[string]*sync.Mutex{}}
	if opts.ClockShim != "" {
		cl.clockWhy = backend.ClockShimReason(opts.Backend)
	}
	placed := map[string]int{} // host and kind → nodes placed there
	for i, p := range layout.Nodes {
		h := hosts[i%len(hosts)]
		c := byName[h.Name]
		if c == nil {
			return nil, fmt.Errorf("ssh: no connection to host %s", h.Name)
		}
		if cl.hostMu[h.Name] == nil {
			cl.hostMu[h.Name] = &sync.Mutex{}
		}
		key := h.Name + " " + p.Kind
		cl.nodes = append(cl.nodes, &node{name: p.Name, conn: c, dir: path.Join(RunDir(c.Host, opts.RunID), p.Name), kind: p.Kind, slot: placed[key]})
		placed[key]++
	}
	cl.Deployment = backend.NewDeployment("ssh", layout, cl.nodes, driver{cl})
	return cl, nil
}

// CheckParams refuses backend params (--cluster-opt) that backend does not
// read, and values they cannot take, as the backend's definition checks
// them (backend.NewLayout).
func CheckParams(name string, params map[string]string) error {
	if _, err := backend.NewLayout(name, 0, params); err != nil {
		return fmt.Errorf("--cluster-opt: %w", err)
	}
	return nil
}

// RunDir returns the run's directory on host h.
func RunDir(h Host, runID string) string { return path.Join(h.Workdir, "locktest-"+runID) }

// ip is the address of n's host that the clients dial and the nodes
// announce: the inventory's address when it is an IP address, else the
// one its name resolved to when the provider connected.
func (n *node) ip() string {
	if net.ParseIP(n.conn.Host.Address) != nil {
		return n.conn.Host.Address
	}
	return n.conn.RemoteIP()
}

func (n *node) addr() string {
	return net.JoinHostPort(n.ip(), strconv.Itoa(n.port()))
}

// port is the port the clients dial n at, which a cut between n and the
// clients drops: its kind's client port in its slot on its host.
func (n *node) port() int { return placedNode(n).Ports[0] }

// program is the name of n's server process, which its pid is checked
// against before a signal. A sentinel is redis-server too: its command
// line reads "redis-server <addr> [sentinel]".
func (n *node) program() string {
	if k := kindOf(n); k.Program != backend.NodeProgram {
		return k.Program
	}
	return nodeProgram
}

// Hosts returns the name of the host of each node, by node name.
func (cl *Hosts) Hosts() map[string]string {
	out := map[string]string{}
	for _, n := range cl.nodes {
		out[n.name] = n.conn.Host.Name
	}
	return out
}

// ownerLine is what a run directory's owner file holds: the control
// host's name, the driver's pid and its start time.
func ownerLine() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return fmt.Sprintf("%s %d %s\n", host, pid, procfs.StartTime(pid))
}

// Start writes each node's config into its directory on its host, starts
// the servers, and waits until each answers from the control host: a Redis
// node or sentinel PING, an etcd member its health, a ZooKeeper peer its
// mode. A redis-sentinel is ready when its replicas are linked to the
// master and every sentinel names the master and knows the replicas and
// the other sentinels; a redis-cluster, created at its first start, when
// every node reports cluster_state:ok and its masters own every slot. A
// host that lacks the server binary is an error naming the host; when
// several nodes fail, the error is the first's, and the log has the rest.
func (cl *Hosts) Start(ctx context.Context) error {
	t0 := time.Now()
	if err := cl.Deployment.Start(ctx); err != nil {
		return err
	}
	cl.lg.Info("ssh nodes ready", "backend", cl.opts.Backend, "nodes", len(cl.nodes), "hosts", len(cl.opts.Inventory.HostsFor(cl.opts.Backend)), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// startAll calls start with each of nodes at once and waits for each.
// The error is the first node's; the log has the others'.
func (cl *Hosts) startAll(nodes []*node, start func(n *node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = start(n) })
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil:
			first = err
		default:
			cl.lg.Error("ssh node start", "err", err)
		}
	}
	return first
}

// startNode writes n's config (first: the run directory and owner file
// too), starts redis-server daemonized (a sentinel with --sentinel) and
// waits for it. The nodes of redis-sentinel and redis-cluster keep their
// config across restarts, as Sentinel and Redis Cluster rewrite it.
//
// The commands that prepare and start the server on its host are not
// abandoned when ctx ends (Ctrl-C): one cut off midway would leave a
// server running whose pid the cluster never learnt, which Stop could
// not kill. They run to their end, bounded by startCommandTimeout; only
// the wait for the server to answer ends with ctx, and a node whose start
// had not begun when ctx ended is not started.
func (cl *Hosts) startNode(ctx context.Context, n *node, first bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startCommandTimeout)
	defer cancel()
	k := kindOf(n)
	if k == nil {
		return fmt.Errorf("node %s: the ssh provider runs no %s node", n.name, n.kind)
	}
	if err := cl.startKind(ctx, rctx, n, k, first); err != nil {
		return err
	}
	n.mu.Lock()
	n.serving = n.pid != 0
	n.mu.Unlock()
	return nil
}

// prepare runs the shell command check on n's host (it says what the host
// lacks, on stderr), makes n's directory with its data directory and the
// run's owner file, and, when the run moves clocks, installs the clock
// shim for n (a host that cannot preload it leaves the reason in
// ClockReason).
func (cl *Hosts) prepare(ctx context.Context, n *node, check string) error {
	h := n.conn.Host
	// The nodes of one host share the run's directory there and the
	// files uploaded into it: they are prepared one at a time.
	mu := cl.hostMu[h.Name]
	mu.Lock()
	defer mu.Unlock()
	script := check + fmt.Sprintf("mkdir -p %s/data && printf %%s %s > %s/owner\n", shellquote.Quote(n.dir), shellquote.Quote(ownerLine()), shellquote.Quote(path.Dir(n.dir)))
	if _, err := n.conn.Run(ctx, script); err != nil {
		return fmt.Errorf("node %s on %s: %w", n.name, h.Name, err)
	}
	if cl.opts.ClockShim == "" || backend.ClockShimReason(cl.layout.Backend) != "" {
		return nil
	}
	env, why, err := cl.installShim(ctx, n)
	if err != nil {
		return err
	}
	if why != "" {
		cl.clockMu.Lock()
		if cl.clockWhy == "" {
			cl.clockWhy = why
		}
		cl.clockMu.Unlock()
	}
	n.mu.Lock()
	n.env = env
	n.mu.Unlock()
	return nil
}

// exited asks n's host whether the process pid has exited (it is gone,
// or a zombie). When it has, it returns the last non-empty line of the
// files logs (of the last one that has any) and true. A question the host
// did not answer is not taken for an exit.
func (n *node) exited(ctx context.Context, pid int, logs ...string) (string, bool) {
	out, err := n.conn.Run(ctx, sqlShell+fmt.Sprintf("lt_alive %d && echo alive || grep -h . %s 2>/dev/null | tail -n 1", pid, shellquote.Join(logs)))
	if err != nil || strings.TrimSpace(out) == "alive" {
		return "", false
	}
	return strings.TrimSpace(out), true
}

// aliveEvery is how often waitReady asks a starting node's host whether
// its server still runs.
const aliveEvery = 5 * time.Second

// waitReady waits, up to limit, until n serves, by the readiness query of
// its kind (backend.WaitReady), asked from the control host. Beside it,
// every aliveEvery, it asks n's host whether n's server still runs: a
// server that exited (a bad setting, a port taken) ends the wait within
// aliveEvery, with the last line of its output, rather than at limit. The
// question goes over SSH, which a loaded host answers slowly, so it never
// holds up the readiness query, and it is rare enough to add no load to
// a host whose servers are slow to start.
func waitReady(ctx context.Context, n *node, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	n.mu.Lock()
	pid := n.pid
	n.mu.Unlock()
	logf, stdout := path.Join(n.dir, kindOf(n).Log), path.Join(n.dir, "stdout.log")
	var exited atomic.Pointer[error]
	go tick.Until(aliveEvery, ctx.Done(), func() bool {
		// The output's last line, else the log's: a server that
		// refused its settings says so on standard error.
		last, gone := n.exited(ctx, pid, logf, stdout)
		if !gone {
			return true // an unanswered question is asked again; the limit still holds
		}
		e := fmt.Errorf("%s exited during start-up: %s (log %s on %s)", n.program(), last, logf, n.conn.Host.Name)
		exited.Store(&e)
		return false
	})
	return backend.WaitReady(ctx, n.kind, n.addr(), 0, func() error {
		if e := exited.Load(); e != nil {
			return *e
		}
		return nil
	})
}

// find returns the node called name.
func (cl *Hosts) find(name string) (*node, error) { return cl.Find(clusters.Node{Name: name}) }

// signal sends sig to n's server by its pid on the host. The pid is
// checked to still be this run's server (its command line names the
// node's config) before the signal, so a recycled pid is never hit.
func (n *node) signal(ctx context.Context, sig string) (int, error) {
	n.mu.Lock()
	pid := n.pid
	n.mu.Unlock()
	if pid == 0 {
		return 0, fmt.Errorf("ssh: node %s is not running", n.name)
	}
	cmd := fmt.Sprintf("grep -qa %[3]s /proc/%[1]d/cmdline && kill -%[2]s %[1]d || { echo 'pid %[1]d is not a %[3]s' >&2; exit 1; }", pid, sig, n.program())
	if n.isSQL() {
		cmd = n.sqlSignal(pid, sig)
	}
	if _, err := n.conn.Root(ctx, cmd); err != nil {
		return pid, fmt.Errorf("node %s: kill -%s %d: %w", n.name, sig, pid, err)
	}
	return pid, nil
}

// kill sends SIGKILL to n's server and waits until it is gone.
func (cl *Hosts) kill(ctx context.Context, n *node) error {
	n.doubt()
	pid, err := n.signal(ctx, "KILL")
	if err != nil {
		return err
	}
	if _, err := n.conn.Run(ctx, waitGoneScript(pid, killWait)); err != nil {
		return err
	}
	n.mu.Lock()
	n.pid = 0
	n.mu.Unlock()
	return nil
}

// restart starts n's server again in the same directory: with
// persistence on, it reloads its append-only file. A server of the node
// that may still run is killed first: a kill whose command went out but
// whose reply the run's deadline cut off (under stress-ng, a ZooKeeper
// leader's kill on a stalled host) leaves the old pid recorded, and a
// restart beside it started a second server, which the run then knew as
// the node's, so that its stop left the first one running.
func (cl *Hosts) restart(ctx context.Context, n *node) error {
	n.mu.Lock()
	pid, serving := n.pid, n.serving
	n.mu.Unlock()
	if serving {
		return nil // it runs as it started: a restart of a running node does nothing
	}
	if pid != 0 {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startCommandTimeout)
		defer cancel()
		if kerr := cl.kill(kctx, n); kerr != nil {
			// The kill that was cut off may have gone through, and the
			// server still be exiting: its command line is already gone
			// (so the kill above did not take it for the node's), but
			// not yet the process. It is waited for as lt_kill waits.
			out, err := n.conn.Run(kctx, waitGoneScript(pid, exitWait))
			if err != nil || strings.TrimSpace(out) != "gone" {
				return fmt.Errorf("node %s: restart: its server (pid %d) may still run: %w", n.name, pid, errors.Join(kerr, err))
			}
			n.mu.Lock()
			n.pid = 0
			n.mu.Unlock()
		}
		cl.lg.Info("ssh node killed before its restart", "node", n.name, "host", n.conn.Host.Name, "pid", pid)
	}
	return cl.startNode(ctx, n, false)
}

// doubt marks n's recorded server as one that may no longer serve as it
// started, since a kill or a power cut of it is under way, and returns
// its pid and whether it served before.
func (n *node) doubt() (pid int, served bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	served, n.serving = n.serving, false
	return n.pid, served
}

// killWait bounds how long Kill waits for the server it sent SIGKILL to
// to exit (a SQL server's lt_kill has waited up to exitWait already).
const killWait = 5 * time.Second

// forgetIfExited forgets n's pid when its server, pid, has exited: after
// a kill or a power cut whose command failed, the kill may have gone
// through all the same. A server that still runs, or a host that did not
// answer, keeps its pid, which the next restart kills first. The question
// does not end with ctx, whose end is often why the command failed.
func (n *node) forgetIfExited(ctx context.Context, pid int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startCommandTimeout)
	defer cancel()
	if out, err := n.conn.Run(ctx, waitGoneScript(pid, 0)); err != nil || strings.TrimSpace(out) != "gone" {
		return
	}
	n.mu.Lock()
	if n.pid == pid {
		n.pid = 0
	}
	n.mu.Unlock()
}

// exitWait bounds how long a restart waits for a server of the node that
// a cut-off kill may have killed to exit: lt_kill's own bound.
const exitWait = 10 * time.Second

// waitGoneScript is the shell command that waits, polling every 50 ms for
// at most limit, until the process pid has exited (it is gone, or a
// zombie), and then prints "gone", or "running" when it still runs. A
// SIGKILLed server can take a while to exit (the kernel tears down its
// memory, and cancels what it had in flight, such as MariaDB's io_uring
// requests), and meanwhile /proc shows it without its command line.
func waitGoneScript(pid int, limit time.Duration) string {
	polls := int(limit / (50 * time.Millisecond))
	return sqlShell + fmt.Sprintf("i=0; while lt_alive %[1]d && [ $i -lt %[2]d ]; do sleep 0.05; i=$((i+1)); done; if lt_alive %[1]d; then echo running; else echo gone; fi\n", pid, polls)
}

// Pause stops n's server with SIGSTOP and waits until the host's
// kernel shows every thread of it stopped (a SQL server: each process of
// its group), for at least clusters.PauseWait; a server still running
// then is an error, so that the fault is not recorded as in.
func (d driver) Pause(ctx context.Context, n *node) error {
	pid, err := n.signal(ctx, "STOP")
	if err != nil {
		return err
	}
	if n.isSQL() {
		// lt_stop waited for each process of the group.
		return nil
	}
	if _, err := n.conn.Run(ctx, waitStoppedScript(pid, clusters.PauseWait)); err != nil {
		return fmt.Errorf("node %s: pause: %w", n.name, err)
	}
	return nil
}

// waitStoppedScript is the shell command that waits until every thread of
// pid is stopped (state T in /proc/PID/task/*/stat, read after the last
// ") ", since a thread's name may hold spaces and parentheses), polling
// every 20 ms for at least limit, and fails saying so when one still
// runs. A process that is gone ends the wait.
func waitStoppedScript(pid int, limit time.Duration) string {
	polls := int(limit / (20 * time.Millisecond))
	return fmt.Sprintf("i=0; while sed -n 's/.*) \\(.\\).*/\\1/p' /proc/%[1]d/task/*/stat 2>/dev/null | grep -qv '^T$'; do "+
		"[ $i -ge %[2]d ] && { echo 'process %[1]d not stopped after %[3]v' >&2; exit 1; }; sleep 0.02; i=$((i+1)); done", pid, polls, limit)
}

// Resume continues n's server with SIGCONT.
func (d driver) Resume(ctx context.Context, n *node) error {
	_, err := n.signal(ctx, "CONT")
	return err
}

// Reconnect dials again every host whose connection was lost during the
// run (Conn.Reconnect), at once, so that the nodes there can be stopped
// and the run's files and rules removed. It returns the hosts it could
// not reach.
func (cl *Hosts) Reconnect(ctx context.Context) error {
	errs := make([]error, len(cl.opts.Conns))
	var wg sync.WaitGroup
	for i, c := range cl.opts.Conns {
		wg.Go(func() { errs[i] = c.Reconnect(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RemoveRunDirs removes the run's directory from every host of conns,
// after killing any server whose pid file is in it (killRunServers). The
// cluster's Stop kills the servers whose pids it knows; a server can be
// running with a pid the driver never learnt: a restart whose command
// started it on a host that then stopped answering (under stress-ng, at
// 94e275f, a restarted redis-server kept its port after the run, and
// every later run on that host failed to listen).
func RemoveRunDirs(ctx context.Context, conns []*Conn, runID string) error {
	var errs []error
	for _, c := range conns {
		dir := RunDir(c.Host, runID)
		if _, err := c.Root(ctx, killRunServers(dir)); err != nil {
			errs = append(errs, err)
		}
		if _, err := c.Run(ctx, "rm -rf "+shellquote.Quote(dir)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var (
	_ clusters.RoleReader     = (*Hosts)(nil)
	_ clusters.Targeter       = (*Hosts)(nil)
	_ clusters.GroupRestarter = (*Hosts)(nil)
)

// driver is the ssh provider's backend.Driver: a node is a server on a
// remote host, which it starts in the background there and signals by
// pid over SSH.
type driver struct{ cl *Hosts }

var _ backend.Driver[*node] = driver{}

// Node returns n at its host's address and its own port; its log stays
// on its host.
func (d driver) Node(n *node) clusters.Node { return clusters.Node{Name: n.name, Addr: n.addr()} }

// Pid returns n's server's pid on its host, 0 when it is not running.
func (d driver) Pid(n *node) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}

// Start writes the config of each of ns on its host (the first: the run
// directory and owner file too), starts the servers at once and waits for
// each (startNode).
func (d driver) Start(ctx context.Context, ns []*node) error {
	return d.cl.startAll(ns, func(n *node) error { return d.cl.startNode(ctx, n, true) })
}

// Restart starts the servers of ns again, at once, each in its directory
// (restart): one that may still run is killed first.
func (d driver) Restart(ctx context.Context, ns []*node) error {
	return d.cl.startAll(ns, func(n *node) error { return d.cl.restart(ctx, n) })
}

// Stop kills n's server, if it runs (by pid, after SIGCONT so that a
// paused one dies too), and waits for it to go. The run's directory on
// its host stays until RemoveRunDirs.
func (d driver) Stop(ctx context.Context, n *node) error {
	if d.Pid(n) == 0 {
		return nil
	}
	n.signal(ctx, "CONT")
	return d.cl.kill(ctx, n)
}

// Kill sends SIGKILL to n's server and waits until it is gone.
func (d driver) Kill(ctx context.Context, n *node) error { return d.cl.kill(ctx, n) }

// CollectLog copies n's log (redis.log of a Redis node or a sentinel,
// etcd.log, zookeeper.log, …) from its host to path. A node that never
// started has none, and writes nothing.
func (d driver) CollectLog(ctx context.Context, n *node, path string) error {
	out, err := n.conn.Run(ctx, "cat "+shellquote.Quote(n.dir+"/"+kindOf(n).Log)+" 2>/dev/null || true")
	if err != nil || out == "" {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
