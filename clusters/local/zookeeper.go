package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// Timings and defaults of the ZooKeeper provider.
const (
	// zkDefaultNodes is the size of the ensemble when Options.Nodes is 0.
	zkDefaultNodes = backend.ZooKeeperDefaultNodes
	// zkReadyTimeout bounds the wait for a started peer to join a quorum
	// when the caller's context has no earlier deadline. Three JVMs start
	// at once, so on a loaded two-core machine this takes seconds.
	zkReadyTimeout = 60 * time.Second
)

// ZooKeeperOptions configures a local ZooKeeper ensemble. The zero value is
// not usable: Dir is required.
type ZooKeeperOptions struct {
	// Nodes is the number of peers, named n1..nN with myid 1..N; 0 means 3.
	// One peer runs standalone.
	Nodes int
	// ClientPorts optionally fixes the client port of each peer, in node
	// order; a missing or zero entry means a free port picked at the first
	// start (2181 inside a network namespace of its own). A fixed port in
	// use makes Start fail. Quorum and election ports are always picked
	// (2888 and 3888 inside a namespace).
	ClientPorts []int
	// Dir is the run directory. Peer n gets Dir/nodes/<n>/ holding zoo.cfg,
	// log4j.properties, zookeeper.log and the data directory data/ (with
	// myid). A relative Dir is made absolute when the cluster is created.
	Dir string
	// Hosts optionally places peer i on Hosts[i]; a missing entry is
	// loopback in the driver's namespace.
	Hosts []Host
	// NodeEnv, if set, returns extra environment for a peer's JVM (the
	// clock shim).
	NodeEnv func(node string) []string
	// TickTime is ZooKeeper's tickTime; 0 means backend.ZooKeeperDefaultTick. Session timeouts are
	// clamped by the server to [2·TickTime, 20·TickTime].
	TickTime time.Duration
	// Java is the java executable, a name looked up in PATH or a path;
	// empty means "java".
	Java string
	// JarDir holds zookeeper.jar, slf4j-log4j12.jar and log4j-1.2.jar;
	// empty means /usr/share/java.
	JarDir string
	// Logger receives one record per peer start, exit, kill, pause and
	// resume, with the keys node, pid and addr; nil discards them.
	Logger *slog.Logger
}

func init() {
	Register("zookeeper", func(o Options) (clusters.Cluster, error) {
		zo := ZooKeeperOptions{Nodes: o.Nodes, Dir: o.Dir, Hosts: o.Hosts, NodeEnv: o.NodeEnv, Logger: o.Logger}
		tick, err := backend.ParseZooKeeperParams(o.Params)
		if err != nil {
			return nil, fmt.Errorf("local %w", err)
		}
		zo.TickTime = tick
		return NewZooKeeper(zo)
	})
}

// ZooKeeper is an ensemble of ZooKeeper peers, each a JVM running the
// distribution's QuorumPeerMain with its own configuration, ports, log and
// data directory. It implements clusters.Cluster, Killer, Pauser and
// LogCollector. Its methods are safe for concurrent use; each holds the
// cluster's lock for its whole duration.
//
// ZooKeeper runs under the clock shim when NodeEnv supplies it, but the
// shim moves only CLOCK_REALTIME: the JVM measures session timeouts and
// heartbeats with System.nanoTime (CLOCK_MONOTONIC), so a clock bump does
// not expire sessions.
type ZooKeeper struct {
	java      string
	classPath string
	tick      time.Duration
	nodeEnv   func(node string) []string

	nodeSet[*zkNode]
}

// zkNode is one peer's fixed paths, its ports and its current process.
type zkNode struct {
	member
	dataDir string
	// client, quorum and election ports; 0 until the first start picks
	// them.
	client, quorum, election int
	fixed                    bool // client port given by the user
}

func (n *zkNode) addr() string {
	if n.client == 0 {
		return ""
	}
	return n.host.Addr(n.client)
}

// NewZooKeeper checks opts and returns an ensemble that has not started
// yet. It fails if java or the ZooKeeper jars are missing, so a missing
// installation is reported before any test begins.
func NewZooKeeper(opts ZooKeeperOptions) (*ZooKeeper, error) {
	ms, ports, err := layout{kind: "local zookeeper", opts: "ZooKeeperOptions", nodes: opts.Nodes, def: zkDefaultNodes, ports: opts.ClientPorts,
		portWord: "client ports", hosts: opts.Hosts, dir: opts.Dir, logName: "zookeeper.log"}.members()
	if err != nil {
		return nil, err
	}
	if opts.TickTime == 0 {
		opts.TickTime = backend.ZooKeeperDefaultTick
	}
	if opts.TickTime < time.Millisecond || opts.TickTime%time.Millisecond != 0 {
		return nil, fmt.Errorf("local zookeeper: tick time %v must be a positive whole number of milliseconds", opts.TickTime)
	}
	java, cp, err := findZooKeeper(opts.Java, opts.JarDir)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	z := &ZooKeeper{java: java, classPath: cp, tick: opts.TickTime, nodeEnv: opts.NodeEnv}
	z.nodeSet = nodeSet[*zkNode]{kind: "local zookeeper", log: log,
		restart: func(ctx context.Context, n *zkNode) error { return z.startNodes(ctx, []*zkNode{n}) }}
	for i, m := range ms {
		z.nodes = append(z.nodes, &zkNode{member: m, dataDir: filepath.Join(m.dir, "data"),
			client: ports[i], fixed: ports[i] != 0})
	}
	return z, nil
}

// findZooKeeper resolves the java executable and the class path.
func findZooKeeper(java, jarDir string) (string, string, error) {
	const setup = "run `make setup` (installs zookeeper and a Java runtime with apt-get on Debian/Ubuntu)"
	if java == "" {
		java = "java"
	}
	bin, err := exec.LookPath(java)
	if err != nil {
		return "", "", fmt.Errorf("local zookeeper: java (%s) not found or not executable: %s", java, setup)
	}
	if jarDir == "" {
		jarDir = backend.DebianJarDir
	}
	cp := backend.ZooKeeperClassPath(jarDir)
	for _, p := range strings.Split(cp, ":") {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("local zookeeper: ZooKeeper jar %s not found: %s", p, setup)
		}
	}
	return bin, cp, nil
}

// TickTime returns the ensemble's tickTime; the servers clamp session
// timeouts to [2·TickTime, 20·TickTime].
func (z *ZooKeeper) TickTime() time.Duration { return z.tick }

// Role is the peer's Mode now: leader, follower or standalone (for faults
// pinned to the leader).
func (z *ZooKeeper) Role(ctx context.Context, node clusters.Node) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return z.Mode(ctx, node)
}

// Roles returns the roles Role can answer for a peer: leader and follower
// in an ensemble, standalone for a single server.
func (z *ZooKeeper) Roles(clusters.Node) []string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return backend.ZooKeeperRoles(len(z.nodes))
}

// Mode asks the peer with the `srvr` four-letter command what it is:
// "leader", "follower" or "standalone". A peer that is up but not in a
// quorum is an error.
func (z *ZooKeeper) Mode(ctx context.Context, node clusters.Node) (string, error) {
	return z.ask(ctx, node, backend.ZooKeeperRole)
}

// Start starts every peer that is not running, all at once, and returns
// once each reports itself leader, follower or standalone through `srvr`.
// A peer keeps its ports across Stop and Start. If a peer fails to start,
// Start stops the peers it started itself and returns an error naming the
// peer and its log file, quoting the log's last lines.
func (z *ZooKeeper) Start(ctx context.Context) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	fresh := true // no peer runs: automatically picked ports may be changed
	var todo []*zkNode
	for _, n := range z.nodes {
		if n.proc.running() {
			fresh = false
			continue
		}
		todo = append(todo, n)
	}
	if len(todo) == 0 {
		return nil
	}
	for attempt := 1; ; attempt++ {
		err := z.startNodes(ctx, todo)
		if err == nil {
			return nil
		}
		var inUse *zkPortInUse
		if !errors.As(err, &inUse) || !fresh || inUse.fixed || attempt == startAttempts {
			return err
		}
		z.log.Warn("port taken, retrying the ensemble on other ports", "node", inUse.node, "port", inUse.port)
		for _, n := range z.nodes {
			n.quorum, n.election = 0, 0
			if !n.fixed {
				n.client = 0
			}
		}
	}
}

// zkPortInUse is a peer that could not bind one of its ports.
type zkPortInUse struct {
	node  string
	port  int    // the port, if known
	ports string // else the peer's ports, one of which is taken
	ip    string
	fixed bool // the user's client port: never replaced
}

func (e *zkPortInUse) Error() string {
	if e.port == 0 {
		return fmt.Sprintf("local zookeeper: node %s: one of its ports %s on %s is in use", e.node, e.ports, e.ip)
	}
	return fmt.Sprintf("local zookeeper: node %s: port %d on %s is in use", e.node, e.port, e.ip)
}

// startNodes picks missing ports, writes every peer's configuration (each
// names all peers) and starts the peers in todo at once, waiting until each
// serves. On failure none of todo is left running. z.mu must be held.
func (z *ZooKeeper) startNodes(ctx context.Context, todo []*zkNode) error {
	for _, n := range z.nodes {
		if err := z.pickPorts(n); err != nil {
			return err
		}
	}
	for _, n := range todo {
		if n.host.NetNS == "" {
			for _, p := range []int{n.client, n.quorum, n.election} {
				if !portFreeOn(n.host.ip(), p) {
					return &zkPortInUse{node: n.name, port: p, ip: n.host.ip(), fixed: n.fixed && p == n.client}
				}
			}
		}
		l, err := z.launch(n)
		if err == nil {
			err = writeLaunch(l, true)
		}
		if err != nil {
			return fmt.Errorf("local zookeeper: node %s: %w", n.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, zkReadyTimeout)
	defer cancel()
	// A peer that fails makes the others wait for a quorum in vain: the
	// first failure cancels the rest, and is the one reported.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	errs := make([]error, len(todo))
	var first sync.Once
	firstErr := -1
	var wg sync.WaitGroup
	for i, n := range todo {
		wg.Go(func() {
			if err := z.spawnNode(wctx, n); err != nil {
				errs[i] = err
				first.Do(func() { firstErr = i; wcancel() })
			}
		})
	}
	wg.Wait()
	if firstErr < 0 {
		return nil
	}
	for _, n := range todo {
		z.stopNode(context.Background(), n)
	}
	return errs[firstErr]
}

// pickPorts gives n the ports it has not got yet.
func (z *ZooKeeper) pickPorts(n *zkNode) error {
	for _, s := range []struct {
		p         *int
		preferred int
	}{{&n.client, 2181}, {&n.quorum, 2888}, {&n.election, 3888}} {
		if *s.p != 0 {
			continue
		}
		p, err := n.host.port(s.preferred)
		if err != nil {
			return fmt.Errorf("local zookeeper: node %s: %w", n.name, err)
		}
		*s.p = p
	}
	return nil
}

// launch returns n's launch, as every provider's peer has it
// (backend.Kind.Launch): its zoo.cfg listing every peer, its
// log4j.properties and myid, and the JVM's command line. Its log goes to
// standard output, which spawn appends to the peer's zookeeper.log
// together with anything the JVM itself prints.
func (z *ZooKeeper) launch(n *zkNode) (backend.Launch, error) {
	placed := func(m *zkNode) backend.Placed {
		return backend.Placed{Name: m.name, IP: m.host.ip(), Ports: []int{m.client, m.quorum, m.election}}
	}
	p := backend.Placement{Layout: &backend.Layout{Backend: backend.ZooKeeper, ZooKeeperTick: z.tick}, Node: placed(n),
		Bind: n.host.ip(), Dir: n.dir, DataDir: n.dataDir, ClassPath: z.classPath,
		Bin: func(string) string { return z.java }}
	for _, m := range z.nodes {
		p.Peers = append(p.Peers, placed(m))
	}
	return backend.Kinds()[backend.KindZooKeeper].Launch(p)
}

// spawnNode starts n's JVM and waits until it serves. On failure the
// process is gone when it returns, and the error names n and its log.
func (z *ZooKeeper) spawnNode(ctx context.Context, n *zkNode) error {
	var env []string
	if z.nodeEnv != nil {
		env = z.nodeEnv(n.name)
	}
	l, err := z.launch(n)
	if err != nil {
		return fmt.Errorf("local zookeeper: node %s: %w", n.name, err)
	}
	p, off, err := spawnWith(spawnSpec{Bin: l.Argv[0], Args: l.Argv[1:], Dir: n.dir, LogPath: n.logPath, Env: env, Host: n.host})
	if err != nil {
		return fmt.Errorf("local zookeeper: node %s: start %s: %w", n.name, z.java, err)
	}
	mode, werr := waitZKReady(ctx, n.addr(), p)
	if werr == nil {
		z.adopt(n, p, "mode", mode)
		return nil
	}
	exited := !p.running()
	p.kill()
	tail := logTail(n.logPath, off, logTailLines)
	quoted := quoteTail(n.logPath, tail)
	if quoted == "" {
		quoted = "; " + n.logPath + " is empty"
	}
	// A JVM's last lines are often a stack trace; its first error says
	// what went wrong. A port taken between its pick and the peer's bind
	// (another test package picks ports at the same moment) is a
	// BindException above a stack trace longer than the tail: the whole
	// log of this start is read for it.
	all := logTail(n.logPath, off, 500)
	if first := zkFirstError(all); first != "" && !slices.Contains(tail, first) {
		quoted = "; first error in " + n.logPath + ": " + first + quoted
	}
	if zkPortTaken(all) {
		return &zkPortInUse{node: n.name, ports: fmt.Sprintf("%d, %d, %d", n.client, n.quorum, n.election), ip: n.host.ip()}
	}
	if !exited && errors.Is(werr, context.Canceled) && ctx.Err() != nil {
		// Another peer failed first; its error is the one reported.
		return werr
	}
	return z.notStarted(n, p, exited, werr, quoted)
}

// zkFirstError returns the first line of lines logged at level ERROR.
func zkFirstError(lines []string) string {
	for _, l := range lines {
		if strings.Contains(l, " ERROR ") {
			return l
		}
	}
	return ""
}

// waitZKReady polls addr with `srvr` until the peer reports a mode, p
// exits, or ctx ends.
func waitZKReady(ctx context.Context, addr string, p *proc) (string, error) {
	last := errors.New("no answer yet")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if !p.running() {
			return "", errors.New("process exited")
		}
		mode, err := backend.ZooKeeperRole(ctx, addr)
		if err == nil {
			return mode, nil
		}
		last = err
		select {
		case <-p.done:
			return "", errors.New("process exited")
		case <-ctx.Done():
			return "", fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// zkPortTaken reports whether the log lines of a peer's start say that one
// of its ports was taken (java.net.BindException: Address already in
// use), wherever they say it: the stack trace below it is longer than the
// tail an error quotes.
func zkPortTaken(lines []string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "Address already in use") })
}
