package backend

import (
	"context"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locktest/locktest/clusters"
)

// The persistence modes of a Redis node (--persistence).
const (
	// PersistenceOff keeps data in memory only: a killed node comes back
	// empty.
	PersistenceOff = "off"
	// PersistenceEverysec writes an append-only file fsynced once a
	// second: a node that loses power may lose up to a second of writes; a
	// killed process loses what the kernel's page cache holds, which is
	// all it wrote (but Redis postpones its writes while a background
	// fsync runs: see docs/findings.md).
	PersistenceEverysec = "everysec"
	// PersistenceAlways fsyncs the append-only file before each reply,
	// the setting antirez recommends for Redlock nodes that restart at
	// once.
	PersistenceAlways = "always"
)

// Persistences are the persistence modes, the default first.
var Persistences = []string{PersistenceOff, PersistenceEverysec, PersistenceAlways}

// CheckPersistence returns the persistence mode p names, "" meaning
// PersistenceOff, or an error naming the modes there are.
func CheckPersistence(p string) (string, error) {
	switch p {
	case "":
		return PersistenceOff, nil
	case PersistenceOff, PersistenceEverysec, PersistenceAlways:
		return p, nil
	}
	return "", fmt.Errorf("unknown persistence %q (want %s, %s or %s)", p, PersistenceOff, PersistenceEverysec, PersistenceAlways)
}

// RedisPersistence returns the redis.conf directives of persistence mode
// p, each a name and its value: the append-only file with p's fsync
// policy, or none for PersistenceOff (and ""). The same directives go on
// a redis-server command line as "--name value".
func RedisPersistence(p string) [][2]string {
	switch p {
	case PersistenceEverysec, PersistenceAlways:
		return [][2]string{{"appendonly", "yes"}, {"appendfsync", p}}
	}
	return [][2]string{{"appendonly", "no"}}
}

// Redis is the backend of single Redis servers (one by default; the
// redlock impls take several), and KindRedis its kind of node, a
// redis-server on its redis.conf, whose client port is RedisPort.
const (
	Redis     = "redis"
	KindRedis = "redis"
	RedisPort = 6379
)

// The products a Redis node reports itself as (Versions).
const (
	ProductRedis  = "redis"
	ProductValkey = "valkey"
)

func init() {
	Register(Service{
		Name: Redis, Rank: 1, Kind: KindRedis, DefaultNodes: 1,
		Persistence:   true,
		Locks:         Leases,
		Version:       askRedis,
		Product:       redisProduct,
		SyncsRecorded: true,
		Reset:         resetRedis,
		Residue:       redisResidue,
	}, redisKind)
}

// redisProduct is the product of a node of the Redis backends before it
// says so itself: a sentinel (Role "sentinel") is redis-sentinel, the
// other nodes redis.
func redisProduct(n clusters.Node) string {
	if n.Role == RoleSentinel {
		return ProductRedisSentinel
	}
	return ProductRedis
}

// redisKind is a redis-server on its redis.conf: the base every provider
// gives, with the node's part in the layout (Layout.RedisNodeConf). The
// node announces the address it is reached at.
var redisKind = redisServer(KindRedis, RedisPort, false)

// redisServer is the kind of a redis-server listening on port, in
// sentinel mode when sentinel is set.
func redisServer(name string, port int, sentinel bool) *Kind {
	return &Kind{
		Name:         name,
		Ports:        []Port{{Name: "client", Base: port, Step: 1}},
		Ready:        redisReady,
		Program:      "redis-server",
		ReadyTimeout: 30 * time.Second,
		Log:          "redis.log",
		Install:      "install redis-server",
		Programs:     []HostProgram{{Name: "redis-server"}},
		Image:        redisImage(sentinel),
		Launch:       func(p Placement) (Launch, error) { return redisLaunch(p, sentinel) },
	}
}

// redisImage is the image of the Redis backends' nodes, sentinels
// included: Redis's official image, or the host's redis-server with its
// libraries. The sentinels' kind has none of its own.
func redisImage(sentinel bool) Image {
	if sentinel {
		return Image{}
	}
	return Image{Official: "redis:7.2", Rootfs: RootfsPrograms, Cmd: []string{"redis-server"}}
}

func redisLaunch(p Placement, sentinel bool) (Launch, error) {
	conf := RedisConf{Header: p.Header, Port: p.Node.Ports[0], Bind: p.Bind, Dir: p.DataDir, LogFile: p.LogFile, Persistence: p.Persistence}
	conf = p.Layout.RedisNodeConf(conf, p.Node.Name, func(name string) string {
		for _, m := range p.Peers {
			if m.Name == name {
				return m.Addr(0)
			}
		}
		return ""
	})
	confPath := path.Join(p.Dir, "redis.conf")
	argv := []string{p.Bin("redis-server"), confPath}
	if sentinel {
		argv = append(argv, "--sentinel")
	}
	return Launch{
		Dirs:  []string{p.DataDir},
		Files: []File{{Path: confPath, Data: conf.String(), Once: p.Layout.KeepsConf()}},
		Argv:  argv,
	}, nil
}

// redisReady is a Redis node's or a sentinel's readiness: it answers PING.
func redisReady(ctx context.Context, addr string) error {
	c := RedisDataClient(addr)
	defer c.Close()
	return c.Ping(ctx).Err()
}

// RedisNodeConf returns c, the redis.conf of the node called name, with
// its part in the layout added: a sentinel monitors n1 and keeps no
// append-only file; a redis-sentinel data node is the first master (n1) or
// its replica; a redis-cluster node runs in cluster mode. addrOf gives a
// node's address (host:port) as the other nodes and the clients reach it,
// which the node announces.
func (l Layout) RedisNodeConf(c RedisConf, name string, addrOf func(name string) string) RedisConf {
	self := addrOf(name)
	switch {
	case l.Kind(name) == KindSentinel:
		c.Persistence = ""
		c.Extra = SentinelConfig(addrOf("n1"), DefaultSentinels, l.Sentinel, self)
	case l.Backend == RedisSentinel && name == "n1":
		c.Extra = SentinelDataConfig("", self)
	case l.Backend == RedisSentinel:
		c.Extra = SentinelDataConfig(addrOf("n1"), self)
	case l.Backend == RedisCluster:
		host, _, _ := net.SplitHostPort(self)
		c.Extra = RedisClusterConfig(l.NodeTimeout, host)
	}
	return c
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
