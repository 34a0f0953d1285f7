package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "power-loss-all", Heal: "restart-node", Family: history.FamilyNode,
			Doc: "cuts the power of every data node at once, as a datacenter's power failure does: each dies and loses what it had not synced; all restart together after --down"},
		Settings:  []string{"down"},
		Needs:     []Ability{NeedKillNodes, NeedPowerCut},
		New:       newPowerLossAll,
		pins:      pinNone,
		noPins:    "it cuts every data node",
		dataNodes: true,
		Whole:     true,
	})
}

// allNodes is a fault that stops every data node at the same moment, one
// goroutine per node, and whose heal restarts every node it stopped, all
// at once: a cluster that needs a quorum to serve (Raft) serves again only
// when enough are back, so a restart that waited for its node to serve
// before the next began would wait for ever. power-loss-all is Jepsen's
// coordinated power failure (clusters.PowerCutter.CutPower), so that no
// replica keeps what none of them synced; kill-all its control, a process
// crash of every node, whose page cache keeps what they wrote.
type allNodes struct {
	kind
	env  Env
	k    clusters.Killer
	down time.Duration
	// stop stops one node and returns the files it cut, if any.
	stop func(ctx context.Context, n clusters.Node) ([]clusters.FileCut, error)

	mu  sync.Mutex
	cut []clusters.Node // stopped and not yet restarted, in the cluster's order
}

// newPowerLossAll builds power-loss-all for env, whose cluster can cut
// power.
func newPowerLossAll(env Env) (Fault, error) {
	pc := env.Cluster.(clusters.PowerCutter)
	return &allNodes{env: env, k: pc, down: Down.Of(env), stop: pc.CutPower}, nil
}

func (f *allNodes) Duration() time.Duration { return f.down }

// Inject stops every data node at once. The value's targets are the
// nodes, then, for power-loss-all, one per file cut, as power-loss
// records them ("n3:jetstream/…/1.blk 4096->0 (-4096B)"), and its
// duration how long they stay down (--down), as kill-node's. A node whose
// stop failed may have died all the same: the injection is then of
// unknown outcome, and the heal restarts it too.
func (f *allNodes) Inject(ctx context.Context, _ *rand.Rand) (history.Value, error) {
	nodes := targetNodes(f.env.Cluster)
	cuts := make([][]clusters.FileCut, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { cuts[i], errs[i] = f.stop(ctx, n) })
	}
	wg.Wait()
	v := history.Value{Duration: int64(f.down)}
	for _, n := range nodes {
		v.Targets = append(v.Targets, n.Name)
	}
	for i, n := range nodes {
		for _, c := range cuts[i] {
			v.Targets = append(v.Targets, fmt.Sprintf("%s:%s %d->%d (-%dB)", n.Name, c.Path, c.Size, c.Durable, c.Size-c.Durable))
		}
	}
	f.mu.Lock()
	f.cut = append(f.cut, nodes...)
	f.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return v, unknownOutcome{fmt.Errorf("%s: %w", f.Name(), err)}
	}
	return v, nil
}

// Heal restarts every node the injections cut, all at once (in one
// clusters.GroupRestarter start where the cluster has it), and records
// those that came back. One whose restart failed stays for the next heal.
func (f *allNodes) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	nodes := f.cut
	f.cut = nil
	f.mu.Unlock()
	errs := make([]error, len(nodes))
	if gr, ok := f.env.Cluster.(clusters.GroupRestarter); ok && len(nodes) > 0 {
		// One start of them all; its error names the node, and every node
		// stays for the next heal.
		if err := gr.RestartNodes(ctx, nodes); err != nil {
			f.mu.Lock()
			f.cut = append(nodes, f.cut...)
			f.mu.Unlock()
			return history.Value{}, fmt.Errorf("restart every node: %w", err)
		}
	} else {
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Go(func() { errs[i] = f.k.Restart(ctx, n) })
		}
		wg.Wait()
	}
	var v history.Value
	var left []clusters.Node
	for i, n := range nodes {
		if errs[i] != nil {
			left = append(left, n)
			errs[i] = fmt.Errorf("restart %s: %w", n.Name, errs[i])
			continue
		}
		v.Targets = append(v.Targets, n.Name)
	}
	f.mu.Lock()
	f.cut = append(left, f.cut...)
	f.mu.Unlock()
	return v, errors.Join(errs...)
}
