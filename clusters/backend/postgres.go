package backend

import (
	"context"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktest/locktest/clusters"
)

// Postgres is the backend of one PostgreSQL server, and KindPostgres the
// server, PostgreSQL's postmaster, with its port.
const (
	Postgres     = "postgres"
	KindPostgres = "postgres"
	PostgresPort = 5432
)

// ProductPostgreSQL is the product a PostgreSQL server is (Versions).
const ProductPostgreSQL = "postgresql"

func init() {
	Register(Service{
		Name: Postgres, Rank: 7, Kind: KindPostgres, DefaultNodes: 1,
		Configure: oneServer,
		Locks:     ServerSessions,
		Version:   askPostgres,
		Product:   func(clusters.Node) string { return ProductPostgreSQL },
	}, postgresKind)
}

// postgresKind is one PostgreSQL server: initdb makes its data directory
// at the first start, with the pg_hba.conf line that trusts any client,
// and postgres runs on the command line of PostgresServer, as the
// postgres user (it refuses root), its log on standard error.
var postgresKind = &Kind{
	Name:         KindPostgres,
	Ports:        []Port{{Name: "client", Base: PostgresPort, Step: 1}},
	Program:      "postgres",
	Ready:        PingPostgres,
	ReadyTimeout: 90 * time.Second,
	Log:          "postgres.log",
	Stdout:       true,
	Install:      "install postgresql",
	Programs: []HostProgram{{Name: "postgres", Debian: "/usr/lib/postgresql/*/bin/postgres", Param: true},
		{Name: "initdb", Debian: "/usr/lib/postgresql/*/bin/initdb", Param: true}},
	Image:        Image{Official: "postgres:17", Rootfs: RootfsPostgres},
	RunAs:        PostgresUser,
	Several:      true,
	StopSignal:   syscall.SIGINT, // fast shutdown: ends the sessions, as a kill would not
	DataDirQuery: PostgresDataDir,
	Launch: func(p Placement) (Launch, error) {
		srv := PostgresServer{DataDir: p.DataDir, Listen: p.Bind, Port: p.Node.Ports[0], SocketDir: p.SocketDir}
		return Launch{
			Init: &Init{Done: "PG_VERSION", Argv: append([]string{p.Bin("initdb")}, InitdbArgs(p.DataDir)...),
				Append: []File{{Path: path.Join(p.DataDir, "pg_hba.conf"), Data: PostgresHBA}}},
			Argv: append([]string{p.Bin("postgres")}, srv.Args()...),
		}, nil
	},
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

// askPostgres runs SELECT version() as the pg impls log in.
func askPostgres(ctx context.Context, addr string, params map[string]string) (string, string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", err
	}
	param := func(k, def string) string {
		if v := params[k]; v != "" {
			return v
		}
		return def
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable connect_timeout=%d",
		host, port, param("user", "postgres"), param("dbname", "postgres"), int(VersionTimeout.Seconds())))
	if err != nil {
		return "", "", err
	}
	cfg.Password = params["password"]
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", "", err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = c.Close(cctx)
	}()
	var v string
	if err := c.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", "", fmt.Errorf("SELECT version(): %w", err)
	}
	return ProductPostgreSQL, ParsePostgresVersion(v), nil
}

// ParsePostgresVersion reads the result of SELECT version() on
// PostgreSQL, "PostgreSQL 15.6 (Debian 15.6-0+deb12u1) on
// x86_64-pc-linux-gnu, compiled by gcc …, 64-bit", and returns the
// version with its packager's note, "15.6 (Debian 15.6-0+deb12u1)",
// without the platform and compiler. A result in another form is returned
// as it is.
func ParsePostgresVersion(v string) string {
	v = strings.TrimSpace(v)
	rest, ok := strings.CutPrefix(v, "PostgreSQL ")
	if !ok {
		return v
	}
	if i := strings.Index(rest, " on "); i > 0 {
		rest = rest[:i]
	}
	return strings.TrimSpace(rest)
}
