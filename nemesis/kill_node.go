package nemesis

import (
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
	"time"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "kill-node", Heal: "restart-node", Family: history.FamilyNode,
			Doc: "SIGKILLs a data node and restarts it after --down with the same port and data directory"},
		Settings:  []string{"down"},
		Needs:     []Ability{NeedKillNodes},
		New:       newKillNode,
		pins:      pinNode,
		dataNodes: true,
	})
}

// Down is how long a killed node stays down before its restart
// (antirez's "delayed restart" when it exceeds the TTL); kill-on-grant
// and power-loss read it too.
var Down = NewSetting("down", Duration, time.Second, "how long a killed node stays down before its restart (the restart delay)", nonNegativeDuration)

// newKillNode SIGKILLs one node of the cluster and restarts it, with the
// same data directory, when healed.
func newKillNode(env Env) (Fault, error) {
	k := env.Cluster.(clusters.Killer)
	return env.stopNode(Down.Of(env), "kill", plain(k.Kill), "restart", k.Restart), nil
}
