package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "power-loss", Heal: "restart-node", Family: history.FamilyNode,
			Doc: "cuts a data node's power once it holds writes it has not synced (waiting up to --window): it dies and loses them; restarted after --down"},
		Settings:  []string{"down", "window"},
		Needs:     []Ability{NeedKillNodes, NeedPowerCut},
		New:       newPowerLoss,
		pins:      pinNode,
		dataNodes: true,
	})
}

// unsyncedPoll is how often power-loss asks a node whether it holds writes
// it has not synced.
const unsyncedPoll = 5 * time.Millisecond

// newPowerLoss cuts the power of one node and restarts it, on what its
// files kept, when healed. The cut comes at the worst moment the window
// offers: as soon as the node holds data it has not synced (a cut with
// nothing to lose is a kill-node), or at the end of the window if that
// moment does not come. The injection records the node, then one target
// per file cut: "n3:appendonlydir/appendonly.aof.1.incr.aof 134->78
// (-56B)", its size at the cut, the size it was cut back to and the bytes
// lost.
func newPowerLoss(env Env) (Fault, error) {
	pc := env.Cluster.(clusters.PowerCutter)
	if err := positive("fault window", env.Window); err != nil {
		return nil, err
	}
	cut := func(ctx context.Context, n clusters.Node, v *history.Value) error {
		if err := waitUnsynced(ctx, pc, n, env.Window); err != nil {
			return err
		}
		cuts, err := pc.CutPower(ctx, n)
		for _, c := range cuts {
			v.Targets = append(v.Targets, fmt.Sprintf("%s:%s %d->%d (-%dB)", n.Name, c.Path, c.Size, c.Durable, c.Size-c.Durable))
		}
		return err
	}
	return env.stopNode(env.NodeDown, "cut the power of", cut, "restart", pc.Restart), nil
}

// waitUnsynced waits until node n holds data it has not synced, or for at
// most limit. Its errors wrap errNotApplied: nothing was done to the node.
func waitUnsynced(ctx context.Context, pc clusters.PowerCutter, n clusters.Node, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		u, err := pc.Unsynced(ctx, n)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotApplied, err)
		}
		if u > 0 || !time.Now().Before(deadline) {
			return nil
		}
		if !sleep(ctx, min(unsyncedPoll, time.Until(deadline))) {
			return fmt.Errorf("%w: %v", errNotApplied, ctx.Err())
		}
	}
}
