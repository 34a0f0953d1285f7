package backend

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/shellquote"
)

// Kind is one kind of node, what server a node runs, as every provider
// runs it: its ports, the program its pid is checked against, how long its
// start may take, and its launch, the files and the command line of one
// node wherever a provider placed it. A provider keeps only how it runs a
// launch on its hosts (a process, a container, a command over SSH); it
// writes none of these facts again.
type Kind struct {
	// Name is the kind's name (KindRedis, ...).
	Name string
	// Ports are the node's ports, the one clients dial first.
	Ports []Port
	// Program is what the command line of a node's server holds, which a
	// provider checks a pid against before it signals it; NodeProgram
	// for a kind that runs in locktest's own node program.
	Program string
	// ReadyTimeout bounds the wait for one node to serve after its start
	// (in a container, or over SSH, where starts are slowest).
	ReadyTimeout time.Duration
	// Log is the name of the node's log in its directory. When Stdout is
	// set the server writes its log on its standard output, which the
	// provider sends there; otherwise the server writes it itself, to
	// Placement.LogFile.
	Log    string
	Stdout bool
	// Install says how a host gets the kind's programs, for the error
	// of a host that lacks one.
	Install string
	// Launch returns what runs the node placed at p. It is the same on
	// every provider, but for what p says of the host.
	Launch func(p Placement) (Launch, error)
	// RunAs names the user a node's server and its Init run as when the
	// provider would run them as root, for a server that refuses root
	// (PostgreSQL); "" runs them as the provider's user.
	RunAs string
	// Several says the server is a tree of processes (PostgreSQL's
	// postmaster and a backend per connection, MariaDB's helpers): a
	// pause, a kill and a stop take every process below the server too,
	// and the server's group.
	Several bool
	// StopSignal asks the server to stop at once but cleanly; SIGTERM
	// when 0.
	StopSignal syscall.Signal
	// DataDirQuery, when set, asks the server at addr for its data
	// directory, a real query: a provider checks that the server that
	// answers on a node's port is the node's, not another on that port.
	DataDirQuery func(ctx context.Context, addr string) (string, error)
	// PeerServing, when set, asks a node at addr, its second port (Ports[1]),
	// whether it serves its peers yet. A provider that starts the nodes of
	// a new cluster starts each once the one before serves its peers:
	// those of such a kind lose time when a peer's port is open and not
	// yet served.
	PeerServing func(ctx context.Context, addr string) error
}

// NodeProgram stands in Kind.Program for locktest's own node program,
// which each provider names its own way (the binary it runs, the name it
// uploads it under).
const NodeProgram = "<locktest node>"

// Port is one port of a kind of node. A node with an address of its own
// listens on Base; the k-th node of the kind (from 0) that shares an
// address with others of its kind listens on Base + k*Step.
type Port struct {
	// Name says what the port is for ("client", "peer").
	Name string
	Base int
	Step int
}

// At returns the port of the k-th node of the kind on a shared address.
func (p Port) At(k int) int { return p.Base + k*p.Step }

// Placed is a node as its provider placed it: its name, the address the
// other nodes and the clients reach it at, and its ports in the order of
// its kind's Ports.
type Placed struct {
	Name  string
	IP    string
	Ports []int
}

// Addr returns the node's address with its i-th port, host:port.
func (p Placed) Addr(i int) string { return net.JoinHostPort(p.IP, strconv.Itoa(p.Ports[i])) }

// Placement is where a provider put a node, and what its host offers:
// everything a Kind's Launch needs.
type Placement struct {
	// Layout is the node's cluster.
	Layout *Layout
	// Node is the node; Peers are every node of the cluster in the
	// layout's order, the node among them.
	Node  Placed
	Peers []Placed
	// Bind is the address the node listens on: its own address, or
	// 0.0.0.0 where the address it is reached at is not one of its host's
	// to bind (a container's) or it serves every address of its host.
	Bind string
	// Dir is the node's directory on its host, for its files; DataDir its
	// data directory (inside Dir, or a directory of its own).
	Dir, DataDir string
	// LogFile is the log the server writes itself, or "" when the
	// provider takes the log from its standard output.
	LogFile string
	// Bin returns the command that runs a host program by its usual name
	// ("redis-server", "java"): the name itself, or the path the
	// provider's host gives for it.
	Bin func(program string) string
	// NodeProgram is the command line that runs locktest's node program on
	// the host; nil when the host runs the upstream servers instead (an
	// image that lacks locktest's).
	NodeProgram []string
	// ClassPath is the JVM class path of a ZooKeeper peer on the host.
	ClassPath string
	// Persistence is a Redis node's persistence mode.
	Persistence string
	// Header is the first comment line of the configuration files the
	// node is given, naming the node and the run.
	Header string
	// User is the user the provider runs the node's server as (mariadbd
	// takes it as --user, which root must give).
	User string
	// Socket is the path of a server's Unix socket, for a server that
	// always makes one (mariadbd), short enough for a socket's address
	// (107 bytes); SocketDir the directory of one that puts its sockets
	// there (PostgreSQL), "" for none.
	Socket, SocketDir string
}

// Launch is what runs one node: files to write, then a command line.
type Launch struct {
	// Files are written before each start, but those marked Once, which
	// only the first start writes (the server rewrites them as it runs).
	Files []File
	// Argv is the server's command line, its program first.
	Argv []string
	// Dirs are the directories to make before the first start.
	Dirs []string
	// Needs are files the host must have for the launch to run (a JVM's
	// class path), beside its program.
	Needs []string
	// Init, when set, makes the node's data directory at its first start
	// (a SQL server's): a provider runs it, as the server's user, when the
	// data directory has no Init.Done yet.
	Init *Init
}

// Init is the command that makes a node's data directory.
type Init struct {
	// Done is the file or directory, in the data directory, that exists
	// once the data directory was made.
	Done string
	// Argv is its command line, Env the environment assignments it needs
	// beside the provider's.
	Argv, Env []string
	// Append are text to append, once it ran, to files it made (a line of
	// pg_hba.conf).
	Append []File
}

// Shell renders the init as one line of POSIX shell, for a provider that
// starts its nodes through a shell on the node's host: unless dataDir
// holds the init's done-file, it runs the init (after the argv prefix as,
// setpriv's when it runs as another user; none when nil) with no input
// and its output appended to logFile, and then appends the init's text to
// the files it made. Where that fails, the line prints "<program>
// failed: " and the log's last line to standard error, and exits 1.
func (i *Init) Shell(dataDir string, as []string, logFile string) string {
	var after strings.Builder
	for _, f := range i.Append {
		fmt.Fprintf(&after, " && printf %%s %s >> %s", shellquote.Quote(f.Data), shellquote.Quote(f.Path))
	}
	argv := append(slices.Clone(as), i.Argv...)
	if len(i.Env) > 0 {
		argv = append([]string{"env"}, append(slices.Clone(i.Env), argv...)...)
	}
	return fmt.Sprintf("[ -e %[1]s ] || { %[2]s </dev/null >>%[3]s 2>&1%[4]s; } || { echo %[5]s\"$(grep . %[3]s | tail -n 1)\" >&2; exit 1; }",
		shellquote.Quote(path.Join(dataDir, i.Done)), shellquote.Join(argv), shellquote.Quote(logFile), after.String(),
		shellquote.Quote(path.Base(i.Argv[0])+" failed: "))
}

// File is one file of a launch, at an absolute path on the node's host.
type File struct {
	Path string
	Data string
	Once bool
}

// Kinds returns every kind of node, by name.
func Kinds() map[string]*Kind {
	return map[string]*Kind{
		KindRedis:     redisKind,
		KindSentinel:  sentinelKind,
		KindEtcd:      etcdKind,
		KindZooKeeper: zooKeeperKind,
		KindMariaDB:   mariadbKind,
		KindPostgres:  postgresKind,
	}
}

// KindOf returns the kind called name, or an error naming the kinds
// there are.
func KindOf(name string) (*Kind, error) {
	if k, ok := Kinds()[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("no kind of node %q (want %s, %s, %s, %s, %s or %s)", name, KindRedis, KindSentinel, KindEtcd, KindZooKeeper, KindMariaDB, KindPostgres)
}

// KeepsRedisConf reports whether a Redis node of the layout keeps its
// redis.conf across restarts: those of redis-sentinel and redis-cluster,
// which Sentinel and Redis Cluster rewrite (a sentinel's, a failed-over
// node's replicaof; the cluster's nodes.conf lives beside it).
func (l Layout) KeepsRedisConf() bool {
	return l.Backend == RedisSentinel || l.Backend == RedisCluster
}

// SyncRecordReason says why the nodes of l cannot record what they sync,
// which a power cut needs to know what to cut back, or "" when they can:
// the redis backend's nodes, C programs whose syncs the clock shim
// (LD_PRELOAD) sees and records. A Go program's it cannot see
// (ClockShimReason); for the other backends a power cut is not written
// yet.
func (l Layout) SyncRecordReason() string {
	if why := ClockShimReason(l.Backend); why != "" {
		return "its nodes' syncs cannot be recorded: " + why
	}
	if l.Backend != Redis {
		return "its nodes do not record what they sync: locktest records the syncs of the redis backend's nodes (redis, redlock) only"
	}
	return ""
}

// redisKind is a redis-server on its redis.conf: the base every provider
// gives, with the node's part in the layout (Layout.RedisNodeConf). The
// node announces the address it is reached at.
var redisKind = redisServer(KindRedis, RedisPort, false)

// sentinelKind is a sentinel: redis-server in sentinel mode.
var sentinelKind = redisServer(KindSentinel, SentinelPort, true)

// redisServer is the kind of a redis-server listening on port, in
// sentinel mode when sentinel is set.
func redisServer(name string, port int, sentinel bool) *Kind {
	return &Kind{
		Name:         name,
		Ports:        []Port{{Name: "client", Base: port, Step: 1}},
		Program:      "redis-server",
		ReadyTimeout: 30 * time.Second,
		Log:          "redis.log",
		Install:      "install redis-server",
		Launch:       func(p Placement) (Launch, error) { return redisLaunch(p, sentinel) },
	}
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
		Files: []File{{Path: confPath, Data: conf.String(), Once: p.Layout.KeepsRedisConf()}},
		Argv:  argv,
	}, nil
}

// etcdKind is an etcd member: locktest's node program (`locktest node
// etcd`, the embedded server) where the host has it, else the upstream
// etcd binary with its own flags. Members have fixed peer URLs, so the
// initial cluster is known before any starts.
var etcdKind = &Kind{
	Name:         KindEtcd,
	Ports:        []Port{{Name: "client", Base: EtcdPort, Step: 2}, {Name: "peer", Base: EtcdPeerPort, Step: 2}},
	Program:      NodeProgram,
	ReadyTimeout: 60 * time.Second,
	PeerServing:  etcdPeerServing,
	Log:          "etcd.log",
	Install:      "locktest uploads its node program; the upstream etcd is installed with the etcd-server package",
	Launch: func(p Placement) (Launch, error) {
		var initial []string
		for _, m := range p.Peers {
			initial = append(initial, m.Name+"=http://"+m.Addr(1))
		}
		client, peer := "http://"+p.Node.Addr(0), "http://"+p.Node.Addr(1)
		var argv []string
		if p.NodeProgram != nil {
			argv = append(append(argv, p.NodeProgram...), "node", "etcd", "--name", p.Node.Name, "--data-dir", p.DataDir,
				"--listen-client-urls", client, "--listen-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","))
			if p.LogFile != "" {
				argv = append(argv, "--log-file", p.LogFile)
			}
			argv = append(argv, p.Layout.Etcd.NodeArgs()...)
		} else {
			argv = append([]string{p.Bin("etcd"),
				"--name", p.Node.Name, "--data-dir", p.DataDir,
				"--listen-client-urls", client, "--advertise-client-urls", client,
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "locktest",
				"--initial-cluster-state", "new",
			}, p.Layout.Etcd.UpstreamArgs()...)
		}
		return Launch{Argv: argv}, nil
	},
}

// zooKeeperKind is a ZooKeeper peer: a JVM running QuorumPeerMain on its
// zoo.cfg, with its log4j.properties (the log on standard output) and its
// myid, the node's place in the layout from 1.
var zooKeeperKind = &Kind{
	Name: KindZooKeeper,
	Ports: []Port{{Name: "client", Base: ZooKeeperPort, Step: 1},
		{Name: "quorum", Base: 2888, Step: 1}, {Name: "election", Base: 3888, Step: 1}},
	Program:      "QuorumPeerMain",
	ReadyTimeout: 90 * time.Second,
	Log:          "zookeeper.log",
	Stdout:       true,
	Install:      "install a Java runtime and ZooKeeper, Debian's zookeeper package",
	Launch: func(p Placement) (Launch, error) {
		cfg := ZooKeeperConfig{Node: p.Node.Name, Tick: p.Layout.ZooKeeperTick, DataDir: p.DataDir, ClientIP: p.Node.IP, ClientPort: p.Node.Ports[0]}
		myid := 0
		for i, m := range p.Peers {
			cfg.Peers = append(cfg.Peers, ZooKeeperPeer{ID: i + 1, IP: m.IP, Quorum: m.Ports[1], Election: m.Ports[2]})
			if m.Name == p.Node.Name {
				myid = i + 1
			}
		}
		if myid == 0 {
			return Launch{}, fmt.Errorf("zookeeper: node %s is not among its peers", p.Node.Name)
		}
		conf, log4j := path.Join(p.Dir, "zoo.cfg"), path.Join(p.Dir, "log4j.properties")
		return Launch{
			Dirs: []string{p.DataDir},
			Files: []File{
				{Path: conf, Data: cfg.String()},
				{Path: log4j, Data: ZooKeeperLog4j},
				{Path: path.Join(p.DataDir, "myid"), Data: strconv.Itoa(myid) + "\n"},
			},
			Argv:  append([]string{p.Bin("java")}, ZooKeeperJVM(ZooKeeperHeap, p.ClassPath, log4j, conf, "-Dzookeeper.log.dir="+p.Dir)...),
			Needs: classPathFiles(p.ClassPath),
		}, nil
	},
}

// ZooKeeperHeap is a peer's JVM heap, as -Xmx takes it.
const ZooKeeperHeap = "128m"

// classPathFiles returns the files a class path names, without the
// entries that are patterns ("lib/*").
func classPathFiles(cp string) []string {
	var out []string
	for _, e := range strings.Split(cp, ":") {
		if e != "" && !strings.ContainsAny(e, "*?[") {
			out = append(out, e)
		}
	}
	return out
}

// etcdPeerServing asks the etcd member whose peer address is addr for
// its version over its peer port. A new member asks each peer whether it
// joined already, and waits a whole second for a peer whose port is open
// but not yet served: the members of a new cluster start in turn.
func etcdPeerServing(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/version", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 100 * time.Millisecond}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// mariadbKind is one MariaDB server, backend mysql: mariadb-install-db
// makes its data directory at the first start (naming the server it
// bootstraps with), and mariadbd runs on the command line of
// MariaDBServer, as the provider's user, its error log to the node's log
// (standard error when the provider takes it from there), with the init
// file that lets root in over TCP.
var mariadbKind = &Kind{
	Name:         KindMariaDB,
	Ports:        []Port{{Name: "client", Base: MariaDBPort, Step: 1}},
	Program:      "mariadbd",
	ReadyTimeout: 90 * time.Second,
	Log:          "mariadb.log",
	Install:      "install mariadb-server",
	Several:      true,
	DataDirQuery: MariaDBDataDir,
	Launch: func(p Placement) (Launch, error) {
		if p.Socket == "" {
			return Launch{}, fmt.Errorf("mariadb: node %s: no path for mariadbd's socket (it always makes one)", p.Node.Name)
		}
		user := p.User
		if user == "" {
			user = "root"
		}
		logf := p.LogFile
		if logf == "" {
			logf = "/dev/stderr"
		}
		initFile := path.Join(p.Dir, "init.sql")
		m := MariaDBServer{DataDir: p.DataDir, Bind: p.Bind, Port: p.Node.Ports[0], Socket: p.Socket,
			PidFile: path.Join(p.Dir, "mariadb.pid"), LogFile: logf, InitFile: initFile, User: user}
		server := p.Bin("mariadbd")
		return Launch{
			Files: []File{{Path: initFile, Data: MariaDBInit}},
			Init: &Init{Done: "mysql", Argv: append([]string{p.Bin("mariadb-install-db")}, MariaDBInstallArgs(p.DataDir, user)...),
				Env: []string{"MYSQLD_BOOTSTRAP=" + server}},
			Argv: append([]string{server}, m.Args()...),
		}, nil
	},
}

// postgresKind is one PostgreSQL server: initdb makes its data directory
// at the first start, with the pg_hba.conf line that trusts any client,
// and postgres runs on the command line of PostgresServer, as the
// postgres user (it refuses root), its log on standard error.
var postgresKind = &Kind{
	Name:         KindPostgres,
	Ports:        []Port{{Name: "client", Base: PostgresPort, Step: 1}},
	Program:      "postgres",
	ReadyTimeout: 90 * time.Second,
	Log:          "postgres.log",
	Stdout:       true,
	Install:      "install postgresql",
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
