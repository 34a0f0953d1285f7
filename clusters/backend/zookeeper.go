package backend

import (
	"fmt"
	"path"
	"strings"
	"time"
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
