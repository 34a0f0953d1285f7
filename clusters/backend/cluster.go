package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
)

// Driver is what a provider does to one node of a cluster on its hosts:
// the local provider to a process of this host, the docker provider to a
// container, the ssh provider to a server on a remote host. It is the thin
// part of a provider's cluster; Cluster is the rest, written once over it.
// N is the provider's own node type.
//
// Cluster calls Start, Restart, Stop, Kill, Pause, Resume and CollectLog
// with its lock held, one at a time, so a driver needs no lock of its own
// between them. Node and Pid are called without it, concurrently with any
// of them, and must be safe for that.
type Driver[N any] interface {
	// Node returns n as its clients and the faults know it: its name, the
	// address its clients dial ("" before its port is picked) and the path
	// of its log on the control host ("" when it has none there). Role is
	// left empty: Cluster fills it in.
	Node(n N) clusters.Node
	// Pid returns the pid of n's server on its host (a container's: its
	// main process's pid on the docker host), or 0 when n is known not to
	// run.
	Pid(n N) int
	// Start is the first start of the nodes ns, all at once: it writes
	// what they need on their hosts and returns once each serves, or with
	// the first failure. Those of ns already running are left alone.
	Start(ctx context.Context, ns []N) error
	// Restart starts again, all at once, each of ns that is not running,
	// on its data, ports and address, and returns once each serves. What a
	// node still knows depends on its durability; one that runs as it
	// started is left alone. What "not running" means is the driver's:
	// the ssh driver, which cannot see its hosts' processes die, takes a
	// recorded server that a kill or a power cut was tried on for one
	// that may still run, and kills it first.
	Restart(ctx context.Context, ns []N) error
	// Stop stops n's server for the rest of the run, gracefully where the
	// host can (and at once when ctx ends first), and returns once it is
	// gone. It is idempotent; n's data and log stay, except where the
	// driver says otherwise.
	Stop(ctx context.Context, n N) error
	// Kill kills n's running server with SIGKILL, whole (every process it
	// started), and returns once it is gone. Its data stays for Restart.
	Kill(ctx context.Context, n N) error
	// Pause freezes n's running server, whole, and returns once the
	// host's kernel shows it stopped (clusters.PauseWait), failing
	// otherwise; Resume thaws it.
	Pause(ctx context.Context, n N) error
	Resume(ctx context.Context, n N) error
	// CollectLog writes n's log, as the host has it now, to path on this
	// host. A node that never started, and so has no log, writes nothing
	// and is no error.
	CollectLog(ctx context.Context, n N, path string) error
}

// collectTimeout bounds CollectLogs: a host that does not answer must not
// hold a run's end.
const collectTimeout = 30 * time.Second

// Deployment is a backend's nodes on a provider's hosts: what the local,
// docker and ssh providers' clusters share, written once over each one's
// Driver. It keeps the nodes in the layout's order and the formation
// (Roster), reads roles and targets as every provider does (NodeRoles),
// and implements clusters.Deployment, Killer, GroupRestarter, Pauser and
// LogCollector. A provider's cluster embeds it and adds its own
// abilities (its power cuts, its network, its clocks), which reach a node
// under the same lock through With.
//
// Its lock policy is one for every provider: each method that starts,
// stops or changes a node holds the cluster's lock for its whole
// duration, so a Stop waits for a Kill in progress, and the other way
// round, and a restart that waits for its node to serve holds the others
// back. Nodes, Pids, Role and Targets take no lock: a role question does
// not wait for a restart. A whole cluster that restarts together (every
// member of a quorum system after a power loss) does so in one
// RestartNodes, which waits for them as a whole.
type Deployment[N any] struct {
	// NodeRoles reads the nodes' roles and picks a process fault's
	// targets, as on every provider.
	NodeRoles

	drv    Driver[N]
	prefix string // "local redis": the first words of the cluster's errors
	nodes  []N
	names  []string // the nodes' names, in order
	roster Roster

	mu sync.Mutex
}

var (
	_ clusters.Cluster        = (*Deployment[int])(nil)
	_ clusters.Killer         = (*Deployment[int])(nil)
	_ clusters.GroupRestarter = (*Deployment[int])(nil)
	_ clusters.Pauser         = (*Deployment[int])(nil)
	_ clusters.LogCollector   = (*Deployment[int])(nil)
	_ clusters.RoleReader     = (*Deployment[int])(nil)
	_ clusters.Targeter       = (*Deployment[int])(nil)
)

// NewDeployment returns the cluster of layout l on provider's hosts
// ("local", "docker", "ssh"), not started: nodes are the provider's nodes,
// one for each of l.Nodes and in their order, as d drives them.
func NewDeployment[N any](provider string, l Layout, nodes []N, d Driver[N]) *Deployment[N] {
	c := &Deployment[N]{drv: d, prefix: provider + " " + l.Backend, nodes: nodes}
	for _, n := range nodes {
		c.names = append(c.names, d.Node(n).Name)
	}
	c.NodeRoles = NodeRoles{Layout: l, Provider: provider, List: c.Nodes}
	return c
}

// Nodes returns the nodes in order, each with its address, its log and
// the role it had when the cluster was last seen formed (Roster.Role).
func (c *Deployment[N]) Nodes() []clusters.Node {
	out := make([]clusters.Node, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = c.drv.Node(n)
		out[i].Role = c.roster.Role(c.Layout, out[i].Name)
	}
	return out
}

// Pids returns each node's pid on its host, by name: 0 for a node that
// is not running.
func (c *Deployment[N]) Pids() map[string]int {
	m := make(map[string]int, len(c.nodes))
	for i, n := range c.nodes {
		m[c.names[i]] = c.drv.Pid(n)
	}
	return m
}

// Start starts every node and returns once the cluster is formed and
// ready as a whole (Roster.Form: a redis-sentinel's data nodes before its
// sentinels, a redis-cluster created and healthy; the nodes of the other
// backends all at once). When it fails, it stops every node it started,
// leaving their logs, and returns the error, which names the node.
func (c *Deployment[N]) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.roster.Form(ctx, c.Layout, Formation{
		Provider: c.Provider,
		Start: func(ctx context.Context, names []string) error {
			return c.drv.Start(ctx, c.named(names))
		},
		Nodes: c.Nodes,
		Pids:  c.Pids,
	})
	if err != nil {
		// The stop outlives an interrupted start (what started must not
		// stay), bounded: a host that does not answer must not hold it.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failedStartStop)
		defer cancel()
		c.stopAll(sctx)
	}
	return err
}

// failedStartStop bounds the stop of what a failed Start started.
const failedStartStop = time.Minute

// named returns the nodes called names, in the layout's order.
func (c *Deployment[N]) named(names []string) []N {
	return Named(c.nodes, func(n N) string { return c.drv.Node(n).Name }, names)
}

// Stop stops every node, all at once (Driver.Stop), and returns once each
// is gone. It is idempotent; an error names each node it could not stop.
func (c *Deployment[N]) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopAll(ctx)
}

// stopAll is Stop with c.mu held.
func (c *Deployment[N]) stopAll(ctx context.Context) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = c.drv.Stop(ctx, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Kill kills the node's server with SIGKILL and returns once it is gone;
// its data stays for Restart. Killing a node that is not running does
// nothing.
func (c *Deployment[N]) Kill(ctx context.Context, node clusters.Node) error {
	return c.With(node, func(n N) error {
		if c.drv.Pid(n) == 0 {
			return nil
		}
		return c.drv.Kill(ctx, n)
	})
}

// Restart starts the node again, if it is not running (Driver.Restart),
// on its data, ports and address, and returns once it serves.
func (c *Deployment[N]) Restart(ctx context.Context, node clusters.Node) error {
	return c.With(node, func(n N) error { return c.drv.Restart(ctx, []N{n}) })
}

// RestartNodes restarts, all at once, every one of nodes that is not
// running, and returns once each serves, or with the first failure: a
// Raft or ZAB cluster whose every member lost its power serves again only
// once a majority is back, which restarts one at a time under the lock
// would never see.
func (c *Deployment[N]) RestartNodes(ctx context.Context, nodes []clusters.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := make([]N, 0, len(nodes))
	for _, node := range nodes {
		n, err := c.Find(node)
		if err != nil {
			return err
		}
		ns = append(ns, n)
	}
	return c.drv.Restart(ctx, ns)
}

// Pause freezes the node's server and returns once its host shows it
// stopped. Pausing a node that is not running is an error.
func (c *Deployment[N]) Pause(ctx context.Context, node clusters.Node) error {
	return c.With(node, func(n N) error {
		if c.drv.Pid(n) == 0 {
			return fmt.Errorf("%s: pause %s: the node is not running", c.prefix, node.Name)
		}
		return c.drv.Pause(ctx, n)
	})
}

// Resume thaws the node's server. Resuming a node that is not paused, or
// not running, does nothing.
func (c *Deployment[N]) Resume(ctx context.Context, node clusters.Node) error {
	return c.With(node, func(n N) error {
		if c.drv.Pid(n) == 0 {
			return nil
		}
		return c.drv.Resume(ctx, n)
	})
}

// CollectLogs writes each node's log to dir/<name>.log, creating dir, in
// at most collectTimeout. Nodes that never started, and so have no log,
// are skipped; an error names each log it could not write.
func (c *Deployment[N]) CollectLogs(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	var errs []error
	for i, n := range c.nodes {
		name := c.names[i]
		if err := c.drv.CollectLog(ctx, n, filepath.Join(dir, name+".log")); err != nil {
			errs = append(errs, fmt.Errorf("collect log of %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// With calls f with the node called node.Name, holding the cluster's
// lock: how a provider's own abilities (a power cut) change a node.
func (c *Deployment[N]) With(node clusters.Node, f func(n N) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.Find(node)
	if err != nil {
		return err
	}
	return f(n)
}

// Find returns the node called node.Name, without the lock (the list of
// nodes never changes), or an error naming the cluster and the name.
func (c *Deployment[N]) Find(node clusters.Node) (N, error) {
	if i := slices.Index(c.names, node.Name); i >= 0 {
		return c.nodes[i], nil
	}
	var none N
	return none, fmt.Errorf("%s: no node %q", c.prefix, node.Name)
}
