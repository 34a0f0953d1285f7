package backend

import (
	"context"
	"database/sql"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktest/locktest/clusters"
)

// MySQL is the backend of one MySQL-protocol server, and KindMariaDB the
// server it runs, mariadbd, with its port.
const (
	MySQL       = "mysql"
	KindMariaDB = "mariadb"
	MariaDBPort = 3306
)

// The products a MySQL-protocol server reports itself as (Versions).
const (
	ProductMariaDB = "mariadb"
	ProductMySQL   = "mysql"
)

func init() {
	Register(Service{
		Name: MySQL, Rank: 6, Kind: KindMariaDB, DefaultNodes: 1,
		Configure: oneServer,
		Locks:     ServerSessions,
		Version:   askMySQL,
		Reset:     resetMySQL,
		Residue:   mysqlResidue,
	}, mariadbKind)
}

// mariadbKind is one MariaDB server, backend mysql: mariadb-install-db
// makes its data directory at the first start (naming the server it
// bootstraps with), and mariadbd runs on the command line of
// MariaDBServer, as the provider's user, its error log to the node's log
// (standard error when the provider takes it from there), with the init
// file that lets root in over TCP. Both keep their temporary files in the
// node's own folder (tmp), never in the host's /tmp: an install beside
// another node's, both in /tmp, once failed deleting the other's
// "#sql-temptable" file.
var mariadbKind = &Kind{
	Name:         KindMariaDB,
	Ports:        []Port{{Name: "client", Base: MariaDBPort, Step: 1}},
	Program:      "mariadbd",
	Ready:        PingMariaDB,
	ReadyTimeout: 90 * time.Second,
	Log:          "mariadb.log",
	Install:      "install mariadb-server",
	Programs: []HostProgram{{Name: "mariadbd", Debian: "/usr/sbin/mariadbd", Param: true},
		{Name: "mariadb-install-db", Debian: "/usr/bin/mariadb-install-db", Param: true}},
	Image:        Image{Official: "mariadb:11.8", Rootfs: RootfsMariaDB},
	Several:      true,
	DataDirQuery: MariaDBDataDir,
	Launch: func(p Placement) (Launch, error) {
		if p.Socket == "" {
			return Launch{}, fmt.Errorf("mariadb: node %s: no path for mariadbd's socket (it always makes one)", p.Node.Name)
		}
		user := p.User
		if user == "" {
			user = "root"
		}
		logf := p.LogFile
		if logf == "" {
			logf = "/dev/stderr"
		}
		initFile, tmp := path.Join(p.Dir, "init.sql"), path.Join(p.Dir, "tmp")
		m := MariaDBServer{DataDir: p.DataDir, Bind: p.Bind, Port: p.Node.Ports[0], Socket: p.Socket,
			PidFile: path.Join(p.Dir, "mariadb.pid"), LogFile: logf, InitFile: initFile, User: user, TmpDir: tmp}
		server := p.Bin("mariadbd")
		return Launch{
			Files: []File{{Path: initFile, Data: MariaDBInit}},
			Dirs:  []string{tmp},
			Init: &Init{Done: "mysql", Argv: append([]string{p.Bin("mariadb-install-db")}, append(MariaDBInstallArgs(p.DataDir, user), "--tmpdir="+tmp)...),
				Env: []string{"MYSQLD_BOOTSTRAP=" + server}},
			Argv: append([]string{server}, m.Args()...),
		}, nil
	},
}

// MariaDBInit is the file the server runs at every start (--init-file),
// before it accepts connections: it lets root in over TCP from any address
// without a password, so that clients on other hosts and in other network
// namespaces connect too.
const MariaDBInit = `CREATE USER IF NOT EXISTS 'root'@'%';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
`

// mariadbInnoDB are the storage settings of both the install and the
// server, small for a quick start; the log file size must match between
// them.
var mariadbInnoDB = []string{"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M", "--innodb-log-buffer-size=1M"}

// MariaDBInstallArgs returns the arguments of mariadb-install-db that
// create the data directory dataDir for a server running as the system
// user user: no option file read, root without a password (normal
// authentication, not the Unix socket's), no test database, no host name
// in the grant tables and no look-up of the host's name (--force: the
// script would otherwise fail on a host whose name does not resolve, and
// needs resolveip), and the server's InnoDB settings.
func MariaDBInstallArgs(dataDir, user string) []string {
	return append([]string{"--no-defaults", "--datadir=" + dataDir, "--user=" + user,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve", "--force"}, mariadbInnoDB...)
}

// MariaDBServer is the command line of one mariadbd.
type MariaDBServer struct {
	// DataDir is the data directory MariaDBInstallArgs created.
	DataDir string
	// Bind and Port are the TCP address the server listens on.
	Bind string
	Port int
	// Socket is the path of its Unix socket (at most 107 bytes).
	Socket string
	// PidFile and LogFile are where it writes its pid and its error log.
	PidFile, LogFile string
	// InitFile holds MariaDBInit.
	InitFile string
	// User is the system user the server runs as ("root" when started
	// by root, which mariadbd otherwise refuses).
	User string
	// TmpDir, when set, is where the server keeps its temporary files
	// (its default: the host's /tmp, shared with every other server).
	TmpDir string
}

// Args returns mariadbd's arguments: no option file read; skip-name-resolve;
// binary log and performance schema off; 500 connections; small InnoDB
// buffers and logs; otherwise MariaDB's defaults, durability included
// (innodb_flush_log_at_trx_commit=1), so that a killed server keeps every
// committed row.
func (m MariaDBServer) Args() []string {
	args := []string{"--no-defaults",
		"--datadir=" + m.DataDir,
		"--port=" + strconv.Itoa(m.Port),
		"--bind-address=" + m.Bind,
		"--socket=" + m.Socket,
		"--pid-file=" + m.PidFile,
		"--log-error=" + m.LogFile,
		"--init-file=" + m.InitFile,
		"--user=" + m.User,
		"--skip-name-resolve",
		"--skip-log-bin",
		"--performance-schema=OFF",
		"--max-connections=500",
		"--max-connect-errors=1000000",
	}
	if m.TmpDir != "" {
		args = append(args, "--tmpdir="+m.TmpDir)
	}
	return append(args, mariadbInnoDB...)
}

// PingMariaDB runs a query on the server at addr (host:port) over TCP as
// root without a password, as the mysql-* impls connect.
func PingMariaDB(ctx context.Context, addr string) error {
	_, err := MariaDBDataDir(ctx, addr)
	return err
}

// MariaDBDataDir asks the server at addr, as PingMariaDB does, for its
// data directory (@@datadir), without a trailing slash: which server
// answers on a port.
func MariaDBDataDir(ctx context.Context, addr string) (string, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", addr
	cfg.Timeout = 500 * time.Millisecond
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return "", err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	var dir string
	if err := db.QueryRowContext(ctx, "SELECT @@datadir").Scan(&dir); err != nil {
		return "", err
	}
	return strings.TrimSuffix(dir, "/"), nil
}

// askMySQL runs SELECT version() as the mysql impls log in.
func askMySQL(ctx context.Context, addr string, params map[string]string) (string, string, error) {
	mc := mysql.NewConfig()
	mc.User, mc.Net, mc.Addr = "root", "tcp", addr
	if u := params["user"]; u != "" {
		mc.User = u
	}
	mc.Passwd = params["password"]
	mc.Timeout, mc.ReadTimeout, mc.WriteTimeout = VersionTimeout, VersionTimeout, VersionTimeout
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return "", "", err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", "", fmt.Errorf("SELECT version(): %w", err)
	}
	product, version := ParseMySQLVersion(v)
	return product, version, nil
}

// ParseMySQLVersion reads the result of SELECT version() on a MySQL
// protocol server: "mariadb" when it names MariaDB
// ("10.11.6-MariaDB-0+deb12u1"), else "mysql"; the version is the result
// as it is.
func ParseMySQLVersion(v string) (product, version string) {
	v = strings.TrimSpace(v)
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return ProductMariaDB, v
	}
	return ProductMySQL, v
}

// mysqlSystemSchemas are the databases a fresh MariaDB server has.
var mysqlSystemSchemas = []string{"information_schema", "mysql", "performance_schema", "sys"}

// mysqlOthers selects the other clients' connections: every connection
// but the asking one and the server's own threads.
const mysqlOthers = "SELECT ID, USER, COALESCE(HOST, '') FROM information_schema.PROCESSLIST " +
	"WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Daemon', 'Binlog Dump') AND USER NOT IN ('system user', 'event_scheduler')"

// mysqlOthersState is mysqlOthers with what each connection does.
const mysqlOthersState = "SELECT ID, USER, COALESCE(HOST, ''), COMMAND, COALESCE(STATE, ''), COALESCE(LEFT(INFO, 60), '') FROM information_schema.PROCESSLIST " +
	"WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Daemon', 'Binlog Dump') AND USER NOT IN ('system user', 'event_scheduler')"

// mysqlOpen opens a pool of one connection to the server at addr as root,
// as the impls log in.
func mysqlOpen(addr string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", addr
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = resetTimeout, resetTimeout, resetTimeout
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	return db, nil
}

// resetMySQL is the mysql backend's Reset: it kills every other client's
// connection, which ends their GET_LOCK locks, row locks and open
// transactions, and drops every database a fresh server lacks (the
// impls' locktest database with its lock tables and their
// AUTO_INCREMENT counters). It kills until no other connection is left,
// so that one a client made meanwhile ends too.
func resetMySQL(ctx context.Context, l Layout, nodes []clusters.Node) error {
	for _, n := range nodes {
		if err := func() error {
			db, err := mysqlOpen(n.Addr)
			if err != nil {
				return err
			}
			defer db.Close()
			// Kill every other connection until none is left: one made
			// meanwhile is killed in turn.
			if err := Poll(ctx, func() error {
				left, err := mysqlList(ctx, db, mysqlOthersState)
				if err != nil || len(left) == 0 {
					return err
				}
				for _, o := range left {
					id, _, _ := strings.Cut(o, " ")
					// A connection that ended meanwhile is no error.
					if _, err := db.ExecContext(ctx, "KILL CONNECTION "+id); err != nil && !strings.Contains(err.Error(), "Unknown thread") {
						return fmt.Errorf("KILL CONNECTION %s: %w", id, err)
					}
				}
				return fmt.Errorf("connections left: %s", strings.Join(left, "; "))
			}); err != nil {
				return err
			}
			dbs, err := mysqlList(ctx, db, "SHOW DATABASES")
			if err != nil {
				return err
			}
			for _, d := range dbs {
				if !slices.Contains(mysqlSystemSchemas, d) {
					if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+strings.ReplaceAll(d, "`", "``")+"`"); err != nil {
						return fmt.Errorf("DROP DATABASE %s: %w", d, err)
					}
				}
			}
			return nil
		}(); err != nil {
			return fmt.Errorf("%s: reset %s: %w", l.Backend, n.Name, err)
		}
	}
	return nil
}

// mysqlResidue is the mysql backend's Residue: the databases a fresh
// server lacks, their tables, and the other clients' connections (which
// may hold GET_LOCK locks) still there after closingGrace.
func mysqlResidue(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error) {
	var out []string
	for _, n := range nodes {
		prefix := fmt.Sprintf("%s %s: ", l.Backend, n.Name)
		if err := func() error {
			db, err := mysqlOpen(n.Addr)
			if err != nil {
				return err
			}
			defer db.Close()
			dbs, err := mysqlList(ctx, db, "SHOW DATABASES")
			if err != nil {
				return err
			}
			var extra []string
			for _, d := range dbs {
				if !slices.Contains(mysqlSystemSchemas, d) {
					extra = append(extra, d)
				}
			}
			out = append(out, listed(prefix+"database ", extra)...)
			tables, err := mysqlList(ctx, db, "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES "+
				"WHERE TABLE_SCHEMA NOT IN ('information_schema', 'mysql', 'performance_schema', 'sys') ORDER BY 1")
			if err != nil {
				return err
			}
			out = append(out, listed(prefix+"table ", tables)...)
			others, err := lasting(ctx, func() ([]string, error) { return mysqlList(ctx, db, mysqlOthers) })
			if err != nil {
				return err
			}
			out = append(out, listed(prefix+"connection ", others)...)
			return nil
		}(); err != nil {
			return out, fmt.Errorf("%s: residue of %s: %w", l.Backend, n.Name, err)
		}
	}
	return out, nil
}

// mysqlList runs query and returns its rows, each row's columns joined by
// spaces.
func mysqlList(ctx context.Context, db *sql.DB, query string) ([]string, error) {
	qctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	rows, err := db.QueryContext(qctx, query)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = v.String
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out, rows.Err()
}

// firstWords is the start of a query, for errors.
func firstWords(q string) string {
	if len(q) > 40 {
		return q[:40] + "…"
	}
	return q
}
