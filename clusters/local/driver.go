package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
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
// abilities its driver gives it.
type fullCluster interface {
	clusters.Cluster
	clusters.Killer
	clusters.Pauser
	clusters.LogCollector
}

// member is the part of a local node that the driver manages: its name,
// folder, log, host and current process. The node type embeds it and
// adds its own paths and ports.
type member struct {
	name    string
	dir     string // Dir/nodes/<name>
	logPath string
	host    Host
	// proc is the node's process, nil while it is not running. It is
	// changed with the cluster's lock held and through setProc, so that
	// Pid, which takes no cluster lock, reads it under info.
	proc *proc
	info sync.Mutex
}

// setProc makes p the member's process (nil: none).
func (m *member) setProc(p *proc) {
	m.info.Lock()
	m.proc = p
	m.info.Unlock()
}

// driver is the local provider's backend.Driver: a node is a process of
// this host (in its Host's network namespace, when it has one), or a tree
// of them (a SQL server), which it signals by pid.
type driver struct{ c *Processes }

var _ backend.Driver[*kindNode] = driver{}

// Node returns n with its address ("" before its ports are picked).
func (d driver) Node(n *kindNode) clusters.Node {
	n.info.Lock()
	defer n.info.Unlock()
	return clusters.Node{Name: n.name, Addr: n.addr(), LogPath: n.logPath}
}

// Pid returns n's process's pid, 0 when it is not running.
func (d driver) Pid(n *kindNode) int {
	n.info.Lock()
	p := n.proc
	n.info.Unlock()
	if !p.running() {
		return 0
	}
	return p.pid
}

// Start starts those of ns that are not running, all at once
// (Processes.startGroup).
func (d driver) Start(ctx context.Context, ns []*kindNode) error { return d.c.startStopped(ctx, ns) }

// Restart is Start: a node's first start and its restarts differ in what
// its launch writes (the files marked Once), which startGroup knows.
func (d driver) Restart(ctx context.Context, ns []*kindNode) error { return d.c.startStopped(ctx, ns) }

// Stop stops n's process, if any, and forgets it: SIGTERM (or the
// server's own stop signal), then SIGKILL if it has not exited within its
// grace (at once if ctx ends first). It returns once the process has been
// reaped and leaves the data directory and log in place.
func (d driver) Stop(ctx context.Context, n *kindNode) error {
	p := n.proc
	if p == nil {
		return nil
	}
	n.setProc(nil)
	if n.kind.Several {
		kindGroup{d.c}.stop(ctx, n, p)
		return nil
	}
	if !p.running() {
		return nil
	}
	graceful := p.stop(ctx, stopGrace)
	d.c.log.Info("node stopped", "node", n.name, "pid", p.pid, "addr", n.addr(), "graceful", graceful)
	return nil
}

// Kill sends SIGKILL to n's process (a tree's every process) and returns
// once it has been reaped. Its data directory stays for Restart.
func (d driver) Kill(ctx context.Context, n *kindNode) error {
	p := n.proc
	n.setProc(nil)
	if !p.running() {
		return nil
	}
	d.killProc(n, p)
	d.c.log.Info("node killed", "node", n.name, "pid", p.pid, "addr", n.addr())
	return nil
}

// killProc kills p, n's process, with SIGKILL (the whole tree, for a
// server of several processes) and returns once it is gone.
func (d driver) killProc(n *kindNode, p *proc) {
	if n.kind.Several {
		kindGroup{d.c}.kill(n, p)
		return
	}
	p.kill()
}

// Pause freezes n's process (a tree's every process) with SIGSTOP and
// returns once the kernel reports each stopped. The kernel still accepts
// connections on its port, so clients see timeouts, not refusals.
func (d driver) Pause(ctx context.Context, n *kindNode) error {
	var err error
	if n.kind.Several {
		err = kindGroup{d.c}.pause(n)
	} else {
		err = n.proc.pause(clusters.PauseWait)
	}
	if err != nil {
		return fmt.Errorf("%s: pause %s: %w", d.c.kind, n.name, err)
	}
	d.c.log.Info("node paused", "node", n.name, "pid", n.proc.pid, "addr", n.addr())
	return nil
}

// Resume thaws n's process (a tree's every process) with SIGCONT.
func (d driver) Resume(ctx context.Context, n *kindNode) error {
	var err error
	if n.kind.Several {
		err = kindGroup{d.c}.resume(n)
	} else {
		err = n.proc.resume()
	}
	if err != nil {
		return fmt.Errorf("%s: resume %s: %w", d.c.kind, n.name, err)
	}
	d.c.log.Info("node resumed", "node", n.name, "pid", n.proc.pid, "addr", n.addr())
	return nil
}

// CollectLog copies n's log to path; a node that never started has none.
func (d driver) CollectLog(ctx context.Context, n *kindNode, path string) error {
	if err := copyFile(n.logPath, path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// adopt makes p the process of n, which is ready, and logs its start with
// attrs and, later, its exit: at debug level when the harness ended it,
// as a warning naming the log when it exited on its own.
func (d driver) adopt(n *kindNode, p *proc, attrs ...any) {
	n.setProc(p)
	log := d.c.log.With("node", n.name, "pid", p.pid, "addr", n.addr())
	log.Info("node started", attrs...)
	go func() {
		<-p.done
		if p.ended.Load() {
			log.Debug("node exited", "status", p.exitStatus())
		} else {
			log.Warn("node exited on its own", "status", p.exitStatus(), "log", n.logPath)
		}
	}()
}
