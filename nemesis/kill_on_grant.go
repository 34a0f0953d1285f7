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
		FaultKind: history.FaultKind{Name: "kill-on-grant", Heal: "restart-node", Family: history.FamilyNode,
			Doc: "SIGKILLs a data node as soon as it grants a lock it did not hold when the fault began (waiting up to --window), and restarts it after --down"},
		Settings:  []string{"down", "window"},
		Needs:     []Ability{NeedKillNodes, NeedGrantWatch},
		New:       newKillOnGrant,
		pins:      pinNode,
		dataNodes: true,
	})
}

// newKillOnGrant kills one node right after it grants a lock, and
// restarts it, with the same data directory, when healed: the kill of
// antirez's claim 6 (a Redlock node without persistence that forgets a
// live lease) timed so that it always meets one, where kill-node meets one
// only by chance. The cluster watches the node (clusters.GrantWatcher) and
// the kill follows the grant by a few milliseconds; the holder has its
// reply by then. A window in which the node grants nothing leaves it
// untouched, and the fault is recorded as not applied: a kill then would
// test nothing the fault promises. The injection records the node and
// then what it granted, as power-loss records its files:
// "n3", "n3:granted locktest-lock".
func newKillOnGrant(env Env) (Fault, error) {
	k := env.Cluster.(clusters.Killer)
	gw := env.Cluster.(clusters.GrantWatcher)
	if err := positive("fault window", env.Window); err != nil {
		return nil, err
	}
	kill := func(ctx context.Context, n clusters.Node, v *history.Value) error {
		key, err := gw.WaitForGrant(ctx, n, env.Window)
		if errors.Is(err, clusters.ErrUntouched) {
			return fmt.Errorf("%w: %v", errNotApplied, err)
		}
		if err != nil {
			return err
		}
		if err := k.Kill(ctx, n); err != nil {
			return err
		}
		v.Targets = append(v.Targets, fmt.Sprintf("%s:granted %s", n.Name, key))
		return nil
	}
	return env.stopNode(env.NodeDown, "kill", kill, "restart", k.Restart), nil
}
