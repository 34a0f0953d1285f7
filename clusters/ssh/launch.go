package ssh

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/durable"
	"github.com/locktest/locktest/internal/shellquote"
)

// nodeProgram is the name locktest's node program gets on a host; pids
// are checked against it before a signal.
const nodeProgram = "locktest-node"

// kindOf returns the definition of n's kind (every kind of a layout has
// one: TestEveryKindIsDefined).
func kindOf(n *node) *backend.Kind { return backend.Kinds()[n.kind] }

// placedNode is n as its kind's launch sees it: its host's address and the
// ports of its slot there.
func placedNode(n *node) backend.Placed {
	p := backend.Placed{Name: n.name, IP: n.ip()}
	for _, port := range kindOf(n).Ports {
		p.Ports = append(p.Ports, port.At(n.slot))
	}
	return p
}

// placement is where n is, as its kind's launch takes it: its directory
// on its host with the data directory inside, its host's programs (the
// inventory's binaries:), locktest's node program as uploaded into the
// run's directory, and Debian's ZooKeeper jars. Every node binds all the
// host's addresses and announces the one the clients dial.
func (cl *Hosts) placement(n *node, k *backend.Kind) backend.Placement {
	h := n.conn.Host
	p := backend.Placement{Layout: &cl.layout, Node: placedNode(n), Bind: "0.0.0.0", Dir: n.dir, DataDir: n.dir + "/data",
		Bin: h.Binary, NodeProgram: append([]string{n.nodeBin()}, cl.opts.NodeCommand[min(1, len(cl.opts.NodeCommand)):]...),
		ClassPath: backend.ZooKeeperClassPath(backend.DebianJarDir), Persistence: cl.opts.Persistence,
		Header: fmt.Sprintf("Written by locktest for node %s of run %s.", n.name, cl.opts.RunID)}
	if !k.Stdout {
		p.LogFile = path.Join(n.dir, k.Log)
	}
	for _, m := range cl.nodes {
		p.Peers = append(p.Peers, placedNode(m))
	}
	return p
}

// startKind starts n from its kind's launch (backend.Kind.Launch). The
// first start checks that the host has the launch's program and the
// files it needs, makes n's directory (prepare) and uploads locktest's
// node program when the kind runs in it; a SQL server's programs and
// user are found by one probe of the host instead (setupSQL), and its
// server binds the host's address only, beside a server of the host's own
// on its loopback. Every start writes the launch's files (those marked
// Once only at the first), makes the data directory with the launch's
// init where it has none yet, as the kind's user when the login is root
// (setpriv, which then owns n's directory), starts the server in the
// background in a session of its own (startDetached), and waits until it
// serves, by its kind's readiness query asked from the control host (a
// SQL server's data directory, which proves it is n's: waitSQL). A
// restart first waits for no socket to listen on n's ports: the killed
// server's can outlive the wait for its process on a loaded host. The
// commands on the host run under rctx, the wait under ctx (see
// startNode).
func (cl *Hosts) startKind(ctx, rctx context.Context, n *node, k *backend.Kind, first bool) error {
	h := n.conn.Host
	p := cl.placement(n, k)
	var as []string  // the setpriv prefix of the server and its init, when they run as another user
	var owner string // that user's uid:gid, who then owns n's directory
	st := newStartSteps()
	if k.DataDirQuery != nil {
		sh, err := cl.setupSQL(rctx, n, first)
		if err != nil {
			return st.failed("probe", err)
		}
		st.done("probe")
		p.Bin = func(program string) string {
			if program == k.Program {
				return sh.server
			}
			return sh.init
		}
		p.User, p.Bind = sh.user, h.Address
		// Unix sockets go into n's directory when their path fits a
		// socket's address; a server that needs one has none otherwise.
		if sock := path.Join(n.dir, "mariadb.sock"); len(sock) <= 100 {
			p.Socket = sock
		}
		if len(path.Join(n.dir, ".s.PGSQL.65535.lock")) <= 100 {
			p.SocketDir = n.dir
		}
		if sh.uid != "" && k.RunAs != "" {
			as = []string{"setpriv", "--reuid=" + sh.uid, "--regid=" + sh.gid, "--clear-groups"}
			owner = sh.uid + ":" + sh.gid
		}
	}
	l, err := k.Launch(p)
	if err != nil {
		return fmt.Errorf("node %s on %s: %w (a shorter workdir for the host makes room for a socket's path)", n.name, h.Name, err)
	}
	own := k.Program == backend.NodeProgram
	if own && len(cl.opts.NodeCommand) == 0 {
		return fmt.Errorf("node %s: no node program to upload", n.name)
	}
	if first && k.DataDirQuery == nil {
		var check strings.Builder
		if !own {
			bin := l.Argv[0]
			fmt.Fprintf(&check, "command -v %s >/dev/null || { echo %s >&2; exit 3; }\n", shellquote.Quote(bin),
				shellquote.Quote(fmt.Sprintf("no %s on the host (%s, or give its path under binaries: in the inventory)", bin, k.Install)))
		}
		for _, f := range l.Needs {
			fmt.Fprintf(&check, "[ -e %s ] || { echo %s >&2; exit 3; }\n", shellquote.Quote(f),
				shellquote.Quote(fmt.Sprintf("no %s on the host (%s)", f, k.Install)))
		}
		if err := cl.prepare(rctx, n, check.String()); err != nil {
			return st.failed("prepare", err)
		}
		st.done("prepare")
		if own {
			// The members of one host share the uploaded program.
			mu := cl.hostMu[h.Name]
			mu.Lock()
			err := n.conn.Upload(rctx, cl.opts.NodeCommand[0], n.nodeBin())
			mu.Unlock()
			if err != nil {
				return st.failed("upload", fmt.Errorf("node %s on %s: upload the node program: %w", n.name, h.Name, err))
			}
			st.done("upload")
		}
	}
	var pre strings.Builder
	// An init run as another user may not enter the login's home.
	fmt.Fprintf(&pre, "cd %s || exit 1\n", shellquote.Quote(n.dir))
	if !first {
		ports := append(slices.Clone(p.Node.Ports), cl.layout.MorePorts(p.Node.Ports[0])...) // a Redis Cluster's bus
		for _, port := range ports {
			pre.WriteString(waitPortFree(port))
		}
	}
	if first && owner != "" {
		fmt.Fprintf(&pre, "chown -R %s %s\n", owner, shellquote.Quote(n.dir))
	}
	if len(l.Dirs) > 0 {
		fmt.Fprintf(&pre, "mkdir -p %s\n", shellquote.Join(l.Dirs))
	}
	for _, f := range l.Files {
		if f.Once && !first {
			continue
		}
		fmt.Fprintf(&pre, "cat > %s <<'EOF'\n%sEOF\n", shellquote.Quote(f.Path), f.Data)
	}
	logf := path.Join(n.dir, k.Log)
	if l.Init != nil {
		pre.WriteString(l.Init.Shell(p.DataDir, as, logf) + "\n")
	}
	n.mu.Lock()
	argv := slices.Clone(n.env)
	n.mu.Unlock()
	if own {
		argv = append(argv, cl.opts.NodeEnv...)
		if cl.opts.SyncRecords && cl.layout.SyncRecordReason() == "" {
			// The node program runs its server under its sync tracer,
			// which records what the server syncs there.
			argv = append(argv, durable.EnvFile+"="+n.syncRecord())
		}
	}
	argv = append(append(argv, as...), l.Argv...)
	stdout := "stdout.log"
	if k.Stdout {
		stdout = k.Log
	}
	if err := cl.startDetached(rctx, n, pre.String(), argv, stdout); err != nil {
		return st.failed("start command", err)
	}
	st.done("start command")
	if k.DataDirQuery != nil {
		return st.failed("readiness", cl.waitSQL(ctx, n, k.ReadyTimeout, k.DataDirQuery))
	}
	return st.failed("readiness", waitReady(ctx, n, k.ReadyTimeout))
}

// startSteps times the steps of one start of a node, so that a start that
// failed says where its time went: over SSH to a loaded host, each
// command of a start can take seconds, and a restart's deadline is the
// heal's.
type startSteps struct {
	last  time.Time
	spent []string
}

func newStartSteps() *startSteps { return &startSteps{last: time.Now()} }

// done records that step ended now.
func (s *startSteps) done(step string) {
	now := time.Now()
	s.spent = append(s.spent, fmt.Sprintf("%s %v", step, now.Sub(s.last).Round(10*time.Millisecond)))
	s.last = now
}

// failed returns err, nil or not, with the time of each step before it
// and of step, which it ended: "… (probe 1.2s, start command 3s,
// readiness 25.8s)".
func (s *startSteps) failed(step string, err error) error {
	if err == nil {
		return nil
	}
	s.done(step)
	return fmt.Errorf("%w (%s)", err, strings.Join(s.spent, ", "))
}

// startDetached runs the shell command prelude on n's host (files to
// write first; it may be empty), then starts argv there (environment
// assignments first, as env takes them) in the background in n's
// directory, in a session of its own, with its output appended to
// logFile in that directory; it records the program's pid as n's and in
// n's node.pid, which cleanup reads.
func (cl *Hosts) startDetached(ctx context.Context, n *node, prelude string, argv []string, logFile string) error {
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
