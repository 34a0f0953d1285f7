// Package clusters defines how the harness sees the nodes of a lock service
// and the optional abilities a provider has to hurt them. Providers live in
// sub-packages (local, later docker). A fault that needs an ability the
// provider lacks is reported as unavailable, never faked.
package clusters

import (
	"context"
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

// Killer can kill a node and restart it with the same data directory.
type Killer interface {
	Kill(ctx context.Context, n Node) error
	Restart(ctx context.Context, n Node) error
}

// Pauser can freeze and thaw a node process.
type Pauser interface {
	Pause(ctx context.Context, n Node) error
	Resume(ctx context.Context, n Node) error
}

// Partitioner can cut the network between groups of nodes.
type Partitioner interface {
	Partition(ctx context.Context, groups [][]Node) error
	Heal(ctx context.Context) error
}

// ClockShifter can move a node's wall clock.
type ClockShifter interface {
	ShiftClock(ctx context.Context, n Node, d time.Duration) error
	ResetClock(ctx context.Context, n Node) error
}

// LogCollector can copy every node's log into a directory.
type LogCollector interface {
	CollectLogs(dir string) error
}
