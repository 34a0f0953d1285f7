package docker

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/internal/shellquote"
	"github.com/testcontainers/testcontainers-go"
)

// containerKind says how to run one kind of node (backend.NodeSpec.Kind)
// as a container.
type containerKind struct {
	// port is the port clients dial, the same in every container.
	port int
	// readyTimeout bounds a start, all nodes of the kind together.
	readyTimeout time.Duration
	// container returns how to run node n.
	container func(c *Cluster, n *node) (containerSpec, error)
	// several is set for a server of several processes (PostgreSQL's
	// postmaster and a backend per connection): a pause freezes the whole
	// container (the cgroup freezer, `docker pause`), as a SIGSTOP of its
	// main process alone would leave the connections served.
	several bool
}

// containerSpec is a node's entrypoint, command, environment and files.
type containerSpec struct {
	entrypoint []string
	cmd        []string
	env        map[string]string
	files      []testcontainers.ContainerFile
}

// kinds are the kinds of node the provider runs, which make every backend
// of backend.All().
var kinds = map[string]*containerKind{
	backend.KindRedis:     redisKind,
	backend.KindSentinel:  sentinelKind,
	backend.KindEtcd:      etcdKind,
	backend.KindZooKeeper: zkKind,
	backend.KindMariaDB:   mariadbKind,
	backend.KindPostgres:  postgresKind,
}

// ownParams are the backend params (--cluster-opt) the docker provider
// reads itself, beside the backend's own (backend.Params).
var ownParams = map[string][]string{backend.ZooKeeper: {zkParamClassPath}}

// redisKind is one redis-server per container, run as `redis-server
// /conf/redis.conf` (redisContainer), which the official image (whose
// entrypoint runs a `redis-server ...` command as given) and locktest's
// own both run. Its data directory /data lives in the container's
// writable layer, which a kill and restart keep.
var redisKind = &containerKind{
	port:         backend.RedisPort,
	readyTimeout: 30 * time.Second,
	container:    redisContainer,
}

// redisContainer runs a redis-server, or a sentinel, on /conf/redis.conf,
// which Sentinel and Redis Cluster rewrite as they run (the writable layer
// keeps it across a kill and a restart): the configuration every provider
// writes for the node's part in the layout (backend.Layout.RedisNodeConf),
// its log on standard output. A node announces its container's address.
func redisContainer(c *Cluster, n *node) (containerSpec, error) {
	conf := backend.RedisConf{Header: "Written by locktest for node " + n.name + ".",
		Port: n.port, Bind: "0.0.0.0", Dir: "/data", LogFile: "", Persistence: c.opts.Persistence}
	conf = c.layout.RedisNodeConf(conf, n.name, func(name string) string {
		if m, err := c.find(clusters.Node{Name: name}); err == nil {
			return m.addr()
		}
		return ""
	})
	cmd := []string{"redis-server", "/conf/redis.conf"}
	if n.kind == backend.KindSentinel {
		cmd = append(cmd, "--sentinel")
	}
	return containerSpec{cmd: cmd, files: []testcontainers.ContainerFile{
		{Reader: strings.NewReader(conf.String()), ContainerFilePath: "/conf/redis.conf", FileMode: 0o644},
	}}, nil
}

// sentinelKind is a sentinel: redis-server in sentinel mode, in the redis
// image.
var sentinelKind = &containerKind{
	port:         backend.SentinelPort,
	readyTimeout: 30 * time.Second,
	container:    redisContainer,
}

// etcd: with locktest's node image (engine.LabelNodeProgram), each
// container runs `locktest node etcd` with locktest's flags; with another
// image, the upstream `etcd` binary with its own flags. Members have fixed
// addresses, so the initial cluster is known before any starts. Go
// programs read the wall clock without libc: the clock shim is not
// mounted.
var etcdKind = &containerKind{
	port:         backend.EtcdPort,
	readyTimeout: 60 * time.Second,
	container: func(c *Cluster, n *node) (containerSpec, error) {
		timing := c.layout.Etcd
		var initial []string
		for _, m := range c.nodes {
			initial = append(initial, fmt.Sprintf("%s=http://%s:2380", m.name, m.ip))
		}
		client := fmt.Sprintf("http://%s:2379", n.ip)
		peer := fmt.Sprintf("http://%s:2380", n.ip)
		if c.image.NodeProgram {
			return containerSpec{entrypoint: []string{"/locktest", "node", "etcd"}, cmd: append([]string{
				"--name", n.name, "--data-dir", "/data/" + n.name,
				"--listen-client-urls", client, "--listen-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","),
			}, timing.NodeArgs()...)}, nil
		}
		return containerSpec{cmd: append([]string{"etcd",
			"--name", n.name, "--data-dir", "/data/" + n.name,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "locktest",
			"--initial-cluster-state", "new",
		}, timing.UpstreamArgs()...)}, nil
	},
}

// The Options.Params the zookeeper backend understands.
// (Its tickTime is the backend's param, backend.ZooKeeperParamTickTime.)
const (
	// zkParamClassPath is the JVM class path inside the image; the default
	// is that of Debian's zookeeper package, which locktest's own image
	// holds. For the official image use e.g. /apache-zookeeper-3.9.3-bin/lib/*.
	zkParamClassPath = "classpath"
)

// zkDefaultClassPath is the class path of Debian's zookeeper package (the
// local provider's): zookeeper.jar's manifest names the rest.
const zkDefaultClassPath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"

// ZooKeeper: one JVM running QuorumPeerMain per container, with zoo.cfg,
// log4j.properties and myid copied in before the start (/conf and /data, as
// in the official image). The JVM runs under the clock shim when the run
// has one; its session timeouts use the monotonic clock, which the shim
// does not move.
var zkKind = &containerKind{
	port:         backend.ZooKeeperPort,
	readyTimeout: 90 * time.Second,
	container: func(c *Cluster, n *node) (containerSpec, error) {
		cp := zkDefaultClassPath
		if v := c.opts.Params[zkParamClassPath]; v != "" {
			cp = v
		}
		cfg := backend.ZooKeeperConfig{Node: n.name, Tick: c.layout.ZooKeeperTick, DataDir: "/data", ClientIP: n.ip.String(), ClientPort: n.port}
		var myid int
		for i, m := range c.nodes {
			cfg.Peers = append(cfg.Peers, backend.ZooKeeperPeer{ID: i + 1, IP: m.ip.String(), Quorum: 2888, Election: 3888})
			if m == n {
				myid = i + 1
			}
		}
		files := []testcontainers.ContainerFile{
			{Reader: strings.NewReader(cfg.String()), ContainerFilePath: "/conf/zoo.cfg", FileMode: 0o644},
			{Reader: strings.NewReader(backend.ZooKeeperLog4j), ContainerFilePath: "/conf/log4j.properties", FileMode: 0o644},
			{Reader: strings.NewReader(strconv.Itoa(myid) + "\n"), ContainerFilePath: "/data/myid", FileMode: 0o644},
		}
		cmd := append([]string{"java"}, backend.ZooKeeperJVM("128m", cp, "/conf/log4j.properties", "/conf/zoo.cfg")...)
		return containerSpec{cmd: cmd, files: files}, nil
	},
}

// The data directory of a SQL server in its container, which the
// container's writable layer keeps across a kill and a restart.
const sqlDataDir = "/data/db"

// sqlShell is the shell a SQL server's container starts with: it creates
// the data directory at the first start and then execs the server.
var sqlShell = []string{"/bin/sh", "-c"}

// mariadbKind is one MariaDB server, backend mysql: mariadb-install-db
// creates its data directory at the first start, then mariadbd runs as
// root (--user=root) with the command line every provider gives it
// (backend.MariaDBServer), its error log on standard error.
var mariadbKind = &containerKind{
	port:         backend.MariaDBPort,
	readyTimeout: 90 * time.Second,
	container: func(c *Cluster, n *node) (containerSpec, error) {
		m := backend.MariaDBServer{DataDir: sqlDataDir, Bind: "0.0.0.0", Port: n.port, Socket: "/tmp/mysqld.sock",
			PidFile: "/data/mysqld.pid", LogFile: "/dev/stderr", InitFile: "/conf/init.sql", User: "root"}
		script := fmt.Sprintf("[ -d %[1]s/mysql ] || mariadb-install-db %[2]s >/data/install.log 2>&1 || { cat /data/install.log >&2; exit 1; }; exec mariadbd %[3]s",
			sqlDataDir, shellquote.Join(backend.MariaDBInstallArgs(sqlDataDir, "root")), shellquote.Join(m.Args()))
		return containerSpec{entrypoint: sqlShell, cmd: []string{script}, files: []testcontainers.ContainerFile{
			{Reader: strings.NewReader(backend.MariaDBInit), ContainerFilePath: "/conf/init.sql", FileMode: 0o644},
		}}, nil
	},
}

// postgresKind is one PostgreSQL server: initdb creates its data
// directory at the first start, with the pg_hba.conf line every provider
// adds (backend.PostgresHBA), and the server runs as the postgres user
// (it refuses root) with the command line every provider gives it
// (backend.PostgresServer), its log on standard error.
var postgresKind = &containerKind{
	port:         backend.PostgresPort,
	readyTimeout: 90 * time.Second,
	several:      true,
	container: func(c *Cluster, n *node) (containerSpec, error) {
		p := backend.PostgresServer{DataDir: sqlDataDir, Listen: "*", Port: n.port}
		as := "setpriv --reuid=" + backend.PostgresUser + " --regid=" + backend.PostgresUser + " --init-groups"
		script := fmt.Sprintf("mkdir -p %[1]s && chown %[2]s:%[2]s %[1]s && chmod 700 %[1]s || exit 1; "+
			"[ -s %[1]s/PG_VERSION ] || { %[3]s initdb %[4]s && cat /conf/pg_hba.add >> %[1]s/pg_hba.conf; } || exit 1; exec %[3]s postgres %[5]s",
			sqlDataDir, backend.PostgresUser, as, shellquote.Join(backend.InitdbArgs(sqlDataDir)), shellquote.Join(p.Args()))
		return containerSpec{entrypoint: sqlShell, cmd: []string{script}, files: []testcontainers.ContainerFile{
			{Reader: strings.NewReader(backend.PostgresHBA), ContainerFilePath: "/conf/pg_hba.add", FileMode: 0o644},
		}}, nil
	},
}
