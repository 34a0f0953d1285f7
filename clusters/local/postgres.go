package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// postgresUser is the system user the server runs as when the driver is
// root: PostgreSQL refuses to run as root, and the Debian postgresql
// package creates this user.
const postgresUser = backend.PostgresUser

func init() {
	Register("postgres", func(o Options) (clusters.Cluster, error) {
		if o.Nodes > 1 {
			return nil, fmt.Errorf("local postgres: one server only, not %d nodes", o.Nodes)
		}
		return NewPostgres(SQLOptions{Dir: o.Dir, Host: o.host(0), NodeEnv: o.NodeEnv, Logger: o.Logger,
			Server: o.Params["postgres"], Init: o.Params["initdb"]})
	})
}

// Postgres is one postgres server, the node n1, started by this package
// (not the system cluster) from the Debian postgresql package's programs
// (/usr/lib/postgresql/<version>/bin, the highest version found), with its
// own data directory (Dir/nodes/n1/data, created by initdb at the first
// start), port, socket directory (Dir/nodes/n1, when the path is short
// enough for a socket address; else no Unix socket) and log
// (Dir/nodes/n1/postgres.log). Clients connect over TCP as the superuser
// "postgres" without a password, to the database "postgres".
//
// When the driver is root the server and initdb run as the system user
// postgres (see spawnSpec.Cred), and the node directory is given to that
// user. Settings are PostgreSQL's defaults, fsync and synchronous_commit
// included (a killed server keeps every committed row; initdb itself runs
// with --no-sync), except shared_buffers=16MB and no logging collector.
// Stop asks for a fast shutdown (SIGINT), which ends every session.
//
// It implements clusters.Cluster, Killer, Pauser and LogCollector; Kill,
// Pause and Resume act on the postmaster and every process it started,
// backends included. The backend registered with the local provider is "postgres";
// Options.Params may name the programs with the keys "postgres" and
// "initdb".
type Postgres struct {
	*sqlServer
}

// NewPostgres checks opts and returns a server that has not started yet.
// It fails if postgres or initdb cannot be found, or, when the driver is
// root, if there is no postgres user to run them as.
func NewPostgres(opts SQLOptions) (*Postgres, error) {
	server, initdb, err := findPostgres(opts.Server, opts.Init)
	if err != nil {
		return nil, err
	}
	e := &postgresEngine{server: server, initdb: initdb}
	if os.Geteuid() == 0 {
		u, err := user.Lookup(postgresUser)
		if err != nil {
			return nil, fmt.Errorf("local postgres: the server cannot run as root and there is no user %q to run it as: run `make setup` (the Debian postgresql package creates it)", postgresUser)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("local postgres: user %s has uid %q, gid %q", postgresUser, u.Uid, u.Gid)
		}
		e.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	s, err := newSQLServer(e, opts, "postgres.log")
	if err != nil {
		return nil, err
	}
	return &Postgres{s}, nil
}

// findPostgres resolves the server and initdb: as given, else next to each
// other in the highest /usr/lib/postgresql/<version>/bin, else in PATH.
func findPostgres(server, initdb string) (string, string, error) {
	if server != "" {
		s, err := findProgram("postgres", server, "", "")
		if err != nil {
			return "", "", err
		}
		if initdb == "" {
			initdb = filepath.Join(filepath.Dir(s), "initdb")
		}
		i, err := findProgram("postgres", initdb, "", "")
		return s, i, err
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(a, b int) bool { return pgVersion(dirs[a]) > pgVersion(dirs[b]) })
	for _, d := range dirs {
		s, i := filepath.Join(d, "postgres"), filepath.Join(d, "initdb")
		if initdb != "" {
			i = initdb
		}
		if isExecutable(s) && isExecutable(i) {
			return s, i, nil
		}
	}
	s, err1 := findProgram("postgres", "", "postgres", "/usr/lib/postgresql/15/bin/postgres")
	if initdb == "" {
		initdb = "initdb"
	}
	i, err2 := findProgram("postgres", initdb, "", "")
	if err1 != nil || err2 != nil {
		return "", "", errors.New("local postgres: node n1: postgres and initdb not found in /usr/lib/postgresql/*/bin nor in PATH: run `make setup` (installs postgresql with apt-get on Debian/Ubuntu)")
	}
	return s, i, nil
}

// pgVersion reads the major version out of /usr/lib/postgresql/<v>/bin.
func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// postgresEngine runs postgres.
type postgresEngine struct {
	server, initdb string
	// cred is the user the server runs as; nil runs it as the driver.
	cred *syscall.Credential
}

func (e *postgresEngine) kind() string               { return "postgres" }
func (e *postgresEngine) standardPort() int          { return backend.PostgresPort }
func (e *postgresEngine) stopSignal() syscall.Signal { return syscall.SIGINT }

// cleanup removes the System V shared memory segment a killed server left
// behind (its id is on the 7th line of postmaster.pid, which only a server
// that did not shut down cleanly leaves). A restart would remove it too,
// but a server killed and never restarted would leak it. It is called only
// once every process of the server is gone.
func (e *postgresEngine) cleanup(n *sqlNode) {
	b, err := os.ReadFile(filepath.Join(n.dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(lines[0])); err != nil || pidAlive(pid) {
		return
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return
	}
	if id, err := strconv.Atoi(f[1]); err == nil {
		removeShm(id)
	}
}

// socketDir is the node directory when a socket path in it fits the 107
// bytes of a socket address, else "" (no Unix socket: clients use TCP).
func (e *postgresEngine) socketDir(n *sqlNode) string {
	if len(filepath.Join(n.dir, ".s.PGSQL.65535.lock")) < 100 {
		return n.dir
	}
	return ""
}

func (e *postgresEngine) prepare(ctx context.Context, n *sqlNode) error {
	if fi, err := os.Stat(n.dataDir); err == nil && !fi.IsDir() {
		return fmt.Errorf("local postgres: node %s: data directory %s is not a directory (log %s)", n.name, n.dataDir, n.logPath)
	}
	if e.cred != nil {
		// The server writes its socket and lock file here.
		if err := os.Chown(n.dir, int(e.cred.Uid), int(e.cred.Gid)); err != nil {
			return fmt.Errorf("local postgres: node %s: %w", n.name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(n.dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		bin, args := e.initdb, backend.InitdbArgs(n.dataDir)
		if e.cred != nil {
			bin, args = "setpriv", append(setprivArgs(e.cred, e.initdb), args...)
		}
		if err := runLogged(ctx, n.logPath, bin, args, nil); err != nil {
			return fmt.Errorf("local postgres: node %s: initdb: %v; log %s%s", n.name, err, n.logPath, lastLine(logTail(n.logPath, 0, 1)))
		}
		hba := filepath.Join(n.dataDir, "pg_hba.conf")
		f, err := os.OpenFile(hba, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.WriteString(backend.PostgresHBA)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("local postgres: node %s: %w", n.name, err)
		}
	}
	return nil
}

func (e *postgresEngine) spec(n *sqlNode) spawnSpec {
	p := backend.PostgresServer{DataDir: n.dataDir, Listen: n.host.ip(), Port: n.port, SocketDir: e.socketDir(n)}
	return spawnSpec{Bin: e.server, Args: p.Args(), Cred: e.cred}
}

func (e *postgresEngine) ping(ctx context.Context, addr string) error {
	return backend.PingPostgres(ctx, addr)
}
