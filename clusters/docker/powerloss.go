package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/durable"
)

// Where a node that records its syncs keeps its data and its record
// inside its container: both are bind mounts of the node's folder on this
// host, so that a power cut, after the container's kill, cuts the files
// here, and the restarted container finds them cut.
const (
	syncDir    = "/locktest-sync"
	syncRecord = syncDir + "/syncs.log"
)

var (
	_ clusters.PowerCutter    = (*Containers)(nil)
	_ clusters.GroupRestarter = (*Containers)(nil)
)

// records says whether n's container records its syncs: the run asked
// for it (Options.SyncRecords) and the backend's nodes can (a C server
// under the clock shim, a server of the node program under its sync
// tracer).
func (c *Containers) records() bool { return c.PowerCutReason() == "" }

// hostData and hostSyncs are the folders on this host that n's container
// sees as its data directory and as syncDir, when it records its syncs.
func (n *node) hostData() string  { return filepath.Join(n.dir, "data") }
func (n *node) hostSyncs() string { return filepath.Join(n.dir, "syncs") }

// syncMounts returns the bind mounts and the environment of n's container
// when the cluster records syncs: its data directory and its record's
// folder from n's folder on this host.
func (c *Containers) syncMounts(n *node) (binds []string, env map[string]string, err error) {
	if !c.records() {
		return nil, nil, nil
	}
	for _, d := range []string{n.hostData(), n.hostSyncs()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, fmt.Errorf("docker %s: node %s: %w", c.opts.Backend, n.name, err)
		}
	}
	return []string{n.hostData() + ":" + dataDir, n.hostSyncs() + ":" + syncDir},
		map[string]string{durable.EnvFile: syncRecord}, nil
}

// PowerCutReason says why the cluster cannot cut its nodes' power, or "":
// the run must have asked for sync records (Options.SyncRecords), the
// backend's nodes must record them (backend.Layout.SyncRecordReason), and
// a C server needs the clock shim (Options.Shim), which records them.
func (c *Containers) PowerCutReason() string {
	switch why := c.layout.SyncRecordReason(); {
	case why != "":
		return why
	case !c.opts.SyncRecords:
		return "its nodes do not record what they sync: the docker provider has them record it when a run's faults include power-loss"
	case backend.ClockShimReason(c.opts.Backend) == "" && c.opts.Shim == nil:
		return "its nodes cannot record what they sync: the run has no clock shim, which records a C server's syncs"
	}
	return ""
}

// record returns the path on this host of the sync record n's container
// writes. A node that left no record there is refused: its files are
// elsewhere (a Docker daemon on another machine bind-mounts its own
// folders), or nothing recorded its syncs, and a cut would cut what it
// synced.
func (c *Containers) record(n *node) (string, error) {
	record := filepath.Join(n.hostSyncs(), filepath.Base(syncRecord))
	if _, err := os.Stat(record); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("docker %s: node %s has no sync record %s on this host: neither the clock shim nor the node program's sync tracer wrote one into the container's bind mount (is the Docker daemon on another machine?)", c.opts.Backend, n.name, record)
	}
	return record, nil
}

// plan returns the cuts a power loss would make to n's data directory
// now, from its record (record).
func (c *Containers) plan(n *node) ([]durable.Cut, error) {
	record, err := c.record(n)
	if err != nil {
		return nil, err
	}
	return durable.PlanDir(n.hostData(), record)
}

// Unsynced returns how many bytes of the node's data files a power cut
// would lose now.
func (c *Containers) Unsynced(ctx context.Context, target clusters.Node) (int64, error) {
	var lost int64
	err := c.With(target, func(n *node) error {
		if why := c.PowerCutReason(); why != "" {
			return fmt.Errorf("docker %s: node %s: %s", c.opts.Backend, n.name, why)
		}
		cuts, err := c.plan(n)
		lost = durable.Lost(cuts)
		return err
	})
	return lost, err
}

// CutPower cuts the node's power: SIGKILL of its container, whose every
// process dies with it (the server, and the sync tracer's supervisor),
// waited for until it stopped; then each file of its data directory, on
// this host, is cut back to the size its last sync covered (a file never
// synced, to nothing). It refuses, changing nothing, a node whose sync
// record is missing. Restart starts the container again on the cut files.
func (c *Containers) CutPower(ctx context.Context, target clusters.Node) ([]clusters.FileCut, error) {
	var out []clusters.FileCut
	err := c.With(target, func(n *node) error {
		if why := c.PowerCutReason(); why != "" {
			return fmt.Errorf("docker %s: cannot cut the power of %s: %s", c.opts.Backend, n.name, why)
		}
		record, err := c.record(n)
		if err != nil {
			return err
		}
		if err := c.kill(ctx, n); err != nil {
			return err
		}
		plan := func() ([]durable.Cut, error) { return durable.PlanDir(n.hostData(), record) }
		out, err = durable.CutFiles(c.log, "docker "+c.opts.Backend, n.name, n.hostData(), plan, "node", n.name, "addr", n.addr())
		return err
	})
	return out, err
}

// CutPowerOnWrite waits, for at most within, until the node holds an
// unsynced SET it has had time to acknowledge (durable.WaitForWrite,
// reading its files on this host every few milliseconds), and then cuts
// its power (CutPower); at the end of within it cuts all the same. An
// error of the wait wraps clusters.ErrUntouched.
func (c *Containers) CutPowerOnWrite(ctx context.Context, target clusters.Node, within time.Duration) ([]clusters.FileCut, error) {
	n, err := c.Find(target)
	if err == nil {
		if why := c.PowerCutReason(); why != "" {
			err = fmt.Errorf("docker %s: cannot cut the power of %s: %s", c.opts.Backend, n.name, why)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", clusters.ErrUntouched, err)
	}
	plan := func() ([]durable.Cut, error) { return c.plan(n) }
	return durable.CutOnWrite(ctx, "docker "+c.opts.Backend, n.name, n.hostData(), plan, within, func() ([]clusters.FileCut, error) { return c.CutPower(ctx, target) })
}
