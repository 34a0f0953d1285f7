package backend

// How a one-node SQL server of locktest is set up,
// the same for every provider that runs one: the arguments that create a
// data directory (mariadb-install-db, initdb), the server's command line
// (mariadbd, postgres), what lets the impls in over TCP (MariaDB's init
// SQL, PostgreSQL's pg_hba.conf line), and the query that tells the server
// is ready, made with the drivers the impls use. Paths and addresses come
// from the provider; nothing here starts a process.
//
// The impls (impls/mysql, impls/pg) connect over TCP from any address
// without a password: MariaDB as root, PostgreSQL as the superuser
// postgres to the database postgres.

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// The ports a server listens on when it has an address of its own.
const (
	MariaDBPort  = 3306
	PostgresPort = 5432
)

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

// PostgresUser is both the superuser the impls log in as and the system
// user the server runs as when root starts it (PostgreSQL refuses to run
// as root; Debian's postgresql package creates this user).
const PostgresUser = "postgres"

// PostgresHBA is appended to the pg_hba.conf that initdb wrote: it trusts
// TCP clients from any address, so that clients on other hosts and in
// other network namespaces connect too.
const PostgresHBA = "\n# locktest: any client, no password (a throw-away test server)\nhost all all 0.0.0.0/0 trust\n"

// InitdbArgs returns the arguments of initdb that create the data
// directory dataDir: superuser postgres, trust authentication, UTF8 in the
// C locale, and no fsync of the new files (a server killed later still
// syncs what it commits).
func InitdbArgs(dataDir string) []string {
	return []string{"-D", dataDir, "-U", PostgresUser, "--auth=trust", "--no-sync",
		"--no-instructions", "-E", "UTF8", "--locale=C"}
}

// PostgresServer is the command line of one postgres server.
type PostgresServer struct {
	// DataDir is the data directory initdb created.
	DataDir string
	// Listen and Port are the TCP address the server listens on.
	Listen string
	Port   int
	// SocketDir is the directory of its Unix socket; empty: none.
	SocketDir string
}

// Args returns postgres's arguments: PostgreSQL's defaults, fsync and
// synchronous_commit included (a killed server keeps every committed row),
// but shared_buffers 16MB, 200 connections and no logging collector (the
// log is the server's standard error).
func (p PostgresServer) Args() []string {
	return []string{"-D", p.DataDir,
		"-c", "port=" + strconv.Itoa(p.Port),
		"-c", "listen_addresses=" + p.Listen,
		"-c", "unix_socket_directories=" + p.SocketDir,
		"-c", "logging_collector=off",
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=200",
	}
}

// PingPostgres runs a query on the server at addr (host:port) over TCP as
// postgres in the database postgres, as the pg-* impls connect.
func PingPostgres(ctx context.Context, addr string) error {
	_, err := PostgresDataDir(ctx, addr)
	return err
}

// PostgresDataDir asks the server at addr, as PingPostgres does, for its
// data directory (SHOW data_directory, which the superuser may): which
// server answers on a port.
func PostgresDataDir(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	c, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable connect_timeout=1", host, port, PostgresUser, PostgresUser))
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	var dir string
	if err := c.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return "", err
	}
	return dir, nil
}
