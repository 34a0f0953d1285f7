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
		Reset:     resetPostgres,
		Residue:   postgresResidue,
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

// The queries of resetPostgres and postgresResidue: what a fresh server
// lacks, each row one thing.
const (
	// pgOthers are the other clients' sessions, which may hold advisory
	// and row locks.
	pgOthers = "SELECT pid::text || ' ' || COALESCE(usename, '') || ' ' || COALESCE(application_name, '') FROM pg_stat_activity " +
		"WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' ORDER BY pid"
	// pgRelations are the tables, sequences and views outside the
	// system's schemas, with their kind's DROP word.
	pgRelations = "SELECT format('%I.%I', n.nspname, c.relname) || ' ' || CASE c.relkind WHEN 'S' THEN 'SEQUENCE' " +
		"WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END " +
		"FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace " +
		"WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%' " +
		"AND c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f') AND c.relispartition = false ORDER BY 1"
	// pgSchemas are the schemas a fresh database lacks.
	pgSchemas = "SELECT format('%I', nspname) FROM pg_namespace WHERE nspname NOT IN ('public', 'information_schema') " +
		"AND nspname NOT LIKE 'pg\\_%' ORDER BY 1"
	// pgDatabases are the databases a fresh server lacks.
	pgDatabases = "SELECT format('%I', datname) FROM pg_database WHERE datname NOT IN ('postgres', 'template0', 'template1') ORDER BY 1"
	// pgAdvisory are the advisory locks held or awaited.
	pgAdvisory = "SELECT pid::text || ' ' || classid::text || ':' || objid::text || ' ' || mode FROM pg_locks WHERE locktype = 'advisory' ORDER BY 1"
	// pgPrepared are the prepared transactions.
	pgPrepared = "SELECT gid FROM pg_prepared_xacts ORDER BY 1"
)

// pgConnect connects to the server at addr as the impls do: as postgres,
// to the database postgres.
func pgConnect(ctx context.Context, addr string) (*pgx.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	return pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable connect_timeout=%d",
		host, port, PostgresUser, PostgresUser, int(resetTimeout.Seconds())))
}

// pgList runs query, whose rows have one text column, and returns them.
func pgList(ctx context.Context, c *pgx.Conn, query string) ([]string, error) {
	qctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	rows, err := c.Query(qctx, query)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	return out, nil
}

// resetPostgres is the postgres backend's Reset: it ends every other
// client's session (pg_terminate_backend), which ends their advisory
// and row locks and open transactions, waits until they are gone, and
// drops every database, schema, table, sequence and view a fresh server
// lacks (the impls' lock tables and their fencing sequence).
func resetPostgres(ctx context.Context, l Layout, nodes []clusters.Node) error {
	for _, n := range nodes {
		if err := func() error {
			c, err := pgConnect(ctx, n.Addr)
			if err != nil {
				return err
			}
			defer c.Close(context.WithoutCancel(ctx))
			qctx, cancel := context.WithTimeout(ctx, resetTimeout)
			defer cancel()
			if _, err := c.Exec(qctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"); err != nil {
				return fmt.Errorf("pg_terminate_backend: %w", err)
			}
			if err := Poll(ctx, func() error {
				left, err := pgList(ctx, c, pgOthers)
				if err == nil && len(left) > 0 {
					err = fmt.Errorf("%d sessions left", len(left))
				}
				return err
			}); err != nil {
				return err
			}
			for _, q := range []struct{ list, drop string }{{pgDatabases, "DROP DATABASE IF EXISTS %s WITH (FORCE)"}, {pgSchemas, "DROP SCHEMA IF EXISTS %s CASCADE"}} {
				names, err := pgList(ctx, c, q.list)
				if err != nil {
					return err
				}
				for _, name := range names {
					if _, err := c.Exec(qctx, fmt.Sprintf(q.drop, name)); err != nil {
						return fmt.Errorf(q.drop+": %w", name, err)
					}
				}
			}
			rels, err := pgList(ctx, c, pgRelations)
			if err != nil {
				return err
			}
			for _, r := range rels {
				name, kind, _ := strings.Cut(r, " ")
				if _, err := c.Exec(qctx, "DROP "+kind+" IF EXISTS "+name+" CASCADE"); err != nil {
					return fmt.Errorf("DROP %s %s: %w", kind, name, err)
				}
			}
			return nil
		}(); err != nil {
			return fmt.Errorf("%s: reset %s: %w", l.Backend, n.Name, err)
		}
	}
	return nil
}

// postgresResidue is the postgres backend's Residue: the other clients'
// sessions (those still there after closingGrace: a session that was
// closing, such as Reset's own, is gone by then), the advisory locks,
// the prepared transactions, and the databases, schemas, tables,
// sequences and views a fresh server lacks.
func postgresResidue(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error) {
	var out []string
	for _, n := range nodes {
		prefix := fmt.Sprintf("%s %s: ", l.Backend, n.Name)
		if err := func() error {
			c, err := pgConnect(ctx, n.Addr)
			if err != nil {
				return err
			}
			defer c.Close(context.WithoutCancel(ctx))
			for _, q := range []struct{ what, query string }{
				{"session ", pgOthers}, {"advisory lock ", pgAdvisory}, {"prepared transaction ", pgPrepared},
				{"database ", pgDatabases}, {"schema ", pgSchemas}, {"", pgRelations},
			} {
				items, err := lasting(ctx, func() ([]string, error) { return pgList(ctx, c, q.query) })
				if err != nil {
					return err
				}
				if q.what == "" { // "public.t TABLE" reads as "table public.t"
					for i, it := range items {
						name, kind, _ := strings.Cut(it, " ")
						items[i] = strings.ToLower(kind) + " " + name
					}
				}
				out = append(out, listed(prefix+q.what, items)...)
			}
			return nil
		}(); err != nil {
			return out, fmt.Errorf("%s: residue of %s: %w", l.Backend, n.Name, err)
		}
	}
	return out, nil
}
