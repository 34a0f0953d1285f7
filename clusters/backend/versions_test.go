package backend

import (
	"context"
	"errors"
	"maps"
	"net"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters"
)

func TestParseRedisInfo(t *testing.T) {
	for _, tt := range []struct {
		name, info       string
		product, version string
		err              string
	}{
		{name: "redis", info: "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nredis_mode:standalone\r\nos:Linux\r\n",
			product: "redis", version: "7.0.15"},
		{name: "cluster node", info: "# Server\r\nredis_version:7.2.4\r\nredis_mode:cluster\r\n", product: "redis", version: "7.2.4"},
		{name: "sentinel", info: "# Server\r\nredis_version:7.0.15\r\nredis_mode:sentinel\r\n", product: "redis-sentinel", version: "7.0.15"},
		{name: "valkey", info: "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\nredis_mode:standalone\r\n",
			product: "valkey", version: "8.0.1"},
		{name: "valkey sentinel", info: "redis_version:7.2.4\nserver_name:valkey\nvalkey_version:8.0.1\nredis_mode:sentinel\n",
			product: "valkey-sentinel", version: "8.0.1"},
		{name: "no version", info: "# Server\r\nredis_mode:standalone\r\n", err: `no redis_version in "# Server"`},
		{name: "empty", info: "", err: "no redis_version"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			product, version, err := ParseRedisInfo(tt.info)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil || product != tt.product || version != tt.version {
				t.Errorf("got %q %q %v, want %q %q", product, version, err, tt.product, tt.version)
			}
		})
	}
}

func TestParseSrvr(t *testing.T) {
	const full = "Zookeeper version: 3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c, built on 2024-02-12 22:16 UTC\n" +
		"Latency min/avg/max: 0/0.0/0\nReceived: 1\nSent: 0\nConnections: 1\nOutstanding: 0\nZxid: 0x100000000\nMode: leader\nNode count: 5\n"
	for _, tt := range []struct {
		name, reply, want, err string
	}{
		{name: "3.8", reply: full, want: "3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c"},
		{name: "3.4 date", reply: "Zookeeper version: 3.4.13-2d71af4dbe22557fda74f9a9b4309b15a7487f03, built on 06/29/2018 04:05 GMT\nMode: standalone\n",
			want: "3.4.13-2d71af4dbe22557fda74f9a9b4309b15a7487f03"},
		{name: "debian", reply: "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\nMode: standalone\n", want: "3.8.0"},
		{name: "no build date", reply: "Zookeeper version: 3.9.2\n", want: "3.9.2"},
		{name: "disabled", reply: "srvr is not executed because it is not in the whitelist.\n",
			err: `srvr is disabled on this server (not in its 4lw.commands.whitelist); it replied "srvr is not executed because it is not in the whitelist."`},
		{name: "not serving", reply: "This ProductZooKeeper instance is not currently serving requests\n",
			err: `srvr: no version in "This ProductZooKeeper instance is not currently serving requests"`},
		{name: "empty", reply: "", err: "srvr: an empty reply"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSrvr(tt.reply)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseSQLVersions(t *testing.T) {
	for _, tt := range []struct{ in, product, version string }{
		{"10.11.6-ProductMariaDB-0+deb12u1", "mariadb", "10.11.6-ProductMariaDB-0+deb12u1"},
		{"11.4.2-ProductMariaDB-ubu2404-log", "mariadb", "11.4.2-ProductMariaDB-ubu2404-log"},
		{"8.0.36", "mysql", "8.0.36"},
		{" 8.4.0-commercial\n", "mysql", "8.4.0-commercial"},
	} {
		if p, v := ParseMySQLVersion(tt.in); p != tt.product || v != tt.version {
			t.Errorf("ParseMySQLVersion(%q) = %q %q, want %q %q", tt.in, p, v, tt.product, tt.version)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"PostgreSQL 15.6 (Debian 15.6-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit",
			"15.6 (Debian 15.6-0+deb12u1)"},
		{"PostgreSQL 16.3 on aarch64-unknown-linux-musl, compiled by gcc (Alpine 13.2.1_git20240309) 13.2.1 20240309, 64-bit", "16.3"},
		{"PostgreSQL 17beta1", "17beta1"},
		{"CockroachDB CCL v23.2.4 (x86_64-pc-linux-gnu, built 2024/04/01 17:33:39, go1.21.9 X:nocoverageredesign)",
			"CockroachDB CCL v23.2.4 (x86_64-pc-linux-gnu, built 2024/04/01 17:33:39, go1.21.9 X:nocoverageredesign)"},
	} {
		if got := ParsePostgresVersion(tt.in); got != tt.want {
			t.Errorf("ParsePostgresVersion(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestJoin(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:7003: connect: connection refused")
	for _, tt := range []struct {
		name    string
		answers []VersionAnswer
		want    map[string]string
	}{
		{"one node", []VersionAnswer{{Node: "n1", Product: "redis", Version: "7.0.15"}}, map[string]string{"redis": "7.0.15"}},
		{"all alike", []VersionAnswer{{"n1", "etcd", "3.5.17", nil}, {"n2", "etcd", "3.5.17", nil}, {"n3", "etcd", "3.5.17", nil}},
			map[string]string{"etcd": "3.5.17"}},
		{"mixed, in node order", []VersionAnswer{{"n1", "redis", "7.2.4", nil}, {"n2", "redis", "7.0.15", nil}, {"n3", "redis", "7.2.4", nil}},
			map[string]string{"redis": "7.2.4, 7.0.15"}},
		{"sentinels apart", []VersionAnswer{{"n1", "redis", "7.0.15", nil}, {"s1", "redis-sentinel", "7.0.15", nil}},
			map[string]string{"redis": "7.0.15", "redis-sentinel": "7.0.15"}},
		{"one node silent", []VersionAnswer{{"n1", "redis", "7.0.15", nil}, {"n2", "redis", "", refused}},
			map[string]string{"redis": "7.0.15; unknown on n2: " + refused.Error()}},
		{"none answered, one reason", []VersionAnswer{{"n1", "zookeeper", "", context.DeadlineExceeded}, {"n2", "zookeeper", "", context.DeadlineExceeded}},
			map[string]string{"zookeeper": "unknown: context deadline exceeded"}},
		{"none answered, several reasons", []VersionAnswer{{"n1", "zookeeper", "", context.DeadlineExceeded}, {"n2", "zookeeper", "", refused}},
			map[string]string{"zookeeper": "unknown: n1: context deadline exceeded; n2: " + refused.Error()}},
		{"nothing", nil, map[string]string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := JoinVersions(tt.answers); !maps.Equal(got, tt.want) {
				t.Errorf("Join = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProductOf(t *testing.T) {
	for _, tt := range []struct {
		backend, role, want string
	}{
		{"redis", "", "redis"}, {"redis-cluster", "master", "redis"}, {"redis-sentinel", "replica", "redis"},
		{"redis-sentinel", "sentinel", "redis-sentinel"}, {"postgres", "", "postgresql"}, {"mysql", "", "mysql"},
		{"etcd", "leader", "etcd"}, {"zookeeper", "", "zookeeper"},
	} {
		if got := ProductOf(tt.backend, clusters.Node{Role: tt.role}); got != tt.want {
			t.Errorf("ProductOf(%s, role %q) = %q, want %q", tt.backend, tt.role, got, tt.want)
		}
	}
}

// TestServersNeverFail asks servers that cannot answer: an unknown
// backend, no nodes, a port nobody listens on, and a peer that accepts
// the connection but says nothing. Each maps to "unknown: " and why,
// within VersionTimeout.
func TestServersNeverFail(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // holds the connection, answers nothing
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()

	ctx := context.Background()
	for _, tt := range []struct {
		name, backend string
		nodes         []clusters.Node
		key, want     string
	}{
		{"unknown backend", "consul", []clusters.Node{{Name: "n1", Addr: deadAddr}}, "consul", `unknown: locktest does not know how to ask a "consul" server`},
		{"no nodes", "etcd", nil, "etcd", "unknown: the cluster has no nodes"},
		{"redis refused", "redis", []clusters.Node{{Name: "n1", Addr: deadAddr}}, "redis", "unknown: INFO server: dial tcp"},
		{"sentinel refused", "redis-sentinel", []clusters.Node{{Name: "s1", Addr: deadAddr, Role: "sentinel"}}, "redis-sentinel", "unknown: INFO server: dial tcp"},
		{"zookeeper refused", "zookeeper", []clusters.Node{{Name: "n1", Addr: deadAddr}}, "zookeeper", "unknown: dial tcp"},
		{"zookeeper silent", "zookeeper", []clusters.Node{{Name: "n1", Addr: silent.Addr().String()}}, "zookeeper", "unknown: srvr: "},
		{"postgres refused", "postgres", []clusters.Node{{Name: "n1", Addr: deadAddr}}, "postgresql", "unknown: "},
		{"mysql refused", "mysql", []clusters.Node{{Name: "n1", Addr: deadAddr}}, "mysql", "unknown: SELECT version(): "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Versions(ctx, tt.backend, tt.nodes, nil)
			t.Log(got)
			if len(got) != 1 || !strings.HasPrefix(got[tt.key], tt.want) {
				t.Errorf("Servers = %v, want only %s: %q…", got, tt.key, tt.want)
			}
		})
	}
}

// TestNotAsked: a cluster whose nodes never came up has its product
// unknown, with the reason.
func TestNotAsked(t *testing.T) {
	for _, tt := range []struct{ backend, key string }{
		{"redis", "redis"}, {"redis-sentinel", "redis"}, {"postgres", "postgresql"}, {"mysql", "mysql"}, {"zookeeper", "zookeeper"},
	} {
		got := VersionsNotAsked(tt.backend, "the nodes did not come up: n1 exited")
		if want := map[string]string{tt.key: "unknown: the nodes did not come up: n1 exited"}; !maps.Equal(got, want) {
			t.Errorf("NotAsked(%s) = %v, want %v", tt.backend, got, want)
		}
	}
}
