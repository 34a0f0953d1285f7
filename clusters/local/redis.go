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
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/durable"
)

// Timings of the Redis provider.
const (
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 2 * time.Second
	// readyTimeout bounds the wait for a started node to answer PING when
	// the caller's context has no earlier deadline.
	readyTimeout = 10 * time.Second
	// startAttempts is how often a node whose port was picked automatically
	// is started on a fresh port after losing a race for the old one.
	startAttempts = 3
	// logTailLines is how many lines of a node's log a start-up error quotes.
	logTailLines = 8
)

// defaultRedisBinary is what RedisOptions.Binary defaults to.
const defaultRedisBinary = "redis-server"

// pickPort picks the port of a node that has none; tests replace it.
var pickPort = freePort

// errAddrInUse marks a node that could not bind its port.
var errAddrInUse = errors.New("address already in use")

// RedisOptions configures a local Redis cluster. The zero value is not
// usable: Dir is required.
type RedisOptions struct {
	// Nodes is the number of redis-server processes, named n1..nN; 0 means 1.
	// The nodes are independent masters: no replication between them.
	Nodes int
	// Ports optionally fixes the port of each node, in node order; a missing
	// or zero entry means a free port picked at start. A fixed port that is
	// in use makes Start fail; a picked port that is lost to a race is
	// replaced by another.
	Ports []int
	// Dir is the run directory. Node n gets Dir/nodes/<n>/ holding
	// redis.conf, redis.log and the data directory data/. A relative Dir is
	// made absolute when the cluster is created.
	Dir string
	// Binary is the redis-server executable: a name looked up in PATH or a
	// path; empty means "redis-server".
	Binary string
	// Persistence is backend.PersistenceOff (the default when empty),
	// PersistenceEverysec or PersistenceAlways.
	Persistence string
	// Hosts optionally places node i on Hosts[i] (its address and network
	// namespace); a missing entry is loopback in the driver's namespace.
	Hosts []Host
	// NodeEnv, if set, returns extra environment for a node's process (the
	// clock shim).
	NodeEnv func(node string) []string
	// Logger receives one record per node start, exit, kill, pause and
	// resume, with the keys node, pid and addr; nil discards them.
	Logger *slog.Logger
	// NamePrefix names the nodes <prefix>1..<prefix>N; "" means "n".
	NamePrefix string
	// ExtraConfig, if set, returns lines appended to a node's redis.conf
	// each time the file is written (replicaof, cluster-enabled, sentinel
	// monitor, ...). It is called with the cluster's lock held, after the
	// node's port is known.
	ExtraConfig func(node string) []string
	// SyncRecords makes each node record what it syncs into syncs.log in
	// its folder, which CutPower reads: the node's process gets
	// durable.EnvFile naming that file, and NodeEnv must preload the clock
	// shim, which writes it. Without it the cluster cannot cut power.
	SyncRecords bool
	// KeepConfig writes a node's redis.conf only at its first start; later
	// starts (Restart, Start after Stop) reuse the file as the node, or a
	// Redis Sentinel, last rewrote it (CONFIG REWRITE), as a deployed node
	// would. Without it the file is rewritten at every start.
	KeepConfig bool
}

func init() {
	Register("redis", func(o Options) (clusters.Cluster, error) {
		return NewRedis(RedisOptions{Nodes: o.Nodes, Dir: o.Dir, Persistence: o.Persistence,
			Hosts: o.Hosts, NodeEnv: o.NodeEnv, Logger: o.Logger, SyncRecords: o.TrackSyncs})
	})
}

// Redis is a set of redis-server processes on 127.0.0.1, one per node, each
// with its own port, configuration file, log and data directory. It
// implements clusters.Cluster, Killer, Pauser and LogCollector. Its methods
// are safe for concurrent use; each holds the cluster's lock for its whole
// duration, so a Stop waits for a Kill in progress, and the other way round.
type Redis struct {
	bin         string
	persistence string
	nodeEnv     func(node string) []string
	extraConfig func(node string) []string
	keepConfig  bool
	// powerWhy says why the cluster cannot cut power; "" when its nodes
	// record their syncs.
	powerWhy string

	nodeSet[*redisNode]
}

// redisNode is one node's fixed paths and its current process, if any.
type redisNode struct {
	member
	dataDir  string
	confPath string
	port     int  // 0 until the first start picks one
	fixed    bool // port given by the user: never replaced
	started  bool // it has started once: its redis.conf exists
	// syncs is the node's sync record (RedisOptions.SyncRecords); nil
	// when it keeps none.
	syncs *durable.Record
}

func (n *redisNode) addr() string {
	if n.port == 0 {
		return ""
	}
	return n.host.Addr(n.port)
}

// NewRedis checks opts and returns a cluster that has not started yet. It
// fails if the redis-server binary cannot be found, so a missing
// installation is reported before any test begins.
func NewRedis(opts RedisOptions) (*Redis, error) {
	ms, ports, err := layout{kind: "local redis", opts: "RedisOptions", nodes: opts.Nodes, def: 1, ports: opts.Ports, portWord: "ports",
		hosts: opts.Hosts, dir: opts.Dir, prefix: opts.NamePrefix, logName: "redis.log"}.members()
	if err != nil {
		return nil, err
	}
	if opts.Persistence, err = backend.CheckPersistence(opts.Persistence); err != nil {
		return nil, fmt.Errorf("local redis: %w", err)
	}
	bin, err := findRedisBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Redis{bin: bin, persistence: opts.Persistence, nodeEnv: opts.NodeEnv,
		extraConfig: opts.ExtraConfig, keepConfig: opts.KeepConfig}
	r.nodeSet = nodeSet[*redisNode]{kind: "local redis", log: log,
		restart: func(ctx context.Context, n *redisNode) error { return r.startNode(ctx, n, false) }}
	if !opts.SyncRecords {
		r.powerWhy = noSyncRecords
	}
	for i, m := range ms {
		n := &redisNode{member: m, dataDir: filepath.Join(m.dir, "data"),
			confPath: filepath.Join(m.dir, "redis.conf"), port: ports[i], fixed: ports[i] != 0}
		if opts.SyncRecords {
			n.syncs = durable.NewRecord(filepath.Join(m.dir, syncRecordName))
		}
		r.nodes = append(r.nodes, n)
	}
	return r, nil
}

// findRedisBinary resolves RedisOptions.Binary.
func findRedisBinary(bin string) (string, error) {
	if bin == "" {
		p, err := exec.LookPath(defaultRedisBinary)
		if err != nil {
			return "", errors.New("redis-server not found in PATH: run `make setup` (installs it with apt-get on Debian/Ubuntu)")
		}
		return p, nil
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("redis binary %q not found or not executable: %v", bin, errors.Unwrap(err))
	}
	return p, nil
}

// Start starts every node that is not running and returns once each answers
// PING. A node keeps its port across Stop and Start. If a node fails to
// start, Start stops the nodes it started itself and returns an error naming
// the node; an early exit is reported with the last lines of the node's log.
func (r *Redis) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var started []*redisNode
	for _, n := range r.nodes {
		if n.proc.running() {
			continue
		}
		if err := r.startNode(ctx, n, true); err != nil {
			for _, s := range started {
				r.stopNode(ctx, s)
			}
			return err
		}
		started = append(started, n)
	}
	return nil
}

// startNode writes n's configuration and starts it. When repick is set and
// n's port was picked automatically, a port lost to a race is replaced by a
// fresh one, up to startAttempts times. r.mu must be held.
func (r *Redis) startNode(ctx context.Context, n *redisNode, repick bool) error {
	if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
		return fmt.Errorf("local redis: node %s: %w", n.name, err)
	}
	if n.fixed && n.host.NetNS == "" && !portFree(n.port) {
		return fmt.Errorf("local redis: node %s: port %d on 127.0.0.1 is in use", n.name, n.port)
	}
	for attempt := 1; ; attempt++ {
		if n.port == 0 {
			p, err := n.host.port(6379)
			if err != nil {
				return fmt.Errorf("local redis: node %s: %w", n.name, err)
			}
			n.port = p
		}
		if !(r.keepConfig && n.started) {
			if err := os.WriteFile(n.confPath, []byte(r.config(n)), 0o644); err != nil {
				return fmt.Errorf("local redis: node %s: %w", n.name, err)
			}
		}
		err := r.spawnNode(ctx, n)
		if err == nil {
			n.started = true
			return nil
		}
		if !errors.Is(err, errAddrInUse) {
			return err
		}
		if n.fixed || !repick || attempt == startAttempts {
			return fmt.Errorf("local redis: node %s: port %d on %s is in use", n.name, n.port, n.host.ip())
		}
		r.log.Warn("port taken, retrying on another", "node", n.name, "addr", n.addr())
		n.port = 0
	}
}

// spawnNode starts n's process with its current configuration and waits
// until it answers PING. On failure the process is gone when it returns.
func (r *Redis) spawnNode(ctx context.Context, n *redisNode) error {
	var env []string
	if r.nodeEnv != nil {
		env = r.nodeEnv(n.name)
	}
	if n.syncs != nil {
		env = append(slices.Clip(env), durable.EnvFile+"="+n.syncs.Path())
	}
	p, off, err := spawnWith(spawnSpec{Bin: r.bin, Args: []string{n.confPath}, Dir: n.dir, LogPath: n.logPath, Env: env, Host: n.host})
	if err != nil {
		return fmt.Errorf("local redis: node %s: start %s: %w", n.name, r.bin, err)
	}
	werr := waitRedisReady(ctx, n.addr(), p)
	if werr == nil {
		r.adopt(n, p, "persistence", r.persistence)
		return nil
	}
	exited := !p.running()
	p.kill()
	tail := logTail(n.logPath, off, logTailLines)
	if exited && slices.ContainsFunc(tail, func(l string) bool { return strings.Contains(l, "Address already in use") }) {
		return fmt.Errorf("%w: %s", errAddrInUse, n.addr())
	}
	return r.notStarted(n, p, exited, werr, quoteTail(n.logPath, tail))
}

// config renders n's redis.conf.
func (r *Redis) config(n *redisNode) string {
	var extra []string
	if r.extraConfig != nil {
		extra = r.extraConfig(n.name)
	}
	return backend.RedisConf{Header: fmt.Sprintf("Written by locktest for node %s; rewritten at each start.", n.name),
		Port: n.port, Bind: n.host.ip(), Dir: n.dataDir, LogFile: n.logPath, Persistence: r.persistence, Extra: extra}.String()
}

// waitRedisReady polls addr every 10ms until it answers PING
// (backend.Ready), p exits, or ctx (capped at readyTimeout) ends.
func waitRedisReady(ctx context.Context, addr string, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return backend.WaitReady(ctx, backend.KindRedis, addr, 10*time.Millisecond, func() error {
		if !p.running() {
			return errors.New("process exited")
		}
		return nil
	})
}
