// Package clusters defines how the harness sees the nodes of a lock service
// and the optional abilities a provider has to hurt them, all of them here:
// its cluster's (Killer, PowerCutter, Pauser, LogCollector, and RoleReader
// and Targeter, which faults use to choose their node) and its platform's
// (Network, Delayer, Clocks, SyncDelayer). Providers live in sub-packages (local,
// docker, ssh) and implement them; roles reads a node's role for every
// provider, and backend holds each lock service's facts for every
// provider. A fault that needs an ability
// the provider lacks is reported as unavailable, with the provider's
// reason, never faked.
package clusters

import (
	"context"
	"errors"
	"time"
)

// Node is one server process of a lock service.
type Node struct {
	// Name is unique within the cluster, e.g. "n1".
	Name string `json:"name"`
	// Addr is the host:port clients connect to.
	Addr string `json:"addr"`
	// Role says what the node is to clients when the backend has more than
	// one kind: "sentinel", "master", "replica"; "" for plain members. Impls
	// pick the nodes they dial by it.
	Role string `json:"role,omitempty"`
	// LogPath is the node's log file, if it has one.
	LogPath string `json:"-"`
}

// Cluster is the set of nodes of one backend, owned by a provider.
type Cluster interface {
	// Nodes returns the cluster's nodes; valid after Start.
	Nodes() []Node
	// Start starts every node and returns once each answers.
	Start(ctx context.Context) error
	// Stop stops every node the cluster started. It is idempotent and must
	// leave no process behind.
	Stop(ctx context.Context) error
}

// RoleReader is an optional ability of a cluster whose nodes' roles change
// as it runs (a ZooKeeper or etcd leader, a Redis master after a failover).
// A fault pinned to a role asks Role of every node it may hit at the moment
// it picks, and Roles before the run, to refuse a role no node can have.
type RoleReader interface {
	// Role asks the cluster what node n is now; an error means its role is
	// not known at this moment (the node is down or cut off, an election
	// is under way).
	Role(ctx context.Context, n Node) (string, error)
	// Roles lists every role Role can ever answer for n.
	Roles(n Node) []string
}

// Targeter is an optional ability of a cluster whose nodes are not all data
// nodes (Sentinel's sentinels, say): node faults pick among Targets only.
type Targeter interface {
	Targets() []Node
}

// Killer can kill a node and restart it with the same data directory.
type Killer interface {
	Kill(ctx context.Context, n Node) error
	Restart(ctx context.Context, n Node) error
}

// PowerCutter can cut a node's power: every process of the node dies at
// once, and each of its data files is left as a machine crash would leave
// it, cut back to what the node last made durable (what its last
// successful fsync or fdatasync of the file covered; nothing, for a file
// never synced since it was created). A process kill, by contrast, loses
// nothing the node wrote: the kernel's page cache keeps it. (It loses what
// the node answered but had not yet written: Redis under appendfsync
// everysec postpones its writes while a background fsync runs; see
// docs/findings.md.) Killer's Restart starts the node again.
type PowerCutter interface {
	Killer
	// PowerCutReason says why the cluster cannot cut its nodes' power, or
	// "" when it can: a cluster that does not know what its nodes synced
	// has nothing to cut back to, and must not fake it.
	PowerCutReason() string
	// Unsynced returns how many bytes of n's data files a power cut would
	// lose now: 0 when the node has synced everything it wrote.
	Unsynced(ctx context.Context, n Node) (int64, error)
	// CutPower kills n, as Kill does, and cuts its data files back to
	// their durable sizes. It returns the cuts it made, in path order, also
	// when cutting a file failed (with the error).
	CutPower(ctx context.Context, n Node) ([]FileCut, error)
	// CutPowerOnWrite waits, for at most within, until n holds a write
	// that a power cut would lose and that n has had time to acknowledge
	// (for the redis backend a SET, which is how its locks are granted),
	// and then cuts n's power as CutPower does; at the end of within it
	// cuts all the same. The wait and the cut run where n runs, so that
	// the cut follows the write within milliseconds: a write under
	// appendfsync everysec is synced within a second or so. An error that
	// wraps ErrUntouched did nothing to n.
	CutPowerOnWrite(ctx context.Context, n Node, within time.Duration) ([]FileCut, error)
}

// GroupRestarter is an optional ability of a Killer whose Restart of one
// node waits, holding the cluster, for that node to serve: it restarts
// several stopped nodes together, and waits for them as a whole. A quorum
// system whose every node is down (a power loss of all of them) serves
// again only once a majority is back, which restarts one at a time would
// never see. A cluster without it restarts its nodes concurrently.
type GroupRestarter interface {
	// RestartNodes starts every one of nodes that is not running, all at
	// once, and returns once each serves, or with the first failure.
	RestartNodes(ctx context.Context, nodes []Node) error
}

// ErrUntouched marks an error of an ability that certainly did nothing to
// the node (a wait that ended before its act).
var ErrUntouched = errors.New("nothing was done to the node")

// FileCut is what a power cut did to one data file of a node: it went
// from Size back to Durable bytes.
type FileCut struct {
	// Path is the file's path relative to the node's data directory.
	Path    string
	Size    int64
	Durable int64
}

// PauseWait is how long a Pauser's Pause waits for the kernel to report
// every thread of the node stopped (state T in /proc) before it says the
// pause failed. A thread in an uninterruptible sleep (a disk write) stops
// only once that returns: under stress-ng, with three test packages at
// once, a Redis Cluster node's threads in a container took over a second.
const PauseWait = 5 * time.Second

// Pauser can freeze and thaw a node process. Pause returns once every
// thread of the node is stopped, waiting up to PauseWait and failing past
// it, on every provider; the ssh provider's SQL servers, whose group of
// processes its shell stops one by one, wait up to 2 s for each process
// and do not fail.
type Pauser interface {
	Pause(ctx context.Context, n Node) error
	Resume(ctx context.Context, n Node) error
}

// Network cuts and degrades the links between hosts, which it names as
// the nemesis does: each node by its name, each client host "c0", "c1",
// and so on. Cut drops every packet between a host of a and a host of b,
// both ways; CutOneWay only those from a host of from to a host of to,
// so that to's requests arrive and their replies are lost. Heal removes
// every rule it made.
type Network interface {
	Cut(ctx context.Context, a, b []string) error
	CutOneWay(ctx context.Context, from, to []string) error
	Loss(ctx context.Context, hosts []string, p float64) error
	Heal(ctx context.Context) error
}

// SharedClientAddress is an optional ability of a Network whose clients
// all reach the nodes from one address (the docker provider's: every
// client runs on the host). It returns why no cut can single out one
// client or put clients on different sides; faults that need that are
// unavailable with this reason.
type SharedClientAddress interface {
	SharedClientAddress() string
}

// Delayer adds latency to the traffic to chosen nodes; Delay with no
// nodes removes it. Mechanism names how (tc netem, a TCP proxy).
type Delayer interface {
	Delay(ctx context.Context, nodes []string, d time.Duration) error
	Mechanism() string
}

// Clocks moves nodes' wall clocks: Set makes node's clock run d ahead of
// the host's (behind, when negative); Offset is its current offset.
type Clocks interface {
	Set(node string, d time.Duration) error
	Offset(node string) time.Duration
}

// SyncDelayer slows nodes' disks: SetSyncDelay makes every fsync and
// fdatasync of node's processes begin d late, from the next one they
// begin, until it is set again (0: on time); SyncDelay is the delay set.
type SyncDelayer interface {
	SetSyncDelay(node string, d time.Duration) error
	SyncDelay(node string) time.Duration
}

// LogCollector can copy every node's log into a directory.
type LogCollector interface {
	CollectLogs(dir string) error
}

// Reconnector is a cluster whose control connections to its hosts can be
// lost mid-run (the ssh provider's). Reconnect dials the lost ones again,
// before the run copies the nodes' logs, stops them and removes what it
// made, so that nothing is left behind on a host that came back; the loss
// stays a problem of the run.
type Reconnector interface {
	Reconnect(ctx context.Context) error
}
