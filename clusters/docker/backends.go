package docker

import (
	"fmt"
	"strings"
	"time"

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
// of backend.All(): every kind backend.Kinds defines, run from its launch
// (launchKind), and the SQL servers, whose first start creates their data
// directory inside the container.
var kinds = func() map[string]*containerKind {
	m := map[string]*containerKind{
		backend.KindMariaDB:  mariadbKind,
		backend.KindPostgres: postgresKind,
	}
	for name, k := range backend.Kinds() {
		m[name] = launchKind(k)
	}
	return m
}()

// ownParams are the backend params (--cluster-opt) the docker provider
// reads itself, beside the backend's own (backend.Params).
var ownParams = map[string][]string{backend.ZooKeeper: {zkParamClassPath}}

// The places of a node's files in its container: its configuration in
// /conf and its data in /data, both in the container's writable layer,
// which a kill and a restart keep (and the official images' layout).
const (
	confDir = "/conf"
	dataDir = "/data"
)

// launchKind runs a node of kind k as its container's one process: the
// kind's launch (backend.Kind.Launch) placed at the container's address,
// listening on all of its addresses, with the kind's first ports, its
// files copied in before the start, and its log on standard output. With
// locktest's node image (engine.LabelNodeProgram) etcd runs in `/locktest
// node etcd`; with another image, the upstream etcd binary.
func launchKind(k *backend.Kind) *containerKind {
	return &containerKind{
		port:         k.Ports[0].Base,
		readyTimeout: k.ReadyTimeout,
		container: func(c *Cluster, n *node) (containerSpec, error) {
			placed := func(m *node) backend.Placed {
				pk := backend.Kinds()[m.kind]
				var ports []int
				if pk != nil {
					for _, p := range pk.Ports {
						ports = append(ports, p.Base)
					}
				}
				return backend.Placed{Name: m.name, IP: m.ip.String(), Ports: ports}
			}
			p := backend.Placement{Layout: &c.layout, Node: placed(n), Bind: "0.0.0.0", Dir: confDir, DataDir: dataDir,
				Bin: func(program string) string { return program }, Persistence: c.opts.Persistence,
				Header: "Written by locktest for node " + n.name + ".", ClassPath: zkDefaultClassPath}
			for _, m := range c.nodes {
				p.Peers = append(p.Peers, placed(m))
			}
			if c.image.NodeProgram {
				p.NodeProgram = []string{"/locktest"}
			}
			if v := c.opts.Params[zkParamClassPath]; v != "" {
				p.ClassPath = v
			}
			l, err := k.Launch(p)
			if err != nil {
				return containerSpec{}, fmt.Errorf("docker %s: node %s: %w", c.opts.Backend, n.name, err)
			}
			var files []testcontainers.ContainerFile
			for _, f := range l.Files {
				files = append(files, testcontainers.ContainerFile{Reader: strings.NewReader(f.Data), ContainerFilePath: f.Path, FileMode: 0o644})
			}
			return containerSpec{entrypoint: l.Argv, files: files}, nil
		},
	}
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
// local provider's), which locktest's own image holds.
var zkDefaultClassPath = backend.ZooKeeperClassPath(backend.DebianJarDir)

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
