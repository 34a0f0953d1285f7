package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// SentinelMasterName is the name under which the sentinels of a
// redis-sentinel cluster monitor its master; clients ask the sentinels for
// it (go-redis FailoverOptions.MasterName).
const SentinelMasterName = backend.SentinelMasterName

// The roles of the nodes of a redis-sentinel cluster, as Node.Role.
const (
	RoleMaster   = backend.RoleMaster
	RoleReplica  = backend.RoleReplica
	RoleSentinel = backend.RoleSentinel
)

// Timings of the local redis-sentinel backend.
const (
	sentinelReadyTimeout = 20 * time.Second
	// sentinelRoleTimeout bounds Role's questions to the sentinels.
	sentinelRoleTimeout = 2 * time.Second
)

// SentinelOptions configures a replicated Redis watched by Redis Sentinel.
type SentinelOptions struct {
	// Replicas is the number of replicas of the master, 1 or 2; 0 means 2.
	// The data nodes are n1 (the first master) and n2..: replication is
	// asynchronous, as Redis ships it.
	Replicas int
	// Sentinels is the number of redis-sentinel processes, s1..; 0 means 3.
	// Their quorum is a majority of them (2 of 3).
	Sentinels int
	// DownAfter is the sentinels' down-after-milliseconds: how long the
	// master must fail to answer before a sentinel deems it down; 0 means 1s.
	DownAfter time.Duration
	// FailoverTimeout is the sentinels' failover-timeout; 0 means 3s.
	FailoverTimeout time.Duration
	// Dir is the run directory; each node keeps its files in Dir/nodes/<name>.
	Dir string
	// Persistence is the data nodes' durability (see RedisOptions).
	Persistence string
	// Hosts optionally places data node i on Hosts[i] and sentinel j on
	// Hosts[Replicas+1+j].
	Hosts []Host
	// NodeEnv, if set, returns extra environment for a node's process.
	NodeEnv func(node string) []string
	// Logger receives node starts, exits, kills and pauses; nil discards.
	Logger *slog.Logger
}

func init() {
	Register("redis-sentinel", func(o Options) (clusters.Cluster, error) {
		replicas := 0
		if o.Nodes > 0 {
			replicas = o.Nodes - 1
		}
		set, err := backend.ParseSentinelParams(o.Params, replicas)
		if err != nil {
			return nil, err
		}
		return NewSentinel(SentinelOptions{Replicas: set.Replicas, DownAfter: set.DownAfter, FailoverTimeout: set.FailoverTimeout,
			Dir: o.Dir, Persistence: o.Persistence, Hosts: o.Hosts, NodeEnv: o.NodeEnv, Logger: o.Logger})
	})
}

// Sentinel is one Redis master with asynchronous replicas, and the Redis
// Sentinel processes that promote a replica when the master dies. It
// implements clusters.Cluster, Killer, Pauser and LogCollector: Kill,
// Restart, Pause and Resume take any of its nodes, data nodes and sentinels
// alike, but Targets lists only the data nodes, which are what a kill-node
// or pause-node fault should hit. A data node keeps the redis.conf that
// Sentinel rewrote across restarts, as a deployed node does: an old master
// that restarts comes back as a master until Sentinel turns it into a
// replica of the new one.
type Sentinel struct {
	data      *Redis
	sentinels *Redis
	opts      SentinelOptions
	log       *slog.Logger

	mu     sync.Mutex
	master string // name of the data node last known as master
}

// NewSentinel checks opts and returns a cluster that has not started yet.
func NewSentinel(opts SentinelOptions) (*Sentinel, error) {
	set := backend.SentinelSettings{Replicas: opts.Replicas, DownAfter: opts.DownAfter, FailoverTimeout: opts.FailoverTimeout}
	if err := set.Check("local redis-sentinel"); err != nil {
		return nil, err
	}
	opts.Replicas, opts.DownAfter, opts.FailoverTimeout = set.Replicas, set.DownAfter, set.FailoverTimeout
	if opts.Sentinels == 0 {
		opts.Sentinels = backend.DefaultSentinels
	}
	if opts.Sentinels < 1 {
		return nil, fmt.Errorf("local redis-sentinel: Sentinels must be at least 1, not %d", opts.Sentinels)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sentinel{opts: opts, log: log, master: "n1"}
	ndata := opts.Replicas + 1
	var dataHosts, sentHosts []Host
	for i, h := range opts.Hosts {
		if i < ndata {
			dataHosts = append(dataHosts, h)
		} else {
			sentHosts = append(sentHosts, h)
		}
	}
	var err error
	s.data, err = NewRedis(RedisOptions{
		Nodes: ndata, Dir: opts.Dir, Persistence: opts.Persistence, Hosts: dataHosts, NodeEnv: opts.NodeEnv,
		Logger: log, KeepConfig: true, ExtraConfig: s.dataConfig,
	})
	if err != nil {
		return nil, err
	}
	s.sentinels, err = NewRedis(RedisOptions{
		Nodes: opts.Sentinels, Dir: opts.Dir, Binary: "redis-sentinel", Hosts: sentHosts, NodeEnv: opts.NodeEnv,
		Logger: log, NamePrefix: "s", KeepConfig: true, ExtraConfig: s.sentinelConfig,
	})
	if err != nil {
		return nil, fmt.Errorf("local redis-sentinel: %w (run `make setup`: it installs redis-sentinel)", err)
	}
	return s, nil
}

// dataConfig makes every data node but n1 a replica of n1 at its first
// start; later starts keep what Sentinel wrote. s.data.mu is held.
func (s *Sentinel) dataConfig(node string) []string {
	if node == "n1" {
		return backend.SentinelDataConfig("", "")
	}
	m := s.data.nodes[0]
	return backend.SentinelDataConfig(m.addr(), "")
}

// sentinelConfig points a sentinel at n1, the first master. s.sentinels.mu
// is held; the data nodes have started.
func (s *Sentinel) sentinelConfig(string) []string {
	set := backend.SentinelSettings{Replicas: s.opts.Replicas, DownAfter: s.opts.DownAfter, FailoverTimeout: s.opts.FailoverTimeout}
	return backend.SentinelConfig(s.data.nodes[0].addr(), s.opts.Sentinels, set, "")
}

// Nodes returns the data nodes n1.. with Role "master" or "replica" as last
// known (at Start, or at the latest Master or WaitFailover call), then the
// sentinels s1.. with Role "sentinel".
func (s *Sentinel) Nodes() []clusters.Node {
	s.mu.Lock()
	master := s.master
	s.mu.Unlock()
	var out []clusters.Node
	for _, n := range s.data.Nodes() {
		n.Role = RoleReplica
		if n.Name == master {
			n.Role = RoleMaster
		}
		out = append(out, n)
	}
	for _, n := range s.sentinels.Nodes() {
		n.Role = RoleSentinel
		out = append(out, n)
	}
	return out
}

// Targets returns the data nodes, the ones a kill or pause fault should
// pick from; killing a sentinel tests Sentinel, not the lock.
func (s *Sentinel) Targets() []clusters.Node {
	var out []clusters.Node
	for _, n := range s.Nodes() {
		if n.Role != RoleSentinel {
			out = append(out, n)
		}
	}
	return out
}

// Start starts the data nodes, waits until each replica's link to the
// master is up (ROLE), then starts the sentinels and waits until every
// sentinel names n1 as master (SENTINEL get-master-addr-by-name) and knows
// every replica and every other sentinel, so that a failover can happen
// from the moment Start returns. On error it stops what it started.
func (s *Sentinel) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sentinelReadyTimeout)
	defer cancel()
	if err := s.data.Start(ctx); err != nil {
		return err
	}
	nodes := s.data.Nodes()
	if err := backend.WaitReplicasLinked(ctx, nodes[0], nodes[1:]); err != nil {
		s.data.Stop(context.Background())
		return fmt.Errorf("local redis-sentinel: %w", err)
	}
	if err := s.sentinels.Start(ctx); err != nil {
		s.data.Stop(context.Background())
		return err
	}
	if err := backend.WaitSentinelsReady(ctx, s.sentinels.Nodes(), nodes[0].Addr, s.opts.Replicas); err != nil {
		s.Stop(context.Background())
		return fmt.Errorf("local redis-sentinel: %w", err)
	}
	s.log.Info("sentinel cluster ready", "master", nodes[0].Name, "replicas", len(nodes)-1)
	return nil
}

// Stop stops the sentinels, then the data nodes. It is idempotent.
func (s *Sentinel) Stop(ctx context.Context) error {
	return errors.Join(s.sentinels.Stop(ctx), s.data.Stop(ctx))
}

// on calls f with the Redis cluster node belongs to.
func (s *Sentinel) on(node clusters.Node, f func(*Redis) error) error {
	p, err := s.part(node)
	if err != nil {
		return err
	}
	return f(p)
}

// part returns the Redis cluster node belongs to.
func (s *Sentinel) part(node clusters.Node) (*Redis, error) {
	if strings.HasPrefix(node.Name, "s") {
		return s.sentinels, nil
	}
	if strings.HasPrefix(node.Name, "n") {
		return s.data, nil
	}
	return nil, fmt.Errorf("local redis-sentinel: no node %q", node.Name)
}

// Kill sends SIGKILL to the node; see Redis.Kill.
func (s *Sentinel) Kill(ctx context.Context, node clusters.Node) error {
	return s.on(node, func(r *Redis) error { return r.Kill(ctx, node) })
}

// Restart starts a killed node again with the configuration it last had
// (Sentinel's rewrites included) and returns once it answers PING; see
// Redis.Restart. It does not wait for Sentinel to reconfigure it.
func (s *Sentinel) Restart(ctx context.Context, node clusters.Node) error {
	return s.on(node, func(r *Redis) error { return r.Restart(ctx, node) })
}

// Pause freezes the node with SIGSTOP; see Redis.Pause.
func (s *Sentinel) Pause(ctx context.Context, node clusters.Node) error {
	return s.on(node, func(r *Redis) error { return r.Pause(ctx, node) })
}

// Resume thaws the node with SIGCONT; see Redis.Resume.
func (s *Sentinel) Resume(ctx context.Context, node clusters.Node) error {
	return s.on(node, func(r *Redis) error { return r.Resume(ctx, node) })
}

// CollectLogs copies every node's log to dir/<name>.log.
func (s *Sentinel) CollectLogs(dir string) error {
	return errors.Join(s.data.CollectLogs(dir), s.sentinels.CollectLogs(dir))
}

// Pids returns each node's current pid, 0 for a node that is not running.
func (s *Sentinel) Pids() map[string]int {
	m := s.data.Pids()
	for k, v := range s.sentinels.Pids() {
		m[k] = v
	}
	return m
}

// Master asks the sentinels which data node is the master: the answer of a
// majority of the sentinels that answer. It records the answer as the node's
// role in Nodes.
func (s *Sentinel) Master(ctx context.Context) (clusters.Node, error) {
	addr, err := backend.SentinelsMaster(ctx, s.sentinels.Nodes())
	if err != nil {
		return clusters.Node{}, fmt.Errorf("local redis-sentinel: %w", err)
	}
	return s.setMaster(addr)
}

// Role says what node is now: "sentinel" for a sentinel; for a data node,
// "master" when a majority of the sentinels name it as the master now
// (SENTINEL get-master-addr-by-name, as the clients ask them), else
// "replica". With no majority of the sentinels agreeing (a failover under
// way, sentinels down) a data node's role is an error. It implements the
// clusters.RoleReader, so a kill-node=master after a failover hits the
// new master. Unlike Master, it does not change the roles Nodes reports.
func (s *Sentinel) Role(ctx context.Context, node clusters.Node) (string, error) {
	p, err := s.part(node)
	if err != nil {
		return "", err
	}
	if p == s.sentinels {
		return RoleSentinel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, sentinelRoleTimeout)
	defer cancel()
	r, err := backend.SentinelDataRole(ctx, s.sentinels.Nodes(), s.data.Nodes(), node.Name)
	if err != nil {
		return "", fmt.Errorf("local redis-sentinel: %w", err)
	}
	return r, nil
}

// Roles returns the roles a node can have: master or replica for a data
// node, sentinel for a sentinel.
func (s *Sentinel) Roles(node clusters.Node) []string {
	if p, err := s.part(node); err == nil && p == s.sentinels {
		return []string{RoleSentinel}
	}
	return []string{RoleMaster, RoleReplica}
}

// WaitFailover waits until a majority of the sentinels name a data node
// other than old as master and that node says, by ROLE, that it is a master;
// then it records the new master and returns it.
func (s *Sentinel) WaitFailover(ctx context.Context, old clusters.Node) (clusters.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, sentinelReadyTimeout)
	defer cancel()
	var addr string
	err := backend.Poll(ctx, func() error {
		var err error
		addr, err = backend.SentinelsMaster(ctx, s.sentinels.Nodes())
		if err != nil {
			return err
		}
		if addr == old.Addr {
			return fmt.Errorf("sentinels still name %s (%s)", old.Name, addr)
		}
		role, err := backend.RedisRole(ctx, addr)
		if err == nil && role != "master" {
			err = fmt.Errorf("%s answers ROLE %s", addr, role)
		}
		return err
	})
	if err != nil {
		return clusters.Node{}, fmt.Errorf("local redis-sentinel: no failover from %s: %w", old.Name, err)
	}
	return s.setMaster(addr)
}

// setMaster records the data node at addr as the master.
func (s *Sentinel) setMaster(addr string) (clusters.Node, error) {
	for _, n := range s.data.Nodes() {
		if n.Addr == addr {
			s.mu.Lock()
			s.master = n.Name
			s.mu.Unlock()
			n.Role = RoleMaster
			return n, nil
		}
	}
	return clusters.Node{}, fmt.Errorf("local redis-sentinel: sentinels name %s, not a data node", addr)
}
