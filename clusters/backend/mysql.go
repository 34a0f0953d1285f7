package backend

import (
	"context"
	"database/sql"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
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
	}, mariadbKind)
}

// mariadbKind is one MariaDB server, backend mysql: mariadb-install-db
// makes its data directory at the first start (naming the server it
// bootstraps with), and mariadbd runs on the command line of
// MariaDBServer, as the provider's user, its error log to the node's log
// (standard error when the provider takes it from there), with the init
// file that lets root in over TCP.
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
		initFile := path.Join(p.Dir, "init.sql")
		m := MariaDBServer{DataDir: p.DataDir, Bind: p.Bind, Port: p.Node.Ports[0], Socket: p.Socket,
			PidFile: path.Join(p.Dir, "mariadb.pid"), LogFile: logf, InitFile: initFile, User: user}
		server := p.Bin("mariadbd")
		return Launch{
			Files: []File{{Path: initFile, Data: MariaDBInit}},
			Init: &Init{Done: "mysql", Argv: append([]string{p.Bin("mariadb-install-db")}, MariaDBInstallArgs(p.DataDir, user)...),
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
}

// Args returns mariadbd's arguments: no option file read; skip-name-resolve;
// binary log and performance schema off; 500 connections; small InnoDB
// buffers and logs; otherwise MariaDB's defaults, durability included
// (innodb_flush_log_at_trx_commit=1), so that a killed server keeps every
// committed row.
func (m MariaDBServer) Args() []string {
	return append([]string{"--no-defaults",
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
	}, mariadbInnoDB...)
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
