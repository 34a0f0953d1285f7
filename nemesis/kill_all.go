package nemesis

import (
	"context"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "kill-all", Heal: "restart-node", Family: history.FamilyNode,
			Doc: "SIGKILLs every data node at once, a process crash of the whole cluster with the machines up (the page cache keeps what was written); all restart together after --down"},
		Settings:  []string{"down"},
		Needs:     []Ability{NeedKillNodes},
		New:       newKillAll,
		pins:      pinNone,
		noPins:    "it kills every data node",
		dataNodes: true,
		Whole:     true,
	})
}

// newKillAll builds kill-all for env, whose cluster can kill nodes.
func newKillAll(env Env) (Fault, error) {
	k := env.Cluster.(clusters.Killer)
	stop := func(ctx context.Context, n clusters.Node) ([]clusters.FileCut, error) { return nil, k.Kill(ctx, n) }
	return &allNodes{env: env, k: k, down: Down.Of(env), stop: stop}, nil
}
