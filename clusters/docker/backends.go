package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/testcontainers/testcontainers-go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// containerBackend says how to run one lock service's nodes as containers.
type containerBackend struct {
	// defaultNodes is the cluster size when Options.Nodes is 0.
	defaultNodes int
	// clientPort is the port clients dial, the same in every container.
	clientPort int
	// readyTimeout bounds a start, all nodes together.
	readyTimeout time.Duration
	// check validates Options for the backend.
	check func(o Options) error
	// container returns how to run node n.
	container func(c *Cluster, n *node) (containerSpec, error)
	// probe checks, from the host, that n is ready.
	probe func(ctx context.Context, c *Cluster, n *node) error
	// roles lists the roles a node of a cluster of the given size can
	// have, and role asks, from the host, which of them the node at addr
	// has now; both nil for a backend whose nodes are all alike.
	roles func(nodes int) []string
	role  func(ctx context.Context, addr string) (string, error)
}

// containerSpec is a node's entrypoint, command, environment and files.
type containerSpec struct {
	entrypoint []string
	cmd        []string
	env        map[string]string
	files      []testcontainers.ContainerFile
}

var backends = map[string]*containerBackend{
	"redis":     redisBackend,
	"etcd":      etcdBackend,
	"zookeeper": zkBackend,
}

// Redis: one redis-server per container, its settings on the command line,
// so the official image (whose entrypoint runs a `redis-server ...` command
// as given) and locktest's own both work. Its data directory /data lives in
// the container's writable layer, which a kill and restart keep.
var redisBackend = &containerBackend{
	defaultNodes: 1,
	clientPort:   6379,
	readyTimeout: 30 * time.Second,
	check: func(o Options) error {
		if _, err := backend.CheckPersistence(o.Persistence); err != nil {
			return fmt.Errorf("docker redis: %w", err)
		}
		for k := range o.Params {
			return fmt.Errorf("docker redis: unknown cluster param %q (redis has none)", k)
		}
		return nil
	},
	container: func(c *Cluster, n *node) (containerSpec, error) {
		cmd := []string{"redis-server", "--port", strconv.Itoa(n.port), "--bind", "0.0.0.0",
			"--protected-mode", "no", "--save", "", "--dir", "/data"}
		for _, d := range backend.RedisPersistence(c.opts.Persistence) {
			cmd = append(cmd, "--"+d[0], d[1])
		}
		return containerSpec{cmd: cmd}, nil
	},
	probe: func(ctx context.Context, c *Cluster, n *node) error {
		if err := dialable(ctx, n.addr()); err != nil {
			return err
		}
		rc := goredis.NewClient(&goredis.Options{
			Addr: n.addr(), Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
			DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		defer rc.Close()
		return rc.Ping(ctx).Err()
	},
}

// etcd: with locktest's node image (LabelNodeProgram), each container runs
// `locktest node etcd` with locktest's flags; with another image, the
// upstream `etcd` binary with its own flags. Members have fixed addresses,
// so the initial cluster is known before any starts. Go programs read the
// wall clock without libc: the clock shim is not mounted.
var etcdBackend = &containerBackend{
	defaultNodes: 3,
	clientPort:   2379,
	readyTimeout: 60 * time.Second,
	check: func(o Options) error {
		_, err := etcdTiming(o.Params)
		return err
	},
	container: func(c *Cluster, n *node) (containerSpec, error) {
		timing, err := etcdTiming(c.opts.Params)
		if err != nil {
			return containerSpec{}, err
		}
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
	roles: func(int) []string { return backend.EtcdRoles() },
	role:  backend.EtcdRole,
	probe: func(ctx context.Context, c *Cluster, n *node) error {
		if err := dialable(ctx, n.addr()); err != nil {
			return err
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.addr()}, DialTimeout: 300 * time.Millisecond, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		st, err := cli.Status(ctx, n.addr())
		switch {
		case err != nil:
			return err
		case len(st.Errors) > 0:
			return fmt.Errorf("member reports %s", strings.Join(st.Errors, "; "))
		case st.Leader == 0:
			return errors.New("no leader yet")
		}
		return nil
	},
}

// etcdTiming reads the tick and election timeout from params
// (backend.ParseEtcdParams).
func etcdTiming(params map[string]string) (backend.EtcdTiming, error) {
	t, err := backend.ParseEtcdParams(params)
	if err != nil {
		return t, fmt.Errorf("docker %w", err)
	}
	return t, nil
}

// The Options.Params the zookeeper backend understands.
const (
	// zkParamTickTime is ZooKeeper's tickTime, a Go duration (default 200ms).
	zkParamTickTime = "tick-time"
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
var zkBackend = &containerBackend{
	defaultNodes: 3,
	clientPort:   2181,
	readyTimeout: 90 * time.Second,
	check: func(o Options) error {
		_, _, err := zkParams(o.Params)
		return err
	},
	container: func(c *Cluster, n *node) (containerSpec, error) {
		tick, cp, err := zkParams(c.opts.Params)
		if err != nil {
			return containerSpec{}, err
		}
		cfg := backend.ZooKeeperConfig{Node: n.name, Tick: tick, DataDir: "/data", ClientIP: n.ip.String(), ClientPort: n.port}
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
	probe: func(ctx context.Context, c *Cluster, n *node) error {
		_, err := backend.ZooKeeperRole(ctx, n.addr())
		return err
	},
	roles: backend.ZooKeeperRoles,
	role:  backend.ZooKeeperRole,
}

func zkParams(params map[string]string) (time.Duration, string, error) {
	tick, cp := 200*time.Millisecond, zkDefaultClassPath
	for k, v := range params {
		switch k {
		case zkParamTickTime:
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond {
				return 0, "", fmt.Errorf("docker zookeeper: cluster param %s=%q must be a duration of 1ms or more", k, v)
			}
			tick = d
		case zkParamClassPath:
			cp = v
		default:
			return 0, "", fmt.Errorf("docker zookeeper: unknown cluster param %q (known: %s, %s)", k, zkParamTickTime, zkParamClassPath)
		}
	}
	return tick, cp, nil
}

// dialable checks that addr accepts TCP connections, so a client library
// does not log a failed dial on every poll.
func dialable(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}
