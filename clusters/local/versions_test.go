package local

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	etcdversion "go.etcd.io/etcd/api/v3/version"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// The tests here start real servers and check that backend.Versions
// reads from each, over its own protocol, the version its program
// reports on the command line.

// programVersion runs name with args and returns the first submatch of re
// in its output.
func programVersion(t *testing.T, re string, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	m := regexp.MustCompile(re).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s %s: no version (%s) in %q", name, strings.Join(args, " "), re, out)
	}
	return string(m[1])
}

// askVersions asks the nodes of backend for their versions and checks
// that exactly the products of want answered, with those versions.
func askVersions(t *testing.T, b string, nodes []clusters.Node, want map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := backend.Versions(ctx, b, nodes, nil)
	t.Logf("%s: %v", b, got)
	for product, v := range want {
		if v == "" {
			t.Fatalf("the expected version of %s is empty", product)
		}
		if got[product] != v {
			t.Errorf("%s: version %q, want %q (the program's own)", product, got[product], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("versions %v, want only %v", got, want)
	}
}

// redisServerVersion is the version `redis-server --version` reports.
func redisServerVersion(t *testing.T, bin string) string {
	return programVersion(t, `\bv=(\S+)`, bin, "--version")
}

// TestRedisVersions: three independent redis-servers (as the redlock
// impls use them) report INFO server's redis_version, once.
func TestRedisVersions(t *testing.T) {
	r := startRedis(t, Options{Nodes: 3})
	askVersions(t, "redis", r.Nodes(), map[string]string{backend.ProductRedis: redisServerVersion(t, "redis-server")})
}

// TestSentinelVersions: the data nodes of a redis-sentinel cluster are
// "redis" and its sentinels, which report redis_mode sentinel,
// "redis-sentinel".
func TestSentinelVersions(t *testing.T) {
	s := startSentinel(t, 3)
	v := redisServerVersion(t, "redis-server")
	askVersions(t, "redis-sentinel", s.Nodes(), map[string]string{
		backend.ProductRedis: v, backend.ProductRedisSentinel: programVersion(t, `\bv=(\S+)`, "redis-sentinel", "--version")})
}

// TestEtcdVersions: the members, locktest's embedded etcd, report the
// version of the etcd module this binary was built with.
func TestEtcdVersions(t *testing.T) {
	e := startEtcd(t)
	askVersions(t, "etcd", e.Nodes(), map[string]string{backend.ProductEtcd: etcdversion.Version})
}

// TestZooKeeperVersions: srvr's version is the one the jars the peers
// run report (VersionInfoMain), with or without the build's commit.
func TestZooKeeperVersions(t *testing.T) {
	opts := kindOptions(t, nil)
	opts.Nodes = 1
	z := startKinds(t, backend.ZooKeeper, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jar := programVersion(t, `version (\S+)`, "java", "-cp", backend.ZooKeeperClassPath(backend.DebianJarDir), "org.apache.zookeeper.version.VersionInfoMain")
	got := backend.Versions(ctx, "zookeeper", z.Nodes(), nil)
	t.Logf("zookeeper: %v (the jar: %s)", got, jar)
	v := got[backend.ProductZooKeeper]
	if len(got) != 1 || (v != jar && !strings.HasPrefix(v, jar+"-")) {
		t.Errorf("versions %v, want only zookeeper %s", got, jar)
	}
}

// TestMariaDBVersions: SELECT version() names MariaDB and is the version
// `mariadbd --version` reports.
func TestMariaDBVersions(t *testing.T) {
	c := startSQL(t, mariadbBackend)
	bin := c.bin("mariadbd")
	askVersions(t, "mysql", c.Nodes(), map[string]string{backend.ProductMariaDB: programVersion(t, `Ver (\S+)`, bin, "--version")})
}

// TestPostgresVersions: SELECT version() gives the version and packager's
// note that `postgres --version` reports.
func TestPostgresVersions(t *testing.T) {
	c := startSQL(t, postgresBackend)
	bin := c.bin("postgres")
	askVersions(t, "postgres", c.Nodes(), map[string]string{backend.ProductPostgreSQL: programVersion(t, `\(PostgreSQL\) (.+?)\s*$`, bin, "--version")})
}
