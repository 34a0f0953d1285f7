// How locktest asks the running servers of a lock service for their
// versions, each over its own protocol and with the client library locktest
// already uses for it: Redis's INFO server (go-redis), etcd's Status RPC
// (etcd's clientv3), ZooKeeper's four-letter word srvr, and SELECT
// version() for MariaDB/MySQL (go-sql-driver/mysql) and PostgreSQL (pgx).
// It needs only the nodes' addresses, so it works the same for every
// provider (local, docker, ssh), and it never fails: a server that cannot
// be asked is recorded as "unknown: " and the reason.

package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
)

// VersionTimeout bounds the question to one node, its connection included.
// The nodes are asked all at once, so Versions takes about as long as the
// slowest node, and at most this long.
const VersionTimeout = 2 * time.Second

// VersionUnknown is the prefix of the version of a server that could not be
// asked; the reason follows it.
const VersionUnknown = "unknown: "

// The server products Versions names, as keys of its map.
const (
	ProductRedis         = "redis"
	ProductRedisSentinel = "redis-sentinel"
	ProductValkey        = "valkey"
	ProductEtcd          = "etcd"
	ProductZooKeeper     = "zookeeper"
	ProductMariaDB       = "mariadb"
	ProductMySQL         = "mysql"
	ProductPostgreSQL    = "postgresql"
)

// VersionAnswer is one node's reply: the product it reports itself as and its
// version, or the error that kept it from answering.
type VersionAnswer struct {
	Node    string
	Product string
	Version string
	Err     error
}

// Versions asks every node of a cluster of backend (a backend name of the
// providers: "redis", "redis-sentinel", "redis-cluster", "etcd",
// "zookeeper", "mysql", "postgres") for its version, all nodes at once,
// each within VersionTimeout, and returns the versions by server product (see
// JoinVersions). The SQL servers are asked as the impls log in: params "user" and
// "password" (and "dbname" for PostgreSQL), by default root for MariaDB
// and postgres for PostgreSQL, without a password. A backend it does not
// know maps to "unknown: " and why. It never fails and never panics.
func Versions(ctx context.Context, backend string, nodes []clusters.Node, params map[string]string) map[string]string {
	ask, ok := askers[backend]
	if !ok {
		return map[string]string{backend: VersionUnknown + fmt.Sprintf("locktest does not know how to ask a %q server for its version", backend)}
	}
	if len(nodes) == 0 {
		return VersionsNotAsked(backend, "the cluster has no nodes")
	}
	answers := make([]VersionAnswer, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, VersionTimeout)
			defer cancel()
			a := VersionAnswer{Node: n.Name, Product: ProductOf(backend, n)}
			product, version, err := ask(nctx, n.Addr, params)
			if err != nil {
				a.Err = err
			} else {
				a.Version = version
				if product != "" {
					a.Product = product
				}
			}
			answers[i] = a
		})
	}
	wg.Wait()
	return JoinVersions(answers)
}

// VersionsNotAsked returns the versions of a cluster of backend whose servers were
// not asked, for the reason why (its nodes never came up, say): its
// product maps to "unknown: " and why.
func VersionsNotAsked(backend, why string) map[string]string {
	return map[string]string{ProductOf(backend, clusters.Node{}): VersionUnknown + why}
}

// ProductOf returns the product a node of backend is before it has said
// so itself: the key its version goes under when it cannot be asked.
// Redis sentinels (Role "sentinel") are "redis-sentinel", the other Redis
// nodes "redis"; a postgres node is "postgresql"; a mysql node is "mysql"
// (a MariaDB server that answers says "mariadb"); other backends are
// their own name.
func ProductOf(backend string, n clusters.Node) string {
	switch backend {
	case "redis", "redis-cluster", "redis-sentinel":
		if n.Role == "sentinel" {
			return ProductRedisSentinel
		}
		return ProductRedis
	case "postgres":
		return ProductPostgreSQL
	}
	return backend
}

// JoinVersions folds the nodes' answers into one version per product. A product's
// versions are joined in node order, each once ("7.0.15, 7.2.4"), so that
// a cluster whose nodes run different versions shows them all. Nodes that
// did not answer are added as "; unknown on n3: reason"; a product none of
// whose nodes answered is "unknown: reason", or, when the nodes failed for
// different reasons, "unknown: n1: reason; n2: reason".
func JoinVersions(answers []VersionAnswer) map[string]string {
	type acc struct {
		versions []string
		failed   []VersionAnswer
	}
	by := map[string]*acc{}
	var order []string
	for _, a := range answers {
		p := by[a.Product]
		if p == nil {
			p = &acc{}
			by[a.Product] = p
			order = append(order, a.Product)
		}
		if a.Err != nil {
			p.failed = append(p.failed, a)
		} else if !slices.Contains(p.versions, a.Version) {
			p.versions = append(p.versions, a.Version)
		}
	}
	out := make(map[string]string, len(by))
	for _, product := range order {
		p := by[product]
		same := true
		for _, f := range p.failed {
			same = same && f.Err.Error() == p.failed[0].Err.Error()
		}
		var failed []string
		for _, f := range p.failed {
			failed = append(failed, f.Node+": "+f.Err.Error())
		}
		switch {
		case len(p.versions) == 0 && same:
			out[product] = VersionUnknown + p.failed[0].Err.Error()
		case len(p.versions) == 0:
			out[product] = VersionUnknown + strings.Join(failed, "; ")
		case len(p.failed) == 0:
			out[product] = strings.Join(p.versions, ", ")
		default:
			out[product] = strings.Join(p.versions, ", ") + "; unknown on " + strings.Join(failed, "; ")
		}
	}
	return out
}

// asker asks the server at addr for its product ("" for the backend's
// own, ProductOf) and version.
type asker func(ctx context.Context, addr string, params map[string]string) (product, version string, err error)

var askers = map[string]asker{
	"redis":          askRedis,
	"redis-sentinel": askRedis,
	"redis-cluster":  askRedis,
	"etcd":           askEtcd,
	"zookeeper":      askZooKeeper,
	"mysql":          askMySQL,
	"postgres":       askPostgres,
}

// askRedis sends INFO server (RESP2, no CLIENT SETINFO, no retries).
func askRedis(ctx context.Context, addr string, _ map[string]string) (string, string, error) {
	c := goredis.NewClient(&goredis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true,
		DialTimeout: VersionTimeout, ReadTimeout: VersionTimeout, WriteTimeout: VersionTimeout, ContextTimeoutEnabled: true,
		MaxRetries: -1, DialerRetries: 1, PoolSize: 1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", "", fmt.Errorf("INFO server: %w", err)
	}
	return ParseRedisInfo(info)
}

// ParseRedisInfo reads the reply of INFO server: the version is
// redis_version, and the product "redis", or "redis-sentinel" when
// redis_mode is sentinel. A Valkey server (server_name:valkey) is
// "valkey" (or "valkey-sentinel") with its valkey_version. A reply without
// the version is an error.
func ParseRedisInfo(info string) (product, version string, err error) {
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	product, version = ProductRedis, fields["redis_version"]
	if fields["server_name"] == "valkey" && fields["valkey_version"] != "" {
		product, version = ProductValkey, fields["valkey_version"]
	}
	if version == "" {
		return "", "", fmt.Errorf("INFO server: no redis_version in %q", firstLine(info))
	}
	if fields["redis_mode"] == "sentinel" {
		product += "-sentinel"
	}
	return product, version, nil
}

// askEtcd calls the Maintenance API's Status on the member itself.
func askEtcd(ctx context.Context, addr string, _ map[string]string) (string, string, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: VersionTimeout, Logger: zap.NewNop()})
	if err != nil {
		return "", "", fmt.Errorf("etcd client: %w", err)
	}
	defer c.Close()
	st, err := c.Status(ctx, addr)
	if err != nil {
		return "", "", fmt.Errorf("status: %w", err)
	}
	if st.Version == "" {
		return "", "", errors.New("status: the member reports no version")
	}
	return ProductEtcd, st.Version, nil
}

// askZooKeeper sends the four-letter word srvr. (go-zookeeper's
// zk.FLWSrvr sends it too, but its parser wants the build date as
// MM/dd/yyyy, which ZooKeeper 3.5 and later no longer write, and drops the
// reply it cannot parse.)
func askZooKeeper(ctx context.Context, addr string, _ map[string]string) (string, string, error) {
	d := net.Dialer{Timeout: VersionTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, "srvr"); err != nil {
		return "", "", fmt.Errorf("srvr: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(conn, 64*1024))
	if err != nil && len(b) == 0 {
		return "", "", fmt.Errorf("srvr: %w", err)
	}
	v, err := ParseSrvr(string(b))
	return ProductZooKeeper, v, err
}

// ParseSrvr reads ZooKeeper's reply to srvr, whose first line is
// "Zookeeper version: 3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c,
// built on 2024-02-12 22:16 UTC", and returns the version, without the
// build date, and without the suffix "-${mvngit.commit.id}" of a build
// (Debian's) that left Maven's commit placeholder unexpanded. A server whose 4lw.commands.whitelist leaves srvr out
// replies that it is not executed; the error says so and quotes the reply,
// which is all such a server tells a client of itself (its client
// protocol carries no version).
func ParseSrvr(reply string) (string, error) {
	for line := range strings.Lines(reply) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Zookeeper version:"); ok {
			v, _, _ = strings.Cut(v, ", built on")
			if i := strings.Index(v, "-${"); i > 0 && strings.HasSuffix(v, "}") {
				v = v[:i] // a build that left Maven's commit placeholder unexpanded
			}
			if v = strings.TrimSpace(v); v != "" {
				return v, nil
			}
		}
	}
	reply = strings.TrimSpace(reply)
	switch {
	case reply == "":
		return "", errors.New("srvr: an empty reply (is srvr in the server's 4lw.commands.whitelist?)")
	case strings.Contains(reply, "not in the whitelist"):
		return "", fmt.Errorf("srvr is disabled on this server (not in its 4lw.commands.whitelist); it replied %q", firstLine(reply))
	}
	return "", fmt.Errorf("srvr: no version in %q", firstLine(reply))
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

// firstLine returns s up to its first line break.
