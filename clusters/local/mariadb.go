package local

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// Defaults of the MariaDB provider: the Debian mariadb-server package's
// programs.
const (
	defaultMariaDBServer  = "mariadbd"
	defaultMariaDBInstall = "mariadb-install-db"
)

func init() {
	Register("mysql", func(o Options) (clusters.Cluster, error) {
		if o.Nodes > 1 {
			return nil, fmt.Errorf("local mariadb: one server only, not %d nodes", o.Nodes)
		}
		return NewMariaDB(SQLOptions{Dir: o.Dir, Host: o.host(0), NodeEnv: o.NodeEnv, Logger: o.Logger,
			Server: o.Params["mariadbd"], Init: o.Params["mariadb-install-db"]})
	})
}

// MariaDB is one mariadbd process, the node n1, started by this package
// (not the system service) with its own data directory
// (Dir/nodes/n1/data, created by mariadb-install-db at the first start),
// socket, port and error log (Dir/nodes/n1/mariadb.log). Clients connect
// over TCP as root without a password. The server creates no database for
// the impls: each creates its schema itself, idempotently.
//
// Settings: small InnoDB buffers and logs for a quick start; binary log and
// performance schema off; skip-name-resolve; otherwise MariaDB's defaults,
// durability included (innodb_flush_log_at_trx_commit=1), so a killed
// server keeps every committed row. A connection whose client died is
// dropped as soon as the kernel tells the server (a killed client's FIN);
// one cut off by a partition lingers until wait_timeout (8 hours).
//
// It implements clusters.Cluster, Killer, Pauser and LogCollector. The
// backend registered with the local provider is "mysql"; Options.Params
// may name the programs with the keys "mariadbd" and "mariadb-install-db".
type MariaDB struct {
	*sqlServer
}

// NewMariaDB checks opts and returns a server that has not started yet. It
// fails if mariadbd or mariadb-install-db cannot be found, so a missing
// installation is reported before any test begins.
func NewMariaDB(opts SQLOptions) (*MariaDB, error) {
	server, err := findProgram("mariadb", opts.Server, defaultMariaDBServer, "/usr/sbin/mariadbd")
	if err != nil {
		return nil, err
	}
	install, err := findProgram("mariadb", opts.Init, defaultMariaDBInstall, "/usr/bin/mariadb-install-db")
	if err != nil {
		return nil, err
	}
	s, err := newSQLServer(&mariadbEngine{server: server, install: install}, opts, "mariadb.log")
	if err != nil {
		return nil, err
	}
	return &MariaDB{s}, nil
}

// findProgram resolves a program: the given name or path, else the default
// name in PATH, else the Debian path.
func findProgram(kind, given, name, debianPath string) (string, error) {
	if given != "" {
		p, err := exec.LookPath(given)
		if err != nil {
			return "", fmt.Errorf("local %s: node n1: program %q not found or not executable: %v", kind, given, errors.Unwrap(err))
		}
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath(debianPath); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("local %s: node n1: %s not found in PATH nor at %s: run `make setup` (installs it with apt-get on Debian/Ubuntu)", kind, name, debianPath)
}

// mariadbEngine runs mariadbd.
type mariadbEngine struct {
	server, install string
}

func (e *mariadbEngine) kind() string               { return "mariadb" }
func (e *mariadbEngine) standardPort() int          { return backend.MariaDBPort }
func (e *mariadbEngine) stopSignal() syscall.Signal { return syscall.SIGTERM }

func (e *mariadbEngine) initPath(n *sqlNode) string { return filepath.Join(n.dir, "init.sql") }

// socketPath is the node's Unix socket: in its directory when the path
// fits the 107 bytes a socket address holds, else in the temporary
// directory, named after a hash of the node's directory. Not after the
// port: nodes of concurrent runs in network namespaces of their own all
// listen on 3306, and a second server refuses to start on a socket that
// another one uses.
func (e *mariadbEngine) socketPath(n *sqlNode) string {
	p := filepath.Join(n.dir, "mariadb.sock")
	if len(p) < 100 {
		return p
	}
	h := fnv.New64a()
	h.Write([]byte(n.dir))
	return filepath.Join(os.TempDir(), fmt.Sprintf("locktest-mariadb-%016x.sock", h.Sum64()))
}

func (e *mariadbEngine) prepare(ctx context.Context, n *sqlNode) error {
	if fi, err := os.Stat(n.dataDir); err == nil && !fi.IsDir() {
		return fmt.Errorf("local mariadb: node %s: data directory %s is not a directory (log %s)", n.name, n.dataDir, n.logPath)
	}
	if _, err := os.Stat(filepath.Join(n.dataDir, "mysql")); errors.Is(err, os.ErrNotExist) {
		if err := runLogged(ctx, n.logPath, e.install, backend.MariaDBInstallArgs(n.dataDir, "root"), nil); err != nil {
			return fmt.Errorf("local mariadb: node %s: %s: %v; log %s%s", n.name, filepath.Base(e.install), err, n.logPath, lastLine(logTail(n.logPath, 0, 1)))
		}
	}
	if err := os.WriteFile(e.initPath(n), []byte(backend.MariaDBInit), 0o644); err != nil {
		return fmt.Errorf("local mariadb: node %s: %w", n.name, err)
	}
	return nil
}

func (e *mariadbEngine) spec(n *sqlNode) spawnSpec {
	m := backend.MariaDBServer{DataDir: n.dataDir, Bind: n.host.ip(), Port: n.port, Socket: e.socketPath(n),
		PidFile: filepath.Join(n.dir, "mariadb.pid"), LogFile: n.logPath, InitFile: e.initPath(n), User: "root"}
	return spawnSpec{Bin: e.server, Args: m.Args()}
}

func (e *mariadbEngine) ping(ctx context.Context, addr string) error {
	return backend.PingMariaDB(ctx, addr)
}

func (e *mariadbEngine) cleanup(n *sqlNode) {
	if p := e.socketPath(n); !strings.HasPrefix(p, n.dir) {
		os.Remove(p)
	}
}

// runLogged runs a setup program to completion with its output appended to
// logPath.
func runLogged(ctx context.Context, logPath, bin string, args []string, attr *syscall.SysProcAttr) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = attr
	return cmd.Run()
}
