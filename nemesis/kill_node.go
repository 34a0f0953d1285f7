package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
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

// killNode SIGKILLs one node of the cluster and restarts it, with the same
// data directory, when healed.
type killNode struct {
	kind
	env    Env
	killer clusters.Killer

	mu   sync.Mutex
	dead []clusters.Node
}

func newKillNode(env Env) (Fault, error) {
	return &killNode{env: env, killer: env.Cluster.(clusters.Killer)}, nil
}

func (f *killNode) Duration() time.Duration { return f.env.NodeDown }

func (f *killNode) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	n, roles, err := f.env.pickNode(ctx, f.Name(), f.env.candidates(f.Name()), rng)
	if err != nil {
		return history.Value{}, err
	}
	v := history.Value{Targets: []string{n.Name}, Duration: int64(f.env.NodeDown), Roles: roles}
	err = f.killer.Kill(ctx, n)
	// A failed kill is recorded as info: the node may be down all the same,
	// so Heal restarts it too (restarting a running node does nothing).
	f.mu.Lock()
	if !slices.Contains(f.dead, n) {
		f.dead = append(f.dead, n)
	}
	f.mu.Unlock()
	if err != nil {
		return v, fmt.Errorf("kill %s: %w", n.Name, err)
	}
	return v, nil
}

func (f *killNode) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v history.Value
	for len(f.dead) > 0 {
		n := f.dead[0]
		if err := f.killer.Restart(ctx, n); err != nil {
			return v, fmt.Errorf("restart %s: %w", n.Name, err)
		}
		v.Targets = append(v.Targets, n.Name)
		f.dead = f.dead[1:]
	}
	return v, nil
}
