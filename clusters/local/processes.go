package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/durable"
	"github.com/locktest/locktest/internal/procfs"
)

// Processes is the local provider's cluster of any backend whose nodes
// are all of kinds that backend.Kinds defines: each node runs from its
// kind's launch (backend.Kind.Launch) as a process of this host (in its
// Host's network namespace, when it has one), and the cluster is formed
// as every provider forms it (backend.Roster.Form: a Sentinel set's
// replicas and sentinels, a Redis Cluster's creation). It has the process
// control every local backend shares (nodeSet), reads roles and targets as
// the backend's definition does, and needs no code of a backend's own: a
// backend written in clusters/backend runs here as it is. New uses it for
// a backend that has no node type of its own here. Its methods are safe
// for concurrent use.
type Processes struct {
	// Cluster is the nodes as every provider runs them (their lock,
	// formation, roles and targets), over this provider's driver.
	*backend.Deployment[*kindNode]

	// kind names the backend in errors: "local redis".
	kind   string
	log    *slog.Logger
	nodes  []*kindNode
	layout backend.Layout
	opts   Options
	exe    []string
	// powerWhy says why the nodes' power cannot be cut ("" when it can):
	// their syncs are not recorded.
	powerWhy string
	// bins are the host programs the launches run, by the names they
	// give them, as found here (hostProgram); creds the users that kinds
	// which refuse root run as, by kind, when this process is root.
	bins  map[string]string
	creds map[string]*syscall.Credential
}

var (
	_ fullCluster             = (*Processes)(nil)
	_ clusters.RoleReader     = (*Processes)(nil)
	_ clusters.Targeter       = (*Processes)(nil)
	_ clusters.GroupRestarter = (*Processes)(nil)
)

// kindNode is one node of a Processes: its kind and its ports.
type kindNode struct {
	member
	kind *backend.Kind
	// ports are the node's ports, in the order of its kind's; nil until
	// the first start picks them.
	ports []int
	// launched is set once the node has started: its files marked Once
	// exist, and its ports are its address for good.
	launched bool
	// syncs is the node's sync record, which the clock shim writes
	// (Options.TrackSyncs); nil when it keeps none.
	syncs *durable.Record
}

// dataDir is the node's data directory, which a power cut cuts back.
func (n *kindNode) dataDir() string { return filepath.Join(n.dir, "data") }

func (n *kindNode) addr() string {
	if len(n.ports) == 0 {
		return ""
	}
	return n.host.Addr(n.ports[0])
}

// NewProcesses checks opts and returns a not yet started cluster of
// backend b, whose nodes must all be of kinds that backend.Kinds defines.
// It fails, naming what is missing and how to get it, when a program a
// node runs is not installed here.
func NewProcesses(b string, opts Options) (*Processes, error) {
	l, err := backend.NewLayout(b, opts.Nodes, opts.Params, ownParams[b]...)
	if err != nil {
		return nil, fmt.Errorf("local %w", err)
	}
	if opts.Persistence, err = backend.CheckPersistence(opts.Persistence); err != nil {
		return nil, fmt.Errorf("local %s: %w", b, err)
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("local %s: Options.Dir (the run directory) is required", b)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("local %s: %w", b, err)
	}
	exe := opts.Exe
	if len(exe) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("local %s: find this executable to run locktest's node program: %w", b, err)
		}
		exe = []string{self}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Processes{kind: "local " + b, log: log, layout: l, opts: opts, exe: exe, powerWhy: l.SyncRecordReason(),
		bins: map[string]string{}, creds: map[string]*syscall.Credential{}}
	if c.powerWhy == "" && !opts.TrackSyncs {
		c.powerWhy = noSyncRecords
	}
	for _, spec := range l.Nodes {
		if k, err := backend.KindOf(spec.Kind); err == nil && c.powerWhy == "" {
			if name := c.hostInstead(k); name != "" {
				c.powerWhy = fmt.Sprintf("its nodes run this host's %s (--cluster-opt %s=%s), which records nothing of what it syncs: only locktest's node program does", name, name, opts.Params[name])
			}
		}
	}
	for i, spec := range l.Nodes {
		k, err := backend.KindOf(spec.Kind)
		if err != nil {
			return nil, fmt.Errorf("local %s: node %s: %w", b, spec.Name, err)
		}
		nd := filepath.Join(dir, "nodes", spec.Name)
		n := &kindNode{member: member{name: spec.Name, dir: nd, logPath: filepath.Join(nd, k.Log), host: opts.host(i)}, kind: k}
		if c.powerWhy == "" {
			n.syncs = durable.NewRecord(filepath.Join(nd, syncRecordName))
		}
		c.nodes = append(c.nodes, n)
	}
	c.Deployment = backend.NewDeployment("local", l, c.nodes, driver{c})
	// A program, a file or a user a node needs and this host lacks is
	// reported now, before anything starts.
	for _, n := range c.nodes {
		var asked []string
		p := c.placement(n)
		p.Bin = func(program string) string { asked = append(asked, program); return program }
		l, err := n.kind.Launch(p)
		if err != nil {
			return nil, fmt.Errorf("local %s: node %s: %w", b, n.name, err)
		}
		for _, name := range asked {
			if _, done := c.bins[name]; done {
				continue
			}
			path, err := hostProgram(name, opts.Params[name])
			if err != nil {
				return nil, fmt.Errorf("local %s: node %s: %v: run `make setup` (%s)", b, n.name, err, n.kind.Install)
			}
			c.bins[name] = path
		}
		for _, f := range l.Needs {
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("local %s: %s not found: run `make setup` (%s)", b, f, n.kind.Install)
			}
		}
		if _, done := c.creds[n.kind.Name]; !done {
			cred, err := credOf(n.kind.RunAs)
			if err != nil {
				return nil, fmt.Errorf("local %s: node %s: %w", b, n.name, err)
			}
			c.creds[n.kind.Name] = cred
		}
	}
	return c, nil
}

// hostInstead returns the host program that the nodes of kind k run in
// place of locktest's node program, "" when they run that: a kind of
// locktest's node program (backend.NodeProgram) whose Programs name one
// that the run gives the path of as its cluster param
// (backend.HostProgram.Param), as --cluster-opt etcd=/usr/bin/etcd runs
// Debian's etcd. Its launch then sees no node program, and runs the host's
// server as it runs it where there is none.
func (c *Processes) hostInstead(k *backend.Kind) string {
	if k.Program != backend.NodeProgram {
		return ""
	}
	for _, p := range k.Programs {
		if p.Param && c.opts.Params[p.Name] != "" {
			return p.Name
		}
	}
	return ""
}

// bin is where this host has the program a launch names (hostProgram, at
// NewProcesses); the name itself for one not looked up.
func (c *Processes) bin(program string) string {
	if p, ok := c.bins[program]; ok {
		return p
	}
	return program
}

// placement is where n is, as its kind's launch takes it: its host's
// address with its ports (each kind's first ports until the start picks
// them), its directory with the data directory inside, its log, this
// host's programs, locktest's node program, Debian's ZooKeeper jars.
func (c *Processes) placement(n *kindNode) backend.Placement {
	p := backend.Placement{Layout: &c.layout, Node: c.placed(n), Bind: n.host.ip(), Dir: n.dir, DataDir: n.dataDir(),
		Bin: c.bin, NodeProgram: c.exe, User: "root", Socket: socketPath(n.dir),
		ClassPath: backend.ZooKeeperClassPath(backend.DebianJarDir), Persistence: c.opts.Persistence,
		Header: "Written by locktest for node " + n.name + "; rewritten at each start but where its server rewrites it."}
	if c.hostInstead(n.kind) != "" {
		p.NodeProgram = nil
	}
	if !n.kind.Stdout {
		p.LogFile = n.logPath
	}
	if len(filepath.Join(n.dir, ".s.PGSQL.65535.lock")) < 100 {
		p.SocketDir = n.dir // else none: the clients use TCP
	}
	for _, m := range c.nodes {
		p.Peers = append(p.Peers, c.placed(m))
	}
	return p
}

// placed is n at its host's address with its ports.
func (c *Processes) placed(n *kindNode) backend.Placed {
	ports := n.ports
	if len(ports) == 0 {
		for _, p := range n.kind.Ports {
			ports = append(ports, p.Base)
		}
	}
	return backend.Placed{Name: n.name, IP: n.host.ip(), Ports: ports}
}

// startStopped starts, all at once, those of ns that are not running
// (startGroup). The cluster's lock must be held.
func (c *Processes) startStopped(ctx context.Context, ns []*kindNode) error {
	var stopped []*kindNode
	for _, n := range ns {
		if !n.proc.running() {
			stopped = append(stopped, n)
		}
	}
	return c.startGroup(ctx, stopped)
}

// errPortTaken is a start that failed because a node's port was taken.
var errPortTaken = errors.New("a port was taken")

// startGroup starts the nodes ns all at once and returns once each serves,
// by its kind's readiness query, or the first failure, having killed the
// nodes of ns it started. Nodes that never started get their ports now
// (retrying, on new ports, a start whose port another process took
// meanwhile); a node that has started keeps its own: its clients and
// peers know it by its address. The cluster's lock must be held.
func (c *Processes) startGroup(ctx context.Context, ns []*kindNode) error {
	for attempt := 1; ; attempt++ {
		err := c.launchGroup(ctx, ns)
		if !errors.Is(err, errPortTaken) || attempt == startAttempts || slices.ContainsFunc(ns, func(n *kindNode) bool { return n.launched }) {
			return err
		}
		c.log.Warn("port taken, retrying the nodes on other ports", "err", err)
		for _, n := range ns {
			n.info.Lock()
			n.ports = nil
			n.info.Unlock()
			if err := os.RemoveAll(n.dataDir()); err != nil {
				return fmt.Errorf("%s: node %s: %w", c.kind, n.name, err)
			}
		}
	}
}

// launchGroup is one attempt of startGroup.
func (c *Processes) launchGroup(ctx context.Context, ns []*kindNode) error {
	for _, n := range ns {
		if err := c.pickPorts(n); err != nil {
			return err
		}
	}
	type started struct {
		n   *kindNode
		p   *proc
		off int64
	}
	var ss []started
	killAll := func() {
		for _, s := range ss {
			driver{c}.killProc(s.n, s.p)
		}
	}
	fail := func(err error) error {
		killAll()
		return err
	}
	for _, n := range ns {
		l, err := n.kind.Launch(c.placement(n))
		if err != nil {
			return fail(fmt.Errorf("%s: node %s: %w", c.kind, n.name, err))
		}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return fail(fmt.Errorf("%s: node %s: %w", c.kind, n.name, err))
		}
		if err := writeLaunch(l, !n.launched); err != nil {
			return fail(fmt.Errorf("%s: node %s: %w", c.kind, n.name, err))
		}
		if l.Init != nil {
			if err := c.initData(ctx, n, l.Init); err != nil {
				return fail(err)
			}
		}
		env := c.opts.nodeEnv(n.name)
		if n.kind.Program == backend.NodeProgram && c.hostInstead(n.kind) == "" {
			env = append(slices.Clone(c.opts.ExeEnv), env...)
		}
		if n.syncs != nil {
			env = append(slices.Clip(env), durable.EnvFile+"="+n.syncs.Path())
		}
		p, off, err := spawnWith(spawnSpec{Bin: l.Argv[0], Args: l.Argv[1:], Dir: n.dir, LogPath: n.logPath, Env: env, Host: n.host, Cred: c.creds[n.kind.Name]})
		if err != nil {
			return fail(fmt.Errorf("%s: node %s: start %s: %w", c.kind, n.name, l.Argv[0], err))
		}
		ss = append(ss, started{n, p, off})
		if n.kind.PeerServing != nil && !n.launched {
			waitPeerServing(ctx, n.kind, n.host.Addr(n.ports[1]), p)
		}
	}
	// The nodes of an ensemble serve only once a quorum runs: they are
	// waited for together, and the first that fails ends the wait of the
	// others.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() {
			rctx, rcancel := context.WithTimeout(wctx, s.n.kind.ReadyTimeout)
			defer rcancel()
			errs[i] = backend.WaitReady(rctx, s.n.kind.Name, s.n.addr(), 10*time.Millisecond, func() error {
				if !s.p.running() {
					return errors.New("process exited")
				}
				return nil
			})
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// The node to blame is one that exited (its log says why), else the
	// first that did not get ready.
	blame := -1
	for i, s := range ss {
		if !s.p.running() {
			blame = i
			break
		}
		if errs[i] != nil && blame < 0 {
			blame = i
		}
	}
	if blame < 0 {
		for _, s := range ss {
			s.n.launched = true
			driver{c}.adopt(s.n, s.p)
		}
		return nil
	}
	s := ss[blame]
	exited := !s.p.running()
	killAll()
	// The start's whole log is read for a port taken: a JVM's
	// BindException stands above a stack trace longer than a tail.
	if exited && portTaken(logTail(s.n.logPath, s.off, 1000)) {
		return fmt.Errorf("%s: node %s (%s): %w (log: %s)", c.kind, s.n.name, s.n.addr(), errPortTaken, s.n.logPath)
	}
	what := fmt.Sprintf("not ready: %v", errs[blame])
	if exited {
		what = fmt.Sprintf("exited during start-up (%s)", s.p.exitStatus())
	}
	if last := lastLogLine(logTail(s.n.logPath, s.off, logTailLines)); last != "" {
		what += ": " + last
	}
	c.log.Warn("node did not start", "node", s.n.name, "pid", s.p.pid, "addr", s.n.addr(), "why", what)
	return fmt.Errorf("%s: node %s (pid %d, %s) %s (log: %s)", c.kind, s.n.name, s.p.pid, s.n.addr(), what, s.n.logPath)
}

// portTaken reports whether the log lines of a node's start say that one
// of its ports was taken ("Address already in use", a JVM's
// java.net.BindException; "address already in use", Go's), wherever they
// say it.
func portTaken(lines []string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(strings.ToLower(l), "address already in use") })
}

// lastLogLine returns the most telling of a node's last log lines as one
// short line: the last that is not a JSON log record (a program's own
// error), else the message and error of the last JSON record (etcd's).
func lastLogLine(tail []string) string {
	for i := len(tail) - 1; i >= 0; i-- {
		if strings.TrimSpace(tail[i]) != "" && !strings.HasPrefix(tail[i], "{") {
			return clip(tail[i])
		}
	}
	if len(tail) == 0 {
		return ""
	}
	var rec struct {
		Msg   string `json:"msg"`
		Error string `json:"error"`
	}
	last := tail[len(tail)-1]
	if json.Unmarshal([]byte(last), &rec) != nil || rec.Msg == "" {
		return clip(last)
	}
	if rec.Error != "" {
		return clip(rec.Msg + ": " + rec.Error)
	}
	return clip(rec.Msg)
}

// clip makes s one line of at most 300 bytes.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// pickPorts gives n its ports, unless it has them: each of its kind's
// ports inside a namespace of its own, else free loopback ports. A Redis
// Cluster node's bus port (the ports its first port brings,
// backend.Layout.MorePorts) must be ports too.
func (c *Processes) pickPorts(n *kindNode) error {
	if len(n.ports) > 0 {
		return nil
	}
	var ports []int
	for i, kp := range n.kind.Ports {
		for {
			p, err := n.host.port(kp.Base)
			if err != nil {
				return fmt.Errorf("%s: node %s: %w", c.kind, n.name, err)
			}
			if i == 0 && slices.ContainsFunc(c.layout.MorePorts(p), func(q int) bool { return q > 65535 }) {
				continue
			}
			ports = append(ports, p)
			break
		}
	}
	n.info.Lock()
	n.ports = ports
	n.info.Unlock()
	return nil
}

// waitPeerServing waits, for at most a second, until the node at peer,
// its peer address, serves its peers (backend.Kind.PeerServing), or its
// process p exits: the next node of a new cluster starts then.
func waitPeerServing(ctx context.Context, k *backend.Kind, peer string, p *proc) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for ctx.Err() == nil && p.running() {
		if k.PeerServing(ctx, peer) == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kindGroup is how the driver stops, kills, pauses and resumes a node
// that is a tree of processes (backend.Kind.Several) whole, and removes
// what a dead tree leaves outside its files (removeLeftovers). Each runs
// with the cluster's lock held; stop and kill get the process the node
// had, which the driver has already forgotten.
type kindGroup struct{ c *Processes }

// stop asks the server to stop (its kind's stop signal, SIGTERM by
// default), thaws it and every process below it so that a paused tree
// hears it, waits up to the grace, then kills what is left.
func (g kindGroup) stop(ctx context.Context, n *kindNode, p *proc) {
	if p.running() {
		p.ended.Store(true)
		sig := n.kind.StopSignal
		if sig == 0 {
			sig = syscall.SIGTERM
		}
		_ = p.signal(sig)
		for _, k := range descendants(p.pid) {
			_ = syscall.Kill(k, syscall.SIGCONT)
		}
		_ = p.signal(syscall.SIGCONT)
		t := time.NewTimer(treeStopGrace)
		graceful := true
		select {
		case <-p.done:
		case <-t.C:
			graceful = false
		case <-ctx.Done():
			graceful = false
		}
		t.Stop()
		g.c.log.Info("node stopped", "node", n.name, "pid", p.pid, "addr", n.addr(), "graceful", graceful)
	}
	killTree(p) // whatever is left of the tree: the backends of a crashed postmaster
	removeLeftovers(n)
}

func (g kindGroup) kill(n *kindNode, p *proc) {
	killTree(p)
	removeLeftovers(n)
}

// pause stops a tree's server first, so that it starts no process while
// the others are being stopped, then each process below it, and waits
// until the kernel reports each stopped (one that exited meanwhile runs
// nothing).
func (g kindGroup) pause(n *kindNode) error {
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

// resume continues every process below a tree's server, then the server.
func (g kindGroup) resume(n *kindNode) error {
	for _, pid := range descendants(n.proc.pid) {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := n.proc.signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// initData makes n's data directory with the launch's init (as the
// kind's user, when it has one and this process is root) when it has
// none yet, and appends what the init's files need.
func (c *Processes) initData(ctx context.Context, n *kindNode, in *backend.Init) error {
	data := n.dataDir()
	if fi, err := os.Stat(data); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s: node %s: data directory %s is not a directory (log: %s)", c.kind, n.name, data, n.logPath)
	}
	cred := c.creds[n.kind.Name]
	if cred != nil {
		if err := os.Chown(n.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("%s: node %s: %w", c.kind, n.name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(data, in.Done)); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	off := int64(0)
	if fi, err := os.Stat(n.logPath); err == nil {
		off = fi.Size()
	}
	if err := runLogged(ctx, n.logPath, in.Argv[0], in.Argv[1:], in.Env, cred); err != nil {
		what := fmt.Sprintf("%s: %v", filepath.Base(in.Argv[0]), err)
		if last := lastLogLine(logTail(n.logPath, off, logTailLines)); last != "" {
			what += ": " + last
		}
		return fmt.Errorf("%s: node %s: %s (log: %s)", c.kind, n.name, what, n.logPath)
	}
	for _, f := range in.Append {
		fh, err := os.OpenFile(f.Path, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = fh.WriteString(f.Data)
			if cerr := fh.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("%s: node %s: %w", c.kind, n.name, err)
		}
	}
	return nil
}
