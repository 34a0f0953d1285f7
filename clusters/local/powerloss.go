package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/durable"
)

// syncRecordName is the file, in a node's folder, where the clock shim
// records the node's syncs (Options.TrackSyncs).
const syncRecordName = "syncs.log"

// noSyncRecords is why a cluster whose nodes keep no sync record cannot
// cut power.
const noSyncRecords = "its nodes do not record what they sync: the local provider has them record it (C servers under the clock shim, the servers of locktest's node program under its sync tracer) when a run's faults include power-loss"

var _ clusters.PowerCutter = (*Processes)(nil)

// PowerCutReason says why the cluster cannot cut its nodes' power: "" when
// they record their syncs (Options.TrackSyncs, on a backend whose nodes
// can: backend.Layout.SyncRecordReason).
func (r *Processes) PowerCutReason() string { return r.powerWhy }

// Unsynced returns how many bytes of the node's data directory a power cut
// would lose now: what it wrote beyond the size of each file's last sync.
func (r *Processes) Unsynced(ctx context.Context, node clusters.Node) (int64, error) {
	var lost int64
	err := r.With(node, func(n *kindNode) error {
		cuts, err := r.plan(n)
		lost = durable.Lost(cuts)
		return err
	})
	return lost, err
}

// CutPower cuts the node's power: SIGKILL of its process group (the server
// and any child it forked, such as an AOF rewrite, die together), then each
// file of its data directory is cut back to the size its last successful
// fsync or fdatasync covered, a file never synced to nothing. A node that
// is not running is only cut. Its folder's other files (redis.conf, the log)
// are the harness's, and stay. It refuses, changing nothing, a node whose
// sync record is missing or unreadable: it would cut what was synced.
func (r *Processes) CutPower(ctx context.Context, node clusters.Node) ([]clusters.FileCut, error) {
	var out []clusters.FileCut
	err := r.With(node, func(n *kindNode) error {
		if r.powerWhy != "" {
			return fmt.Errorf("%s: cannot cut the power of %s: %s", r.kind, n.name, r.powerWhy)
		}
		if _, err := os.Stat(n.syncs.Path()); errors.Is(err, fs.ErrNotExist) && n.launched {
			return fmt.Errorf("%s: node %s has no sync record %s: neither the clock shim nor the node program's sync tracer, which write it, ran in it", r.kind, n.name, n.syncs.Path())
		}
		if _, err := n.syncs.Update(); err != nil {
			return fmt.Errorf("%s: node %s: %w", r.kind, n.name, err)
		}
		if p := n.proc; p.running() {
			n.setProc(nil)
			p.ended.Store(true)
			_ = syscall.Kill(-p.pid, syscall.SIGKILL) // the node's own process group (Setpgid)
			p.kill()
		}
		var err error
		out, err = durable.CutFiles(r.log, r.kind, n.name, n.dataDir(), func() ([]durable.Cut, error) { return r.plan(n) }, "node", n.name, "addr", n.addr())
		return err
	})
	return out, err
}

// CutPowerOnWrite waits, for at most within, until the node holds an
// unsynced SET it has had time to acknowledge (durable.WaitForWrite,
// reading its files here every few milliseconds), and then cuts its power
// (CutPower); at the end of within it cuts all the same. An error of the
// wait wraps clusters.ErrUntouched.
func (r *Processes) CutPowerOnWrite(ctx context.Context, node clusters.Node, within time.Duration) ([]clusters.FileCut, error) {
	var dir string
	if err := r.With(node, func(n *kindNode) error {
		if r.powerWhy != "" {
			return fmt.Errorf("%s: cannot cut the power of %s: %s", r.kind, n.name, r.powerWhy)
		}
		dir = n.dataDir()
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%w: %w", clusters.ErrUntouched, err)
	}
	plan := func() (cuts []durable.Cut, err error) {
		err = r.With(node, func(n *kindNode) error {
			cuts, err = r.plan(n)
			return err
		})
		return cuts, err
	}
	return durable.CutOnWrite(ctx, r.kind, node.Name, dir, plan, within, func() ([]clusters.FileCut, error) { return r.CutPower(ctx, node) })
}

// plan returns the cuts a power loss would make to n's data directory now.
// r.mu must be held.
func (r *Processes) plan(n *kindNode) ([]durable.Cut, error) {
	if n.syncs == nil {
		return nil, fmt.Errorf("%s: %s: %s", r.kind, n.name, r.powerWhy)
	}
	d, err := n.syncs.Update()
	if err != nil {
		return nil, err
	}
	files, err := durable.Scan(n.dataDir())
	if err != nil {
		return nil, err
	}
	return durable.Plan(files, d), nil
}
