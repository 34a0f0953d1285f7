package backend

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/clusters"
)

// ZooKeeperMain is the class every peer runs.
const ZooKeeperMain = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// ZooKeeperJars are the jars of a peer's class path, as Debian's
// zookeeper package installs them into DebianJarDir: zookeeper.jar's
// manifest names the rest of its dependencies (netty, jute, slf4j-api,
// ...) by absolute path; the slf4j binding and log4j are what make it log
// at all.
var ZooKeeperJars = []string{"zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar"}

// DebianJarDir is where Debian's Java packages put their jars.
const DebianJarDir = "/usr/share/java"

// ZooKeeperClassPath returns a peer's class path with the jars in dir.
func ZooKeeperClassPath(dir string) string {
	cp := make([]string, len(ZooKeeperJars))
	for i, j := range ZooKeeperJars {
		cp[i] = path.Join(dir, j)
	}
	return strings.Join(cp, ":")
}

// ZooKeeperLog4j sends ZooKeeper's log to standard output, where the provider
// collects it (a log file, the container's log).
const ZooKeeperLog4j = `# Written by locktest.
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Target=System.out
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
`

// ZooKeeperPeer is one member of the ensemble as every zoo.cfg lists it.
type ZooKeeperPeer struct {
	// ID is the peer's myid, from 1.
	ID int
	// IP is the address its quorum and election ports listen on.
	IP string
	// Quorum and Election are those ports.
	Quorum, Election int
}

// ZooKeeperConfig is the zoo.cfg of one peer.
type ZooKeeperConfig struct {
	// Node names the peer in the file's header.
	Node string
	// Tick is ZooKeeper's tickTime; the limits are counted in ticks.
	Tick time.Duration
	// DataDir holds myid and the snapshots and logs.
	DataDir string
	// ClientIP and ClientPort are where clients connect.
	ClientIP   string
	ClientPort int
	// Peers is the whole ensemble, this peer included.
	Peers []ZooKeeperPeer
}

// String renders the zoo.cfg. Every peer lists all peers. initLimit 50 and
// syncLimit 10 give a follower 10s to sync at start and drop one that lags
// 2s at the default tick of 200ms. The admin server is off and the
// four-letter words the harness asks (srvr, ruok, stat, mntr, wchp) are
// allowed; one peer alone runs standalone.
func (c ZooKeeperConfig) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by locktest for node %s; rewritten at each start.\n", c.Node)
	fmt.Fprintf(&b, "tickTime=%d\n", c.Tick.Milliseconds())
	b.WriteString("initLimit=50\nsyncLimit=10\n")
	fmt.Fprintf(&b, "dataDir=%s\n", c.DataDir)
	fmt.Fprintf(&b, "clientPort=%d\n", c.ClientPort)
	fmt.Fprintf(&b, "clientPortAddress=%s\n", c.ClientIP)
	b.WriteString("maxClientCnxns=0\n")
	b.WriteString("admin.enableServer=false\n")
	b.WriteString("4lw.commands.whitelist=srvr,ruok,stat,mntr,wchp\n")
	if len(c.Peers) > 1 {
		b.WriteString("standaloneEnabled=false\n")
	}
	for _, p := range c.Peers {
		fmt.Fprintf(&b, "server.%d=%s:%d:%d\n", p.ID, p.IP, p.Quorum, p.Election)
	}
	return b.String()
}

// ZooKeeperJVM returns the java arguments (after the program name) that run a peer
// with the heap size heap (as -Xmx takes it), the class path, the
// log4j.properties at log4j and the zoo.cfg at conf, followed by extra
// system properties. The flags favour a quick start and a small
// footprint: serial GC, the C1 compiler only, no perf-data file in /tmp.
// A peer gives up on an unreachable peer after 1s rather than 5s, so that
// elections under partitions finish within a few seconds.
func ZooKeeperJVM(heap, classPath, log4j, conf string, extra ...string) []string {
	args := []string{
		"-Xmx" + heap, "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-XX:+ExitOnOutOfMemoryError",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.cnxTimeout=1000",
		"-Dlog4j.configuration=file:" + log4j,
	}
	args = append(args, extra...)
	return append(args, "-cp", classPath, ZooKeeperMain, conf)
}

// The roles of ZooKeeper peers, as the `srvr` command reports their Mode.
const (
	ZooKeeperLeader     = "leader"
	ZooKeeperFollower   = "follower"
	ZooKeeperStandalone = "standalone"
)

// ZooKeeperDefaultNodes is the size of an ensemble when none is asked for.
const ZooKeeperDefaultNodes = 3

// ZooKeeperRoles returns the roles a peer of an ensemble of the given
// size can have: a single server runs standalone, the peers of an
// ensemble lead or follow.
func ZooKeeperRoles(nodes int) []string {
	if nodes == 1 {
		return []string{ZooKeeperStandalone}
	}
	return []string{ZooKeeperLeader, ZooKeeperFollower}
}

// ZooKeeperParamTickTime is the cluster param (--cluster-opt) that sets
// ZooKeeper's tickTime, a Go duration of 1ms or more.
const ZooKeeperParamTickTime = "tick-time"

// ZooKeeperParams are the params ParseZooKeeperParams reads.
var ZooKeeperParams = []string{ZooKeeperParamTickTime}

// ZooKeeperDefaultTick is the tickTime of every provider's peers when the
// run sets none: the server clamps session timeouts to [2, 20] ticks, so
// it allows sessions of 400ms to 4s.
const ZooKeeperDefaultTick = 200 * time.Millisecond

// ParseZooKeeperParams returns the tickTime params set, or
// ZooKeeperDefaultTick. Other keys are not looked at.
func ParseZooKeeperParams(params map[string]string) (time.Duration, error) {
	s, ok := params[ZooKeeperParamTickTime]
	if !ok {
		return ZooKeeperDefaultTick, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Millisecond {
		return 0, fmt.Errorf("zookeeper: cluster param %s=%q must be a duration of 1ms or more", ZooKeeperParamTickTime, s)
	}
	return d, nil
}

// ZooKeeper is the backend of a ZooKeeper ensemble, and KindZooKeeper
// its peers, JVMs running QuorumPeerMain, with their client port.
const (
	ZooKeeper     = "zookeeper"
	KindZooKeeper = "zookeeper"
	ZooKeeperPort = 2181
)

// ProductZooKeeper is the product a ZooKeeper peer is (Versions).
const ProductZooKeeper = "zookeeper"

func init() {
	Register(Service{
		Name: ZooKeeper, Rank: 5, Kind: KindZooKeeper, DefaultNodes: ZooKeeperDefaultNodes,
		Params: ZooKeeperParams,
		Configure: func(l *Layout, nodes int, params map[string]string) (int, error) {
			var err error
			l.ZooKeeperTick, err = ParseZooKeeperParams(params)
			return nodes, err
		},
		Roles: func(l Layout, _ string) []string { return ZooKeeperRoles(len(l.Nodes)) },
		Role: func(ctx context.Context, _ Layout, _ []clusters.Node, _, addr string) (string, error) {
			return ZooKeeperRole(ctx, addr)
		},
		Locks:   ClientSessions,
		Version: askZooKeeper,
		Reset:   resetZooKeeper,
		Residue: zooKeeperResidue,
	}, zooKeeperKind)
}

// zooKeeperKind is a ZooKeeper peer: a JVM running QuorumPeerMain on its
// zoo.cfg, with its log4j.properties (the log on standard output) and its
// myid, the node's place in the layout from 1.
var zooKeeperKind = &Kind{
	Name: KindZooKeeper,
	Ports: []Port{{Name: "client", Base: ZooKeeperPort, Step: 1},
		{Name: "quorum", Base: 2888, Step: 1}, {Name: "election", Base: 3888, Step: 1}},
	Program: "QuorumPeerMain",
	Ready: func(ctx context.Context, addr string) error {
		_, err := ZooKeeperRole(ctx, addr)
		return err
	},
	ReadyTimeout: 90 * time.Second,
	Log:          "zookeeper.log",
	Stdout:       true,
	Install:      "install a Java runtime and ZooKeeper, Debian's zookeeper package",
	Programs:     []HostProgram{{Name: "java"}},
	Image:        Image{Official: "zookeeper:3.9", Rootfs: RootfsJava, Cmd: []string{"java", "-version"}},
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

// ZooKeeperRole sends the `srvr` four-letter command to addr and returns the
// "Mode:" it reports: leader, follower or standalone. A peer that is not in
// a quorum answers that it is not serving requests, which is an error.
func ZooKeeperRole(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	dl := time.Now().Add(time.Second)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	conn.SetDeadline(dl)
	if _, err := io.WriteString(conn, "srvr"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(conn, 64*1024))
	if err != nil && len(b) == 0 {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	reply := strings.TrimSpace(string(b))
	if reply == "" {
		reply = "an empty reply"
	}
	return "", fmt.Errorf("srvr: %q", firstLine(reply))
}

// zkSystemRoot is the tree ZooKeeper keeps of itself, which a fresh
// ensemble has and a reset leaves.
const zkSystemRoot = "/zookeeper"

// resetZooKeeper is ZooKeeper's Reset: it deletes every znode but
// zkSystemRoot's tree, children first, whoever made them (the impls'
// lock roots and their contenders' ephemeral nodes, which deleting ends
// for sessions that outlived their workers), which also restarts the
// sequence counters of the parents it removes. It returns once every
// peer, synced, shows the tree empty and no ephemeral node.
func resetZooKeeper(ctx context.Context, l Layout, nodes []clusters.Node) error {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	c, err := zkConnect(ctx, addrs)
	if err != nil {
		return fmt.Errorf("%s: reset: %w", l.Backend, err)
	}
	defer c.Close()
	var remove func(p string) error
	remove = func(p string) error {
		children, _, err := c.Children(p)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return fmt.Errorf("list %s: %w", p, err)
		}
		for _, ch := range children {
			cp := path.Join(p, ch)
			if cp == zkSystemRoot {
				continue
			}
			if err := remove(cp); err != nil {
				return err
			}
		}
		if p == "/" {
			return nil
		}
		if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("delete %s: %w", p, err)
		}
		return nil
	}
	if err := remove("/"); err != nil {
		return fmt.Errorf("%s: reset: %w", l.Backend, err)
	}
	return Poll(ctx, func() error {
		res, err := zooKeeperResidue(ctx, l, nodes)
		if err == nil && len(res) > 0 {
			err = fmt.Errorf("%s: reset: left %s", l.Backend, strings.Join(res, "; "))
		}
		return err
	})
}

// zooKeeperResidue is ZooKeeper's Residue: every znode outside
// zkSystemRoot's tree that each peer holds, read from that peer alone
// after a sync, and each peer's count of ephemeral nodes as its mntr
// reports it.
func zooKeeperResidue(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error) {
	var out []string
	for _, n := range nodes {
		paths, err := func() ([]string, error) {
			c, err := zkConnect(ctx, []string{n.Addr})
			if err != nil {
				return nil, err
			}
			defer c.Close()
			if _, err := c.Sync("/"); err != nil {
				return nil, fmt.Errorf("sync: %w", err)
			}
			var paths []string
			var walk func(p string) error
			walk = func(p string) error {
				children, _, err := c.Children(p)
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				if err != nil {
					return fmt.Errorf("list %s: %w", p, err)
				}
				slices.Sort(children)
				for _, ch := range children {
					cp := path.Join(p, ch)
					if cp == zkSystemRoot {
						continue
					}
					paths = append(paths, cp)
					if err := walk(cp); err != nil {
						return err
					}
				}
				return nil
			}
			return paths, walk("/")
		}()
		if err != nil {
			return out, fmt.Errorf("%s: residue of %s: %w", l.Backend, n.Name, err)
		}
		out = append(out, listed(fmt.Sprintf("%s %s: znode ", l.Backend, n.Name), paths)...)
		mntr, err := zkFourLetter(ctx, n.Addr, "mntr")
		if err != nil {
			return out, fmt.Errorf("%s: residue of %s: mntr: %w", l.Backend, n.Name, err)
		}
		eph, ok := mntr["zk_ephemerals_count"]
		if !ok {
			return out, fmt.Errorf("%s: residue of %s: mntr reports no zk_ephemerals_count", l.Backend, n.Name)
		}
		if eph != "0" {
			out = append(out, fmt.Sprintf("%s %s: %s ephemeral nodes", l.Backend, n.Name, eph))
		}
	}
	return out, nil
}

// zkConnect connects to the peers at addrs and returns once the session
// is established, or with ctx's end or resetTimeout.
func zkConnect(ctx context.Context, addrs []string) (*zk.Conn, error) {
	c, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(resetTimeout)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c, nil
			}
		case <-ctx.Done():
			c.Close()
			return nil, ctx.Err()
		case <-t.C:
			c.Close()
			return nil, fmt.Errorf("no session with %s after %v", strings.Join(addrs, ","), resetTimeout)
		}
	}
}

// zkQuiet drops the ZooKeeper client's log.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// zkFourLetter sends a four-letter command to the peer at addr and
// returns its reply's tab-separated lines as a map (mntr's form).
func zkFourLetter(ctx context.Context, addr, cmd string) (map[string]string, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(resetTimeout))
	if _, err := io.WriteString(conn, cmd); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(conn, 1<<20))
	if err != nil && len(b) == 0 {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, nil
}
