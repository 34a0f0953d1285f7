package nemesis

import (
	"context"
	"fmt"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "kill-on-grant", Heal: "restart-node", Family: history.FamilyNode,
			Doc: "SIGKILLs a data node right after a client's acquire succeeds (waiting up to --window), while the new holder waits at its after-acquire point; restarts it after --down"},
		Settings:    []string{"down", "window"},
		Needs:       []Ability{NeedKillNodes, NeedClients},
		WaitsWindow: true,
		New:         newKillOnGrant,
		pins:        pinNode,
		dataNodes:   true,
	})
}

// grantPoint is where kill-on-grant holds the client whose acquire it
// waits for: its acquire has succeeded, and it has done nothing with the
// lock yet.
const grantPoint = "after-acquire"

// newKillOnGrant kills one node right after a client was granted the
// lock, and restarts it, with the same data directory, when healed: the
// kill of antirez's claim 6 (a Redlock node without persistence that
// forgets a live lease) timed so that it meets a live grant, where
// kill-node meets one only by chance. Every worker is armed at its
// after-acquire point; the first to get there waits while the node is
// killed, and then goes on (a stop of a few milliseconds). The grant is
// live on the node when the node is the lock service (one node), or when
// the acquirer could not have won without it (a partition that leaves it
// a bare majority through the node, as claim 6's does); elsewhere the
// kill may hit a node the holder did not need. A window in which no
// acquire succeeds leaves the node untouched, and the fault is recorded
// as not applied: a kill then would test nothing it promises. The
// injection records the node and the holder: "n3", "n3:after p1's
// acquire".
func newKillOnGrant(env Env) (Fault, error) {
	k := env.Cluster.(clusters.Killer)
	if err := positive("fault window", Window.Of(env)); err != nil {
		return nil, err
	}
	kill := func(ctx context.Context, n clusters.Node, v *history.Value) error {
		wctx, cancel := context.WithTimeout(ctx, Window.Of(env))
		p, err := holdFirst(wctx, env.Clients, env.Clients.Processes(), grantPoint)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: no acquire succeeded within %s: %v", errNotApplied, Window.Of(env), err)
		}
		err = k.Kill(ctx, n)
		if cerr := env.Clients.Continue(p); cerr != nil && err == nil {
			err = fmt.Errorf("continue %s after the kill: %w", procName(p), cerr)
		}
		v.Targets = append(v.Targets, fmt.Sprintf("%s:after %s's acquire", n.Name, procName(p)))
		return err
	}
	return env.stopNode(Down.Of(env), "kill", kill, "restart", k.Restart), nil
}
