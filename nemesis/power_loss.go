package nemesis

import (
	"context"
	"errors"
	"fmt"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "power-loss", Heal: "restart-node", Family: history.FamilyNode,
			Doc: "cuts a data node's power once it holds a grant's write it has not synced (waiting up to --window): it dies and loses it; restarted after --down"},
		Settings:    []string{"down", "window"},
		Needs:       []Ability{NeedKillNodes, NeedPowerCut},
		WaitsWindow: true,
		New:         newPowerLoss,
		pins:        pinNode,
		dataNodes:   true,
	})
}

// newPowerLoss cuts the power of one node and restarts it, on what its
// files kept, when healed. The cut comes at the worst moment the window
// offers: as soon as the node holds a grant's write (a SET) it has not
// synced and has had time to acknowledge — a cut with nothing to lose is a
// kill-node — or at the end of the window if that moment does not come.
// The cluster waits and cuts where the node runs
// (clusters.PowerCutter.CutPowerOnWrite), so that the cut comes before
// everysec syncs the write also over SSH to a loaded host. The injection
// records the node, then one target per file cut:
// "n3:appendonlydir/appendonly.aof.1.incr.aof 134->78 (-56B)", its size at
// the cut, the size it was cut back to and the bytes lost.
func newPowerLoss(env Env) (Fault, error) {
	pc := env.Cluster.(clusters.PowerCutter)
	if err := positive("fault window", Window.Of(env)); err != nil {
		return nil, err
	}
	cut := func(ctx context.Context, n clusters.Node, v *history.Value) error {
		cuts, err := pc.CutPowerOnWrite(ctx, n, Window.Of(env))
		for _, c := range cuts {
			v.Targets = append(v.Targets, fmt.Sprintf("%s:%s %d->%d (-%dB)", n.Name, c.Path, c.Size, c.Durable, c.Size-c.Durable))
		}
		if errors.Is(err, clusters.ErrUntouched) {
			return fmt.Errorf("%w: %v", errNotApplied, err)
		}
		return err
	}
	return env.stopNode(Down.Of(env), "cut the power of", cut, "restart", pc.Restart), nil
}
