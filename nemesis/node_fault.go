package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

// nodeFault hurts one data node at each injection and undoes it, for
// every node it hurt, at the heal: the body of kill-node and pause-node,
// which give it the provider's ability (Kill and Restart, Pause and
// Resume) and their verbs for errors.
type nodeFault struct {
	kind
	env Env
	// dur is how long the fault stays.
	dur time.Duration
	// hurt and undo act on one node; hurtVerb and undoVerb name them.
	hurt, undo         func(ctx context.Context, n clusters.Node) error
	hurtVerb, undoVerb string

	hit undoList[clusters.Node] // hurt and not undone yet
}

func (f *nodeFault) Duration() time.Duration { return f.dur }

// Inject picks a node (honouring the fault's pins and roles) and hurts
// it. A failed attempt is recorded as info, and its node is undone at the
// heal all the same: it may be hurt anyway (undoing an unhurt node does
// nothing).
func (f *nodeFault) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	n, v, err := f.env.hitNode(ctx, f.Name(), f.dur, rng)
	if err != nil {
		return v, err
	}
	err = f.hurt(ctx, n)
	f.hit.add(n, true)
	if err != nil {
		return v, fmt.Errorf("%s %s: %w", f.hurtVerb, n.Name, err)
	}
	return v, nil
}

// Heal undoes every node hurt so far, in order, and names them; it stops
// at the first node it cannot undo, which stays for the next heal.
func (f *nodeFault) Heal(ctx context.Context) (history.Value, error) {
	var v history.Value
	err := f.hit.undo(false, func(n clusters.Node) error {
		if err := f.undo(ctx, n); err != nil {
			return fmt.Errorf("%s %s: %w", f.undoVerb, n.Name, err)
		}
		v.Targets = append(v.Targets, n.Name)
		return nil
	})
	return v, err
}
