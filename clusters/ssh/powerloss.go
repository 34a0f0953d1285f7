package ssh

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/durable"
	"github.com/locktest/locktest/internal/shellquote"
)

var _ clusters.PowerCutter = (*Hosts)(nil)

// syncRecord is where n's syncs are recorded on its host: by the clock
// shim, or by the node program's sync tracer (clusters/synctrace) for a
// server it embeds.
func (n *node) syncRecord() string { return path.Join(n.dir, "syncs.log") }

// nodeBin is where locktest's node program is uploaded on n's host.
func (n *node) nodeBin() string { return path.Join(path.Dir(n.dir), nodeProgram) }

// PowerCutReason says why the cluster cannot cut its nodes' power, or "":
// its nodes must record their syncs (the run's faults include
// power-loss): a C server under the clock shim, which every host must
// preload, and a server locktest's node program embeds under the
// program's sync tracer; and the node program must be there to read the
// records on the hosts. It is meaningful after Start.
func (cl *Hosts) PowerCutReason() string {
	switch why := cl.layout.SyncRecordReason(); {
	case why != "":
		return why
	case !cl.opts.SyncRecords:
		return "its nodes do not record what they sync: the ssh provider has them record it (C servers under the clock shim, the servers of locktest's node program under its sync tracer) when a run's faults include power-loss"
	case len(cl.opts.NodeCommand) == 0:
		return "no node program to upload, which reads the sync records on the hosts"
	case backend.ClockShimReason(cl.layout.Backend) != "":
		return "" // the node program traces its own syncs
	}
	if why := cl.ClockReason(); why != "" {
		return "its nodes cannot record what they sync: " + why
	}
	return ""
}

// durableCmd is the command line, on n's host, of the node program's
// `node durable` over n's data directory and sync record, with extra
// flags.
func (n *node) durableCmd(extra ...string) string {
	return shellquote.Join(append([]string{n.nodeBin(), "node", "durable", "--data", path.Join(n.dir, "data"), "--record", n.syncRecord()}, extra...))
}

// remoteCuts runs cmd on n's host and reads the cuts it prints.
func (n *node) remoteCuts(ctx context.Context, cmd string) ([]durable.Cut, error) {
	out, err := n.conn.Run(ctx, cmd)
	if err != nil {
		return nil, err
	}
	var cuts []durable.Cut
	if err := json.Unmarshal([]byte(out), &cuts); err != nil {
		return nil, fmt.Errorf("node %s on %s: read the cuts %q: %v", n.name, n.conn.Host.Name, strings.TrimSpace(out), err)
	}
	return cuts, nil
}

// Unsynced returns how many bytes of the node's data files a power cut
// would lose now, as the node program on its host reads them.
func (cl *Hosts) Unsynced(ctx context.Context, cn clusters.Node) (int64, error) {
	var lost int64
	err := cl.With(cn, func(n *node) error {
		if why := cl.PowerCutReason(); why != "" {
			return fmt.Errorf("ssh: node %s: %s", n.name, why)
		}
		cuts, err := n.remoteCuts(ctx, n.durableCmd())
		lost = durable.Lost(cuts)
		return err
	})
	return lost, err
}

// CutPower cuts the node's power on its host, in one command there: the
// node program SIGKILLs the server's process group (a daemonized Redis
// leads its own, with any child it forked), waits until it is gone, and
// cuts each data file back to its durable size, which the shim recorded.
// It refuses, changing nothing, a running node without a sync record.
// It holds the cluster's lock, as a kill does.
func (cl *Hosts) CutPower(ctx context.Context, cn clusters.Node) ([]clusters.FileCut, error) {
	var out []clusters.FileCut
	err := cl.With(cn, func(n *node) (err error) {
		out, err = cl.cutPower(ctx, n)
		return err
	})
	return out, err
}

// cutPower is CutPower of n, with the cluster's lock held.
func (cl *Hosts) cutPower(ctx context.Context, n *node) ([]clusters.FileCut, error) {
	if why := cl.PowerCutReason(); why != "" {
		return nil, fmt.Errorf("ssh: cannot cut the power of %s: %s", n.name, why)
	}
	pid, _ := n.doubt()
	extra := []string{"--cut"}
	if pid != 0 {
		extra = append(extra, "--kill", strconv.Itoa(pid), "--program", n.program())
	}
	cuts, err := n.remoteCuts(ctx, n.durableCmd(extra...))
	if err != nil {
		if pid != 0 {
			// The kill may have gone through before the cut failed.
			n.forgetIfExited(ctx, pid)
		}
		return nil, fmt.Errorf("node %s: cut its power: %w", n.name, err)
	}
	n.mu.Lock()
	n.pid = 0
	n.mu.Unlock()
	out := durable.FileCuts(cuts)
	cl.lg.Info("node power cut", "node", n.name, "host", n.conn.Host.Name, "files_cut", len(cuts), "bytes_lost", durable.Lost(cuts))
	return out, nil
}

// CutPowerOnWrite waits, for at most within, until the node holds an
// unsynced SET it has had time to acknowledge, and then cuts its power,
// all in one command on its host: the node program reads the node's files
// there every few milliseconds and cuts at once (a wait from here, a
// round trip of SSH per look, would come seconds late on a loaded host,
// after everysec had synced the write). The command gives up, doing
// nothing, when its standard input closes: when ctx ends, this side
// closes the session. An error that wraps clusters.ErrUntouched did
// nothing to the node. It does not hold the cluster's lock: its wait,
// which is its cut's too, must not hold the other nodes' faults back.
func (cl *Hosts) CutPowerOnWrite(ctx context.Context, cn clusters.Node, within time.Duration) ([]clusters.FileCut, error) {
	n, err := cl.find(cn.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", clusters.ErrUntouched, err)
	}
	if why := cl.PowerCutReason(); why != "" {
		return nil, fmt.Errorf("%w: ssh: cannot cut the power of %s: %s", clusters.ErrUntouched, n.name, why)
	}
	pid, served := n.doubt()
	extra := []string{"--cut", "--wait", within.String(), "--command", durable.GrantWrite}
	if pid != 0 {
		extra = append(extra, "--kill", strconv.Itoa(pid), "--program", n.program())
	}
	// The command's standard input stays open until it returns: its
	// close tells the command that this side gave up.
	stdin, hold := io.Pipe()
	defer hold.Close()
	raw, err := n.conn.run(ctx, n.durableCmd(extra...), stdin)
	var res durable.Outcome
	if err == nil {
		if jerr := json.Unmarshal([]byte(raw), &res); jerr != nil {
			err = fmt.Errorf("node %s on %s: read the cuts %q: %v", n.name, n.conn.Host.Name, strings.TrimSpace(raw), jerr)
		}
	}
	switch {
	case err != nil:
		// The kill may have gone through before the command failed.
		if pid != 0 {
			n.forgetIfExited(ctx, pid)
		}
		return nil, fmt.Errorf("node %s: cut its power: %w", n.name, err)
	case res.Untouched != "":
		// Nothing was done to the server: it serves as before.
		n.mu.Lock()
		n.serving = served && n.pid == pid
		n.mu.Unlock()
		return nil, fmt.Errorf("%w: node %s: wait for an unsynced write: %s", clusters.ErrUntouched, n.name, res.Untouched)
	}
	n.mu.Lock()
	n.pid = 0
	n.mu.Unlock()
	out := durable.FileCuts(res.Cuts)
	cl.lg.Info("node power cut", "node", n.name, "host", n.conn.Host.Name, "on_write", res.Found, "files_cut", len(res.Cuts), "bytes_lost", durable.Lost(res.Cuts))
	return out, nil
}
