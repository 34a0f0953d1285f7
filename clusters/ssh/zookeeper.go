package ssh

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/internal/shellquote"
)

// The first ports of a ZooKeeper peer; the k-th peer of a host adds k to
// each.
const (
	zkClientPort   = 2181
	zkQuorumPort   = 2888
	zkElectionPort = 3888
)

// The ZooKeeper peers' settings: the local provider's defaults (the tick
// is the backend's, backend.Layout.ZooKeeperTick).
const (
	zkHeap = "128m"
	// zkJarDir is where Debian's libzookeeper-java puts its jars, on each
	// host.
	zkJarDir = "/usr/share/java"
	// zkReadyTimeout bounds the wait for a peer to join a quorum: the
	// JVMs of the ensemble start at once, which takes seconds on a loaded
	// machine.
	zkReadyTimeout = 90 * time.Second
)

// zkJars are the jars of a peer's class path under zkJarDir;
// zookeeper.jar's manifest names the rest.
var zkJars = []string{"zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar"}

// zkMain is what a peer's command line holds, which its pid is checked
// against before a signal.
const zkMain = "QuorumPeerMain"

// startZooKeeper writes n's zoo.cfg, log4j.properties and myid (first
// start: after checking that the host has java and the jars), starts the
// peer's JVM in the background in a session of its own, and waits until
// the peer serves in a quorum. The commands on the host run under rctx,
// the wait under ctx (see startNode).
func (cl *Cluster) startZooKeeper(ctx, rctx context.Context, n *node, first bool) error {
	h := n.conn.Host
	java := h.Binary("java")
	var cp []string
	for _, j := range zkJars {
		cp = append(cp, path.Join(zkJarDir, j))
	}
	if first {
		var check strings.Builder
		fmt.Fprintf(&check, "command -v %s >/dev/null || { echo 'no %s on the host (install a Java runtime, or give its path under binaries: in the inventory)' >&2; exit 3; }\n", shellquote.Quote(java), java)
		for _, j := range cp {
			fmt.Fprintf(&check, "[ -f %[1]s ] || { echo 'no %[1]s on the host (install ZooKeeper, Debian'\\''s zookeeper package)' >&2; exit 3; }\n", j)
		}
		if err := cl.prepare(rctx, n, check.String()); err != nil {
			return err
		}
	}
	var peers []backend.ZooKeeperPeer
	for i, m := range cl.nodes {
		peers = append(peers, backend.ZooKeeperPeer{ID: i + 1, IP: m.ip(), Quorum: zkQuorumPort + m.slot, Election: zkElectionPort + m.slot})
	}
	myid := 0
	for i, m := range cl.nodes {
		if m == n {
			myid = i + 1
		}
	}
	conf := backend.ZooKeeperConfig{Node: n.name, Tick: cl.layout.ZooKeeperTick, DataDir: n.dir + "/data", ClientIP: n.ip(), ClientPort: n.port(), Peers: peers}
	args := append([]string{java}, backend.ZooKeeperJVM(zkHeap, strings.Join(cp, ":"), n.dir+"/log4j.properties", n.dir+"/zoo.cfg", "-Dzookeeper.log.dir="+n.dir)...)
	n.mu.Lock()
	env := n.env
	n.mu.Unlock()
	var files strings.Builder
	fmt.Fprintf(&files, "cat > %s/zoo.cfg <<'EOF'\n%sEOF\n", shellquote.Quote(n.dir), conf.String())
	fmt.Fprintf(&files, "cat > %s/log4j.properties <<'EOF'\n%sEOF\n", shellquote.Quote(n.dir), backend.ZooKeeperLog4j)
	fmt.Fprintf(&files, "echo %d > %s/data/myid\n", myid, shellquote.Quote(n.dir))
	if err := cl.startDetached(rctx, n, files.String(), append(slices.Clone(env), args...), "zookeeper.log"); err != nil {
		return err
	}
	return waitReady(ctx, n, zkReadyTimeout)
}
