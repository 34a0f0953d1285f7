package backend

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
