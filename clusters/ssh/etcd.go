package ssh

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/locktest/locktest/internal/shellquote"
)

// nodeProgram is the name locktest's node program gets on a host; pids
// are checked against it before a signal.
const nodeProgram = "locktest-node"

// peerURL is n's etcd peer URL.
func (n *node) peerURL() string {
	return "http://" + net.JoinHostPort(n.ip(), strconv.Itoa(etcdPeerPort+2*n.slot))
}

// startEtcd uploads locktest's node program into the run's directory on
// n's host (first start only), starts `node etcd` there in the
// background, and waits until the member reports itself healthy. The
// commands on the host run under rctx, the wait under ctx (see
// startNode).
func (cl *Cluster) startEtcd(ctx, rctx context.Context, n *node, first bool) error {
	h := n.conn.Host
	runDir := path.Dir(n.dir)
	bin := path.Join(runDir, nodeProgram)
	if len(cl.opts.NodeCommand) == 0 {
		return fmt.Errorf("node %s: no node program to upload", n.name)
	}
	if first {
		if err := cl.prepare(rctx, n, ""); err != nil {
			return err
		}
		// The members of one host share the uploaded program.
		mu := cl.hostMu[h.Name]
		mu.Lock()
		err := n.conn.Upload(rctx, cl.opts.NodeCommand[0], bin)
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("node %s on %s: upload the node program: %w", n.name, h.Name, err)
		}
	}
	var cluster []string
	for _, m := range cl.nodes {
		cluster = append(cluster, m.name+"="+m.peerURL())
	}
	args := append([]string{bin}, cl.opts.NodeCommand[1:]...)
	args = append(args, "node", "etcd", "--name", n.name, "--data-dir", n.dir+"/data",
		"--listen-client-urls", "http://"+n.addr(), "--listen-peer-urls", n.peerURL(),
		"--initial-cluster", strings.Join(cluster, ","),
		"--log-file", n.dir+"/etcd.log")
	args = append(args, cl.layout.Etcd.NodeArgs()...)
	if err := cl.startDetached(rctx, n, "", append(slices.Clone(cl.opts.NodeEnv), args...), "stdout.log"); err != nil {
		return err
	}
	return waitReady(ctx, n, readyTimeout)
}

// startDetached runs the shell command prelude on n's host (files to
// write first; it may be empty), then starts argv there (environment
// assignments first, as env takes them) in the background in n's
// directory, in a session of its own, with its output appended to
// logFile in that directory; it records the program's pid as n's and in
// n's node.pid, which cleanup reads.
func (cl *Cluster) startDetached(ctx context.Context, n *node, prelude string, argv []string, logFile string) error {
	h := n.conn.Host
	// In a shell without job control the background job is no process
	// group leader, so setsid runs the program in a new session without
	// forking: $! is its pid.
	script := prelude + fmt.Sprintf("cd %[1]s && setsid env %[2]s </dev/null >>%[1]s/%[3]s 2>&1 & pid=$!; echo $pid > %[1]s/node.pid; echo $pid", shellquote.Quote(n.dir), shellquote.Join(argv), logFile)
	out, err := n.conn.Run(ctx, script)
	if err != nil {
		return fmt.Errorf("node %s on %s: %w", n.name, h.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		return fmt.Errorf("node %s on %s: no pid from the start (%q)", n.name, h.Name, strings.TrimSpace(out))
	}
	n.mu.Lock()
	n.pid = pid
	n.mu.Unlock()
	cl.lg.Info("ssh node started", "node", n.name, "host", h.Name, "pid", pid, "dir", n.dir)
	return nil
}

// Upload copies the local file src to dst on the host, executable, through
// the standard input of `cat` (no SFTP server is needed on the host).
func (c *Conn) Upload(ctx context.Context, src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = c.run(ctx, fmt.Sprintf("cat > %[1]s.part && chmod 755 %[1]s.part && mv %[1]s.part %[1]s", shellquote.Quote(dst)), f)
	return err
}
