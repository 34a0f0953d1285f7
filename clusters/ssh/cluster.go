package ssh

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"

	"github.com/locktest/locktest/internal/procfs"
)

// Programs are the server programs the provider runs, by the names an
// inventory's binaries: map gives paths for.
var Programs = []string{"redis-server", "java", "mariadbd", "mariadb-install-db", "postgres", "initdb"}

// Backends returns the backends the ssh provider runs.
func Backends() []string {
	return []string{"redis", "etcd", "zookeeper", backendMariaDB, backendPostgres}
}

// Persistence settings of the Redis nodes, as the local provider's.
const (
	PersistenceOff      = "off"
	PersistenceEverysec = "everysec"
	PersistenceAlways   = "always"
)

// redisPort is the port every Redis node listens on: one node per host.
const redisPort = 6379

// The ports of an etcd member, one a host.
const (
	etcdClientPort = 2379
	etcdPeerPort   = 2380
)

// The heartbeat and election timeout of the etcd members, the local
// provider's defaults.
const (
	etcdTickMs     = 25
	etcdElectionMs = 250
)

// readyTimeout bounds the wait for one node to answer after its start.
const readyTimeout = 30 * time.Second

// Options says what cluster New makes.
type Options struct {
	// Backend is the backend whose nodes run ("redis").
	Backend string
	// Nodes is the number of nodes; each runs on a host of its own, the
	// first Nodes hosts the inventory gives the backend.
	Nodes int
	// Conns are the connections to the inventory's hosts (Dial).
	Conns []*Conn
	// Inventory is the inventory the connections were made from.
	Inventory *Inventory
	// RunID names the run's directory on each host and its iptables rules.
	RunID string
	// Persistence is Redis's durability: off (default), everysec, always.
	Persistence string
	// NodeCommand is locktest's own node program on this host (its
	// `node etcd` runs an etcd member), with arguments to put before
	// "node etcd"; it is uploaded to each etcd host. NodeEnv is its
	// environment there.
	NodeCommand []string
	NodeEnv     []string
	// SyncRecords makes each Redis node record what it syncs, through the
	// clock shim (ClockShim must be set), into syncs.log in its
	// directory, and uploads NodeCommand's program to read it: the
	// cluster can then cut a node's power (clusters.PowerCutter).
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

// Cluster is a backend's nodes on SSH hosts. It is a clusters.Cluster, a
// clusters.Killer, a clusters.Pauser, a clusters.LogCollector and, when
// its nodes run under the clock shim (ClockReason is ""), clusters.Clocks;
// its Network method gives the iptables faults. Its methods are safe for
// concurrent use.
type Cluster struct {
	opts  Options
	nodes []*node
	lg    *slog.Logger

	clockMu  sync.Mutex
	clockWhy string
	offsets  map[string]time.Duration
}

// node is one server on one host.
type node struct {
	name string
	conn *Conn
	dir  string // the node's directory on the host
	// backend is the node's server: "redis", "etcd" (locktest's node
	// program) or "zookeeper".
	backend string
	mu      sync.Mutex
	pid     int      // 0 when not running
	env     []string // the clock shim's environment, when the node runs under it
}

// New checks opts and returns the cluster, not started.
func New(opts Options) (*Cluster, error) {
	if !slices.Contains(Backends(), opts.Backend) {
		return nil, fmt.Errorf("--provider ssh: backend %s is not run by the ssh provider yet (it runs %s)", opts.Backend, strings.Join(Backends(), ", "))
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	switch opts.Persistence {
	case "", PersistenceOff, PersistenceEverysec, PersistenceAlways:
	default:
		return nil, fmt.Errorf("ssh: persistence %q: want off, everysec or always", opts.Persistence)
	}
	hosts := opts.Inventory.HostsFor(opts.Backend)
	if len(hosts) < opts.Nodes {
		return nil, fmt.Errorf("--provider ssh: %s needs %d hosts, one per node, and inventory %s gives it %d", opts.Backend, opts.Nodes, opts.Inventory.Source, len(hosts))
	}
	byName := map[string]*Conn{}
	for _, c := range opts.Conns {
		byName[c.Host.Name] = c
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	cl := &Cluster{opts: opts, lg: lg, offsets: map[string]time.Duration{}}
	if opts.ClockShim != "" && opts.Backend == "etcd" {
		cl.clockWhy = "etcd members are Go programs, which read the clock without the C library the shim wraps"
	}
	for i := range opts.Nodes {
		c := byName[hosts[i].Name]
		if c == nil {
			return nil, fmt.Errorf("ssh: no connection to host %s", hosts[i].Name)
		}
		name := fmt.Sprintf("n%d", i+1)
		cl.nodes = append(cl.nodes, &node{name: name, conn: c, dir: path.Join(RunDir(c.Host, opts.RunID), name), backend: opts.Backend})
	}
	return cl, nil
}

// RunDir returns the run's directory on host h.
func RunDir(h Host, runID string) string { return path.Join(h.Workdir, "locktest-"+runID) }

// Nodes returns the nodes: each at its host's address.
func (cl *Cluster) Nodes() []clusters.Node {
	out := make([]clusters.Node, len(cl.nodes))
	for i, n := range cl.nodes {
		out[i] = clusters.Node{Name: n.name, Addr: n.addr()}
	}
	return out
}

func (n *node) addr() string {
	return net.JoinHostPort(n.conn.Host.Address, strconv.Itoa(n.port()))
}

// port is the port the clients dial n at, which a cut between n and the
// clients drops.
func (n *node) port() int {
	switch n.backend {
	case "etcd":
		return etcdClientPort
	case "zookeeper":
		return zkClientPort
	case backendMariaDB, backendPostgres:
		return n.sqlPort()
	}
	return redisPort
}

// program is the name of n's server process, which its pid is checked
// against before a signal.
func (n *node) program() string {
	switch n.backend {
	case "etcd":
		return nodeProgram
	case "zookeeper":
		return zkMain
	case backendMariaDB:
		return mariadbProgram
	case backendPostgres:
		return postgresProgram
	}
	return "redis-server"
}

// Hosts returns the name of the host of each node, by node name.
func (cl *Cluster) Hosts() map[string]string {
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
// the servers, and waits until each answers PING from the control host. A
// host that lacks the server binary is an error naming the host; when
// several nodes fail, the error is the first's, and the log has the rest.
func (cl *Cluster) Start(ctx context.Context) error {
	t0 := time.Now()
	errs := make([]error, len(cl.nodes))
	var wg sync.WaitGroup
	for i, n := range cl.nodes {
		wg.Go(func() { errs[i] = cl.startNode(ctx, n, true) })
	}
	wg.Wait()
	// One line: the first node's error; the others go to the log.
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
	if first != nil {
		return first
	}
	cl.lg.Info("ssh nodes ready", "nodes", len(cl.nodes), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// startNode writes n's config (first: the run directory and owner file
// too), starts redis-server daemonized and waits for it.
func (cl *Cluster) startNode(ctx context.Context, n *node, first bool) error {
	switch n.backend {
	case "etcd":
		return cl.startEtcd(ctx, n, first)
	case "zookeeper":
		return cl.startZooKeeper(ctx, n, first)
	case backendMariaDB:
		return cl.startMariaDB(ctx, n, first)
	case backendPostgres:
		return cl.startPostgres(ctx, n, first)
	}
	h := n.conn.Host
	bin := h.Binary("redis-server")
	var script strings.Builder
	if first {
		check := fmt.Sprintf("command -v %s >/dev/null || { echo 'no %s on the host (install it, or give its path under binaries: in the inventory)' >&2; exit 3; }\n", Quote(bin), bin)
		if err := cl.prepare(ctx, n, check); err != nil {
			return err
		}
	}
	n.mu.Lock()
	env := n.env
	n.mu.Unlock()
	start := Quote(bin)
	if len(env) > 0 {
		start = "env " + quoteAll(env) + " " + start
	}
	if !first {
		// A restart right after a kill: the killed server's listening
		// socket can outlive the wait for its process on a loaded host,
		// and the new server would fail to listen. Wait, up to 10 s, for
		// no socket to listen on the port (/proc/net/tcp: local port in
		// hex, state 0A).
		fmt.Fprintf(&script, "i=0; while grep -q ':%04X 00000000:0000 0A' /proc/net/tcp && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n", redisPort)
	}
	fmt.Fprintf(&script, "cat > %s/redis.conf <<'EOF'\n%sEOF\n", Quote(n.dir), cl.redisConf(n))
	fmt.Fprintf(&script, "rm -f %[1]s/redis.pid; %[2]s %[1]s/redis.conf </dev/null >>%[1]s/stdout.log 2>&1\n", Quote(n.dir), start)
	// Wait for the pid file the daemonized server writes.
	// A server that wrote none says why in its log: its last line is the
	// error.
	fmt.Fprintf(&script, "i=0; while [ ! -s %[1]s/redis.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "+
		"[ -s %[1]s/redis.pid ] || { echo \"redis-server wrote no pid file: $(tail -n 1 %[1]s/redis.log 2>/dev/null)\" >&2; exit 1; }; cat %[1]s/redis.pid\n", Quote(n.dir))
	out, err := n.conn.Run(ctx, script.String())
	if err != nil {
		return fmt.Errorf("node %s on %s: %w", n.name, h.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		return fmt.Errorf("node %s on %s: redis-server wrote no pid file (see %s/redis.log on the host)", n.name, h.Name, n.dir)
	}
	n.mu.Lock()
	n.pid = pid
	n.mu.Unlock()
	cl.lg.Info("ssh node started", "node", n.name, "host", h.Name, "pid", pid, "dir", n.dir)
	return waitPing(ctx, n.addr())
}

// prepare runs the shell command check on n's host (it says what the host
// lacks, on stderr), makes n's directory with its data directory and the
// run's owner file, and, when the run moves clocks, installs the clock
// shim for n (a host that cannot preload it leaves the reason in
// ClockReason).
func (cl *Cluster) prepare(ctx context.Context, n *node, check string) error {
	h := n.conn.Host
	script := check + fmt.Sprintf("mkdir -p %s/data && printf %%s %s > %s/owner\n", Quote(n.dir), Quote(ownerLine()), Quote(path.Dir(n.dir)))
	if _, err := n.conn.Run(ctx, script); err != nil {
		return fmt.Errorf("node %s on %s: %w", n.name, h.Name, err)
	}
	if cl.opts.ClockShim == "" || n.backend == "etcd" {
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

// redisConf renders n's redis.conf.
func (cl *Cluster) redisConf(n *node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by locktest for node %s of run %s.\n", n.name, cl.opts.RunID)
	fmt.Fprintf(&b, "port %d\nbind 0.0.0.0\nprotected-mode no\nsave \"\"\n", redisPort)
	fmt.Fprintf(&b, "dir %s/data\n", n.dir)
	fmt.Fprintf(&b, "logfile %s/redis.log\n", n.dir)
	fmt.Fprintf(&b, "daemonize yes\npidfile %s/redis.pid\n", n.dir)
	switch cl.opts.Persistence {
	case PersistenceEverysec, PersistenceAlways:
		fmt.Fprintf(&b, "appendonly yes\nappendfsync %s\n", cl.opts.Persistence)
	default:
		b.WriteString("appendonly no\n")
	}
	return b.String()
}

// waitPing polls addr until Redis answers PING with PONG.
func waitPing(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		if last = ping(ctx, addr); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis %s not ready after %s: %v", addr, readyTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

func (cl *Cluster) find(name string) (*node, error) {
	for _, n := range cl.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("ssh: no node %s", name)
}

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

// Kill sends SIGKILL to the node's server and waits until it is gone.
func (cl *Cluster) Kill(ctx context.Context, cn clusters.Node) error {
	n, err := cl.find(cn.Name)
	if err != nil {
		return err
	}
	pid, err := n.signal(ctx, "KILL")
	if err != nil {
		return err
	}
	if _, err := n.conn.Run(ctx, fmt.Sprintf("i=0; while [ -e /proc/%d ] && [ \"$(awk '{print $3}' /proc/%d/stat 2>/dev/null)\" != Z ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done", pid, pid)); err != nil {
		return err
	}
	n.mu.Lock()
	n.pid = 0
	n.mu.Unlock()
	return nil
}

// Restart starts the node's server again in the same directory: with
// persistence on, it reloads its append-only file.
func (cl *Cluster) Restart(ctx context.Context, cn clusters.Node) error {
	n, err := cl.find(cn.Name)
	if err != nil {
		return err
	}
	return cl.startNode(ctx, n, false)
}

// Pause stops the node's server with SIGSTOP and waits until the host's
// kernel shows it stopped.
func (cl *Cluster) Pause(ctx context.Context, cn clusters.Node) error {
	n, err := cl.find(cn.Name)
	if err != nil {
		return err
	}
	pid, err := n.signal(ctx, "STOP")
	if err != nil {
		return err
	}
	_, err = n.conn.Run(ctx, fmt.Sprintf("i=0; until [ \"$(awk '{print $3}' /proc/%d/stat)\" = T ] || [ $i -ge 100 ]; do sleep 0.02; i=$((i+1)); done", pid))
	return err
}

// Resume continues the node's server with SIGCONT.
func (cl *Cluster) Resume(ctx context.Context, cn clusters.Node) error {
	n, err := cl.find(cn.Name)
	if err != nil {
		return err
	}
	_, err = n.signal(ctx, "CONT")
	return err
}

// Stop kills every server the cluster started (by pid, after SIGCONT so
// a paused one dies too), waits for each to go, and removes the run's
// directory on each host. It is idempotent.
func (cl *Cluster) Stop(ctx context.Context) error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range cl.nodes {
		wg.Go(func() {
			n.mu.Lock()
			running := n.pid != 0
			n.mu.Unlock()
			if !running {
				return
			}
			n.signal(ctx, "CONT")
			if err := cl.Kill(ctx, clusters.Node{Name: n.name}); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CollectLogs copies each node's log (redis.log, etcd.log) from its host
// into dir as <node>.log.
func (cl *Cluster) CollectLogs(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, n := range cl.nodes {
		log := "/" + map[string]string{"redis": "redis", "etcd": "etcd", "zookeeper": "zookeeper", backendMariaDB: "mariadb", backendPostgres: "postgres"}[n.backend] + ".log"
		out, err := n.conn.Run(ctx, "cat "+Quote(n.dir+log))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, n.name+".log"), []byte(out), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveRunDirs removes the run's directory from every host of conns.
func RemoveRunDirs(ctx context.Context, conns []*Conn, runID string) error {
	var errs []error
	for _, c := range conns {
		if _, err := c.Run(ctx, "rm -rf "+Quote(RunDir(c.Host, runID))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
