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
		FaultKind: history.FaultKind{Name: "pause-node", Heal: "resume-node", Family: history.FamilyNode,
			Doc: "freezes a data node with SIGSTOP for the window: it answers nothing, then everything at once"},
		Settings:  []string{"window"},
		Needs:     []Ability{NeedPauseNodes},
		New:       newPauseNode,
		pins:      pinNode,
		dataNodes: true,
	})
}

// pauseNode freezes one node process with SIGSTOP for the window and thaws
// it with SIGCONT: a node that answers nothing, then everything at once.
type pauseNode struct {
	kind
	env    Env
	pauser clusters.Pauser

	mu     sync.Mutex
	paused []clusters.Node
}

func newPauseNode(env Env) (Fault, error) {
	p := env.Cluster.(clusters.Pauser)
	if env.Window <= 0 {
		return nil, fmt.Errorf("fault window must be positive, got %v", env.Window)
	}
	return &pauseNode{env: env, pauser: p}, nil
}

func (f *pauseNode) Duration() time.Duration { return f.env.Window }

func (f *pauseNode) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	n, roles, err := f.env.pickNode(ctx, f.Name(), f.env.candidates(f.Name()), rng)
	if err != nil {
		return history.Value{}, err
	}
	v := history.Value{Targets: []string{n.Name}, Duration: int64(f.env.Window), Roles: roles}
	err = f.pauser.Pause(ctx, n)
	f.mu.Lock()
	if !slices.Contains(f.paused, n) {
		f.paused = append(f.paused, n)
	}
	f.mu.Unlock()
	if err != nil {
		return v, fmt.Errorf("pause %s: %w", n.Name, err)
	}
	return v, nil
}

func (f *pauseNode) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v history.Value
	for len(f.paused) > 0 {
		n := f.paused[0]
		if err := f.pauser.Resume(ctx, n); err != nil {
			return v, fmt.Errorf("resume %s: %w", n.Name, err)
		}
		v.Targets = append(v.Targets, n.Name)
		f.paused = f.paused[1:]
	}
	return v, nil
}
