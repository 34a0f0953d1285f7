package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// Timings of the etcd provider.
const (
	// etcdReadyTimeout bounds the wait for started members to report a
	// leader when the caller's context has no earlier deadline.
	etcdReadyTimeout = 20 * time.Second
	// etcdStatusTimeout bounds one status request of the readiness check.
	etcdStatusTimeout = 300 * time.Millisecond
)

// EtcdOptions configures a local etcd cluster. The zero value is not usable:
// Dir is required.
type EtcdOptions struct {
	// Nodes is the number of members, named n1..nN; 0 means 3.
	Nodes int
	// Dir is the run directory. Member n gets Dir/nodes/<n>/ holding its data
	// directory data/ and its log etcd.log (etcd's JSON lines, and the
	// member process's own stderr). A relative Dir is made absolute when the
	// cluster is created.
	Dir string
	// Exe is the command that runs locktest's node programs; the member is
	// started as Exe followed by "node etcd" and its flags. Empty means this
	// executable.
	Exe []string
	// ExeEnv is added to the environment of every member process.
	ExeEnv []string
	// ClientPorts optionally fixes the client port of each member, in node
	// order; a missing or zero entry means a free port picked at the first
	// start. A fixed port that is in use makes Start fail.
	ClientPorts []int
	// TickMs and ElectionMs are the raft heartbeat interval and election
	// timeout; 0 means backend.DefaultEtcdTiming's.
	TickMs, ElectionMs int
	// Hosts optionally places member i on Hosts[i] (its address and network
	// namespace); a missing entry is loopback in the driver's namespace.
	// Inside a namespace of its own a member uses ports 2379 and 2380.
	Hosts []Host
	// NodeEnv, if set, returns extra environment for a member's process.
	NodeEnv func(node string) []string
	// Logger receives one record per member start, exit, kill, pause and
	// resume, with the keys node, pid and addr; nil discards them.
	Logger *slog.Logger
}

func init() {
	Register("etcd", func(o Options) (clusters.Cluster, error) {
		eo := EtcdOptions{Nodes: o.Nodes, Dir: o.Dir, Exe: o.Exe, ExeEnv: o.ExeEnv, Hosts: o.Hosts,
			NodeEnv: o.NodeEnv, Logger: o.Logger}
		t, err := backend.ParseEtcdParams(o.Params)
		if err != nil {
			return nil, fmt.Errorf("local %w", err)
		}
		eo.TickMs, eo.ElectionMs = t.TickMs, t.ElectionMs
		return NewEtcd(eo)
	})
}

// Etcd is a cluster of etcd members, each a `locktest node etcd` process
// embedding the etcd server, with its own ports, data directory and log. It
// implements clusters.Cluster, Killer, Pauser and LogCollector; its nodes
// have Role "" and Addr the member's client address, and Role asks a member
// whether it is the leader now. Its methods are safe for concurrent use;
// each but Role holds the cluster's lock for its whole duration.
type Etcd struct {
	exe                []string
	exeEnv             []string
	nodeEnv            func(node string) []string
	tickMs, electionMs int

	nodeSet[*etcdNode]
	// bootstrapped is set once the members have formed their cluster: from
	// then on their data directories hold it, and their ports are fixed.
	bootstrapped bool
}

// etcdNode is one member's fixed paths and ports and its current process.
type etcdNode struct {
	member
	dataDir    string
	clientPort int // 0 until the first start picks one
	peerPort   int
	fixed      bool // client port given by the user
}

func (n *etcdNode) addr() string {
	if n.clientPort == 0 {
		return ""
	}
	return n.host.Addr(n.clientPort)
}

func (n *etcdNode) peerURL() string { return "http://" + n.host.Addr(n.peerPort) }

// NewEtcd checks opts and returns a cluster that has not started yet. It
// fails if the node program cannot be found.
func NewEtcd(opts EtcdOptions) (*Etcd, error) {
	ms, ports, err := layout{kind: "local etcd", opts: "EtcdOptions", nodes: opts.Nodes, def: 3, ports: opts.ClientPorts,
		portWord: "client ports", hosts: opts.Hosts, dir: opts.Dir, logName: "etcd.log"}.members()
	if err != nil {
		return nil, err
	}
	if opts.TickMs == 0 {
		opts.TickMs = backend.DefaultEtcdTiming.TickMs
	}
	if opts.ElectionMs == 0 {
		opts.ElectionMs = backend.DefaultEtcdTiming.ElectionMs
	}
	if err := (backend.EtcdTiming{TickMs: opts.TickMs, ElectionMs: opts.ElectionMs}).Check(); err != nil {
		return nil, fmt.Errorf("local %w", err)
	}
	exe := opts.Exe
	if len(exe) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("local etcd: find this executable to run the etcd members: %w", err)
		}
		exe = []string{self}
	}
	bin, err := exec.LookPath(exe[0])
	if err != nil {
		return nil, fmt.Errorf("local etcd: node program %q not found or not executable: %v", exe[0], errors.Unwrap(err))
	}
	exe = append([]string{bin}, exe[1:]...)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Etcd{exe: exe, exeEnv: opts.ExeEnv, nodeEnv: opts.NodeEnv, tickMs: opts.TickMs, electionMs: opts.ElectionMs}
	e.nodeSet = nodeSet[*etcdNode]{kind: "local etcd", log: log,
		restart: func(ctx context.Context, n *etcdNode) error {
			if !e.bootstrapped {
				return fmt.Errorf("local etcd: restart %s: the cluster was never started", n.name)
			}
			return e.startNodes(ctx, []*etcdNode{n})
		}}
	for i, m := range ms {
		e.nodes = append(e.nodes, &etcdNode{member: m, dataDir: filepath.Join(m.dir, "data"), clientPort: ports[i], fixed: ports[i] != 0})
	}
	return e, nil
}

// Role asks the member what it is now, "leader" or "follower" (backend.EtcdRole);
// a member that is down, cut off or in an election is an error. It
// implements clusters.RoleReader, for faults pinned to the leader.
func (e *Etcd) Role(ctx context.Context, node clusters.Node) (string, error) {
	return e.ask(ctx, node, backend.EtcdRole)
}

// Roles returns the roles any member can have: leader and follower.
func (e *Etcd) Roles(clusters.Node) []string { return backend.EtcdRoles() }

// Start starts every member that is not running and returns once each of
// them answers a status request naming a leader. The first start forms the
// cluster; later starts rejoin it from the data directories, on the same
// ports. If a member fails, Start stops the members it started and returns a
// one-line error naming the member and its log. When the first start loses
// an automatically picked port to another process, it starts the whole
// cluster again on fresh ports, up to three times.
func (e *Etcd) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for attempt := 1; ; attempt++ {
		if err := e.pickPorts(); err != nil {
			return err
		}
		err := e.startNodes(ctx, e.nodes)
		if err == nil {
			e.bootstrapped = true
			return nil
		}
		var ne *etcdNodeError
		if e.bootstrapped || attempt == startAttempts || !errors.As(err, &ne) || !ne.inUse || ne.node.fixed {
			return err
		}
		e.log.Warn("port taken, retrying the cluster on other ports", "node", ne.node.name)
		for _, n := range e.nodes {
			if err := os.RemoveAll(n.dataDir); err != nil {
				return fmt.Errorf("local etcd: node %s: %w", n.name, err)
			}
			if !n.fixed {
				n.clientPort = 0
			}
			n.peerPort = 0
		}
	}
}

// pickPorts gives every member without ports its ports. e.mu must be held.
func (e *Etcd) pickPorts() error {
	for _, n := range e.nodes {
		if n.clientPort == 0 {
			p, err := n.host.port(2379)
			if err != nil {
				return fmt.Errorf("local etcd: node %s: %w", n.name, err)
			}
			n.clientPort = p
		}
		if n.peerPort == 0 {
			p, err := n.host.port(2380)
			if err != nil {
				return fmt.Errorf("local etcd: node %s: %w", n.name, err)
			}
			n.peerPort = p
		}
	}
	return nil
}

// startNodes starts those of ns that are not running and waits until each
// answers with a leader; on failure it kills those it started. e.mu must be
// held.
func (e *Etcd) startNodes(ctx context.Context, ns []*etcdNode) error {
	type started struct {
		n   *etcdNode
		p   *proc
		off int64
	}
	var ss []started
	fail := func(err error) error {
		for _, s := range ss {
			s.p.kill()
			if s.n.proc == s.p {
				s.n.proc = nil
			}
		}
		return err
	}
	for _, n := range ns {
		if n.proc.running() {
			continue
		}
		if n.fixed && n.host.NetNS == "" && !portFree(n.clientPort) {
			return fail(&etcdNodeError{node: n, inUse: true,
				msg: fmt.Sprintf("client port %d on 127.0.0.1 is in use", n.clientPort)})
		}
		p, off, err := e.spawn(n)
		if err != nil {
			return fail(&etcdNodeError{node: n, msg: fmt.Sprintf("start %s: %v", e.exe[0], err)})
		}
		ss = append(ss, started{n, p, off})
		if !e.bootstrapped {
			// A new member asks its peers whether it joined already, and
			// waits a second for each peer whose port is open but not yet
			// served. Starting the members one after the other, each once
			// the one before serves its peers, spares that wait.
			waitPeerServing(ctx, n.peerURL(), p)
		}
	}
	if len(ss) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, etcdReadyTimeout)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: e.endpoints(), DialTimeout: etcdStatusTimeout, Logger: zap.NewNop()})
	if err != nil {
		return fail(fmt.Errorf("local etcd: readiness client: %w", err))
	}
	defer c.Close()
	procs := make([]*proc, len(ss))
	for i, s := range ss {
		procs[i] = s.p
	}
	for _, s := range ss {
		err := waitEtcdReady(ctx, c, s.n.addr(), procs)
		if err == nil {
			continue
		}
		// Blame the first member that exited, if any did.
		for _, x := range ss {
			if x.p.running() {
				continue
			}
			tail := logTail(x.n.logPath, x.off, logTailLines)
			msg := fmt.Sprintf("exited during start-up (%s)", x.p.exitStatus())
			if last := lastLogLine(tail); last != "" {
				msg += ": " + last
			}
			return fail(&etcdNodeError{node: x.n, msg: msg,
				inUse: strings.Contains(strings.Join(tail, "\n"), "address already in use")})
		}
		return fail(&etcdNodeError{node: s.n, msg: "not ready: " + err.Error()})
	}
	for _, s := range ss {
		e.adopt(s.n, s.p)
	}
	return nil
}

// spawn starts n's member process, on the command line every provider's
// member has (backend.Kind.Launch), run by the node program e.exe. e.mu
// must be held.
func (e *Etcd) spawn(n *etcdNode) (*proc, int64, error) {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, 0, err
	}
	placed := func(m *etcdNode) backend.Placed {
		return backend.Placed{Name: m.name, IP: m.host.ip(), Ports: []int{m.clientPort, m.peerPort}}
	}
	p := backend.Placement{Layout: &backend.Layout{Backend: backend.Etcd, Etcd: backend.EtcdTiming{TickMs: e.tickMs, ElectionMs: e.electionMs}},
		Node: placed(n), Bind: n.host.ip(), Dir: n.dir, DataDir: n.dataDir, LogFile: n.logPath, NodeProgram: e.exe}
	for _, m := range e.nodes {
		p.Peers = append(p.Peers, placed(m))
	}
	l, err := backend.Kinds()[backend.KindEtcd].Launch(p)
	if err != nil {
		return nil, 0, err
	}
	env := append([]string{}, e.exeEnv...)
	if e.nodeEnv != nil {
		env = append(env, e.nodeEnv(n.name)...)
	}
	return spawnWith(spawnSpec{Bin: l.Argv[0], Args: l.Argv[1:], Dir: n.dir, LogPath: n.logPath, Env: env, Host: n.host})
}

// endpoints returns every member's client address. e.mu must be held.
func (e *Etcd) endpoints() []string {
	var out []string
	for _, n := range e.nodes {
		out = append(out, n.addr())
	}
	return out
}

// etcdNodeError is a member that could not start; its message is one line
// naming the member and its log.
type etcdNodeError struct {
	node  *etcdNode
	msg   string
	inUse bool // a port was taken
}

func (e *etcdNodeError) Error() string {
	return fmt.Sprintf("local etcd: node %s: %s (log: %s)", e.node.name, e.msg, e.node.logPath)
}

// lastLogLine returns the most telling of a member's last log lines as one
// short line: the member program's own error when it printed one, else the
// message and error of etcd's last JSON log record.
func lastLogLine(tail []string) string {
	for i := len(tail) - 1; i >= 0; i-- {
		if !strings.HasPrefix(tail[i], "{") {
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

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// waitPeerServing waits, for at most a second, until the member whose peer
// URL is peerURL answers HTTP on it, or p exits.
func waitPeerServing(ctx context.Context, peerURL string, p *proc) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	hc := http.Client{Timeout: 100 * time.Millisecond}
	for ctx.Err() == nil && p.running() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+"/version", nil)
		if err != nil {
			return
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEtcdReady polls the member at addr until it answers a status request
// that names a leader and reports no error, one of procs (the members
// starting with it) exits, or ctx ends.
func waitEtcdReady(ctx context.Context, c *clientv3.Client, addr string, procs []*proc) error {
	last := errors.New("no answer yet")
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, p := range procs {
			if !p.running() {
				return errors.New("a member exited")
			}
		}
		d := net.Dialer{Timeout: etcdStatusTimeout}
		if conn, err := d.DialContext(ctx, "tcp", addr); err != nil {
			last = err
		} else {
			conn.Close()
			sctx, cancel := context.WithTimeout(ctx, etcdStatusTimeout)
			last = backend.EtcdStatusReady(sctx, c, addr)
			cancel()
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}
