package ssh

import (
	"context"
	"encoding/binary"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters/clockshim"
	"github.com/locktest/locktest/clusters/durable"
	"github.com/locktest/locktest/internal/shellquote"
)

// clockFileSize is the size of a node's offset file: one page, which the
// shim maps; the offset is its first eight bytes.
const clockFileSize = 4096

// clockSetTimeout bounds one write of a node's offset over SSH.
const clockSetTimeout = 10 * time.Second

// shimName is the clock shim's name in a run's directory on a host.
const shimName = "clockshim.so"

// installShim uploads the clock shim into the run's directory on n's host,
// creates n's offset file (zero), and checks that the host's dynamic
// loader preloads the library. It returns the environment that puts the
// node under the shim, or why the host cannot take it; only a failed
// command (a lost connection) is an error.
func (cl *Hosts) installShim(ctx context.Context, n *node) (env []string, why string, err error) {
	lib := path.Join(path.Dir(n.dir), shimName)
	file := path.Join(n.dir, "clock")
	if err := n.conn.Upload(ctx, cl.opts.ClockShim, lib); err != nil {
		return nil, "", fmt.Errorf("node %s on %s: upload the clock shim: %w", n.name, n.conn.Host.Name, err)
	}
	if _, err := n.conn.RunInput(ctx, "cat > "+shellquote.Quote(file), make([]byte, clockFileSize)); err != nil {
		return nil, "", fmt.Errorf("node %s on %s: offset file: %w", n.name, n.conn.Host.Name, err)
	}
	env = []string{"LD_PRELOAD=" + lib, clockshim.EnvFile + "=" + file}
	if cl.opts.SyncRecords && cl.layout.SyncRecordReason() == "" {
		// The node program reads the record on the host at a power cut.
		if len(cl.opts.NodeCommand) > 0 {
			if err := n.conn.Upload(ctx, cl.opts.NodeCommand[0], n.nodeBin()); err != nil {
				return nil, "", fmt.Errorf("node %s on %s: upload the node program: %w", n.name, n.conn.Host.Name, err)
			}
		}
		env = append(env, durable.EnvFile+"="+n.syncRecord())
	}
	// A library the loader cannot take (another architecture, another C
	// library) is reported on stderr and ignored: the node would run with
	// a clock no fault moves.
	out, err := n.conn.Run(ctx, fmt.Sprintf("env %s %s sh -c : 2>&1", shellquote.Quote(env[0]), shellquote.Quote(env[1]))) // no sync record of the try
	if err != nil {
		return nil, "", fmt.Errorf("node %s on %s: try the clock shim: %w", n.name, n.conn.Host.Name, err)
	}
	if msg := strings.TrimSpace(out); msg != "" {
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return nil, fmt.Sprintf("host %s cannot preload the clock shim built on the control host: %s", n.conn.Host.Name, msg), nil
	}
	return env, "", nil
}

// ClockReason says why the nodes' clocks cannot be moved (no shim was
// given, or a host could not preload it), or "" when every node runs
// under the clock shim. It is meaningful after Start.
func (cl *Hosts) ClockReason() string {
	if cl.opts.ClockShim == "" {
		return "the run has no clock shim"
	}
	cl.clockMu.Lock()
	defer cl.clockMu.Unlock()
	return cl.clockWhy
}

// Set makes node's wall clock read d ahead of its host's (behind if d <
// 0): it writes the offset into the node's offset file over SSH, in place,
// so the mapping the shim holds sees it at the node's next clock read.
// It returns once the host has the new offset.
func (cl *Hosts) Set(name string, d time.Duration) error {
	n, err := cl.find(name)
	if err != nil {
		return err
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(int64(d)))
	var esc strings.Builder
	for _, c := range b {
		fmt.Fprintf(&esc, `\%03o`, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clockSetTimeout)
	defer cancel()
	// 1<> opens the file for writing without truncating it: a truncated
	// mapping would fault the node.
	if _, err := n.conn.Run(ctx, fmt.Sprintf("printf '%s' 1<> %s", esc.String(), shellquote.Quote(path.Join(n.dir, "clock")))); err != nil {
		return fmt.Errorf("node %s: set its clock offset: %w", name, err)
	}
	cl.clockMu.Lock()
	cl.offsets[name] = d
	cl.clockMu.Unlock()
	return nil
}

// Offset returns node's current offset: the last one Set wrote.
func (cl *Hosts) Offset(name string) time.Duration {
	cl.clockMu.Lock()
	defer cl.clockMu.Unlock()
	return cl.offsets[name]
}
