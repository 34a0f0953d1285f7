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
	container func(c *Containers, n *node) (containerSpec, error)
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
// of backend.All(): every kind backend.Kinds defines, each run from its
// launch (launchKind).
var kinds = func() map[string]*containerKind {
	m := map[string]*containerKind{}
	for name, k := range backend.Kinds() {
		m[name] = launchKind(k)
	}
	return m
}()

// ownParams are the backend params (--cluster-opt) the docker provider
// reads itself, beside the backend's own (backend.Params).
var ownParams = map[string][]string{backend.ZooKeeper: {zkParamClassPath}}

// The places of a node's files in its container: its configuration in
// /conf and its data in /data (a SQL server's in /data/db, a directory
// of its own that its first start makes), all in the container's
// writable layer, which a kill and a restart keep (and the official
// images' layout).
const (
	confDir   = "/conf"
	dataDir   = "/data"
	sqlData   = "/data/db"
	sqlSocket = "/tmp/mysqld.sock"
)

// launchKind runs a node of kind k as its container's process: the
// kind's launch (backend.Kind.Launch) placed at the container's address,
// listening on all of its addresses, with the kind's first ports, its
// files copied in before the start, and its log on standard output. With
// locktest's node image (engine.LabelNodeProgram) etcd runs in `/locktest
// node etcd`; with another image, the upstream etcd binary. A kind with
// an init (a SQL server) starts in a shell that makes the data
// directory at the first start (initScript) and then execs the server,
// as the kind's user (setpriv) when it refuses root; a kind that is a
// tree of processes is paused with the whole container.
func launchKind(k *backend.Kind) *containerKind {
	return &containerKind{
		port:         k.Ports[0].Base,
		readyTimeout: k.ReadyTimeout,
		several:      k.Several,
		container: func(c *Containers, n *node) (containerSpec, error) {
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
				Header: "Written by locktest for node " + n.name + ".", ClassPath: zkDefaultClassPath,
				User: "root", Socket: sqlSocket}
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
			if err == nil && l.Init != nil {
				// An init makes a data directory of its own.
				p.DataDir = sqlData
				l, err = k.Launch(p)
			}
			if err != nil {
				return containerSpec{}, fmt.Errorf("docker %s: node %s: %w", c.opts.Backend, n.name, err)
			}
			var files []testcontainers.ContainerFile
			for _, f := range l.Files {
				files = append(files, testcontainers.ContainerFile{Reader: strings.NewReader(f.Data), ContainerFilePath: f.Path, FileMode: 0o644})
			}
			if l.Init == nil && k.RunAs == "" {
				return containerSpec{entrypoint: l.Argv, files: files}, nil
			}
			return containerSpec{entrypoint: []string{"/bin/sh", "-c"}, cmd: []string{initScript(k, p.DataDir, l)}, files: files}, nil
		},
	}
}

// initScript is the shell command of a container whose server has an
// init or a user of its own (a SQL server): it makes dataDir, owned by
// the kind's user with mode 0700 when there is one, and the launch's
// Dirs (the kind's user's, when there is one); runs the launch's
// init unless the data directory has its done-file (backend.Init.Shell,
// its output kept in /data/init.log); and execs the server, as the kind's
// user through setpriv when there is one.
func initScript(k *backend.Kind, dataDir string, l backend.Launch) string {
	var b strings.Builder
	var as []string
	if k.RunAs != "" {
		as = []string{"setpriv", "--reuid=" + k.RunAs, "--regid=" + k.RunAs, "--init-groups"}
		fmt.Fprintf(&b, "mkdir -p %[1]s && chown %[2]s:%[2]s %[1]s && chmod 700 %[1]s || exit 1; ", dataDir, k.RunAs)
	}
	if len(l.Dirs) > 0 {
		fmt.Fprintf(&b, "mkdir -p %s || exit 1; ", shellquote.Join(l.Dirs))
		if k.RunAs != "" {
			fmt.Fprintf(&b, "chown %[1]s:%[1]s %[2]s || exit 1; ", k.RunAs, shellquote.Join(l.Dirs))
		}
	}
	if l.Init != nil {
		b.WriteString(l.Init.Shell(dataDir, as, "/data/init.log") + "; ")
	}
	fmt.Fprintf(&b, "exec %s", shellquote.Join(append(as, l.Argv...)))
	return b.String()
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
