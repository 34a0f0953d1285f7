package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

// oneTarget is the body of every fault that hits one target at each
// injection and undoes, at the heal, all it did since the last heal: a node
// (kill-node, pause-node, clock-bump, clock-strobe, delay, loss; built by
// onNode) or a worker process (kill-client, pause-client,
// clock-skew-client; built by onProcess). A fault's own file gives it what
// it does to the target and how it heals.
type oneTarget[T any] struct {
	kind
	// dur is how long the fault stays.
	dur time.Duration
	// pick chooses the target of the fault named fault now, honouring its
	// pins, and returns it with the Value that records it. An error means
	// nothing was hit.
	pick func(ctx context.Context, fault string, rng *rand.Rand) (T, history.Value, error)
	// hit acts on the target x. It completes v (the targets, duration or
	// point to record) before it acts, so that a failed hit records them
	// too, and draws what else it chooses from rng after the pick.
	hit func(ctx context.Context, x T, v *history.Value, rng *rand.Rand) error
	// heal undoes every hit not undone yet and names what it undid.
	heal func(ctx context.Context) ([]string, error)
}

func (f *oneTarget[T]) Duration() time.Duration { return f.dur }

// Inject picks the target and hits it. A failed pick changes nothing; a
// failed hit is recorded with the value it completed.
func (f *oneTarget[T]) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	x, v, err := f.pick(ctx, f.Name(), rng)
	if err != nil {
		return v, err
	}
	err = f.hit(ctx, x, &v, rng)
	return v, err
}

// Heal undoes what the injections since the last heal did and names it.
func (f *oneTarget[T]) Heal(ctx context.Context) (history.Value, error) {
	targets, err := f.heal(ctx)
	return history.Value{Targets: targets}, err
}

// onNode returns a fault that stays dur and, at each injection, hits one
// node of env's cluster: one of the fault's candidates, honouring its pins
// and roles (see Env.hitNode), recorded as the target with dur as the
// duration.
func (env Env) onNode(dur time.Duration, hit func(ctx context.Context, n clusters.Node, v *history.Value, rng *rand.Rand) error, heal func(ctx context.Context) ([]string, error)) Fault {
	pick := func(ctx context.Context, fault string, rng *rand.Rand) (clusters.Node, history.Value, error) {
		return env.hitNode(ctx, fault, dur, rng)
	}
	return &oneTarget[clusters.Node]{dur: dur, pick: pick, hit: hit, heal: heal}
}

// onProcess returns a fault that stays dur and, at each injection, hits one
// live worker of env's pool, honouring the fault's pins (see
// Env.pickProcess), recorded as the target "p3".
func (env Env) onProcess(dur time.Duration, hit func(ctx context.Context, p int, v *history.Value, rng *rand.Rand) error, heal func(ctx context.Context) ([]string, error)) Fault {
	pick := func(_ context.Context, fault string, rng *rand.Rand) (int, history.Value, error) {
		p, err := env.pickProcess(fault, env.Clients.Processes(), rng)
		if err != nil {
			return 0, history.Value{}, err
		}
		return p, history.Value{Targets: []string{procName(p)}}, nil
	}
	return &oneTarget[int]{dur: dur, pick: pick, hit: hit, heal: heal}
}

// undoEachProcess returns a fault that stays dur and hits one live worker
// at each injection with hit (see onProcess). Its heal calls undo for each
// worker whose hit succeeded since the last heal, oldest first, and records
// the targets undo names; it stops at the first worker undo fails on, which
// stays for the next heal.
func (env Env) undoEachProcess(dur time.Duration, hit func(ctx context.Context, p int, v *history.Value, rng *rand.Rand) error, undo func(ctx context.Context, p int) (string, error)) Fault {
	var hits undoList[int]
	return env.onProcess(dur,
		func(ctx context.Context, p int, v *history.Value, rng *rand.Rand) error {
			if err := hit(ctx, p, v, rng); err != nil {
				return err
			}
			hits.add(p, false)
			return nil
		},
		func(ctx context.Context) ([]string, error) {
			return hits.undo(false, func(p int) (string, error) { return undo(ctx, p) })
		})
}

// stopNode returns the body of kill-node, power-loss and pause-node: a
// fault that stays dur, hurts one data node at each injection and undoes
// it, for every node it hurt, at the heal. hurt and undo are the
// provider's ability (Kill or CutPower and Restart, Pause and Resume);
// hurt may add to the value it records (what a power cut lost); hurtVerb
// and undoVerb name them in errors.
//
// A failed hurt is recorded as info, and its node is undone at the heal
// all the same: it may be hurt anyway (undoing an unhurt node does
// nothing). The heal undoes the nodes in the order they were first hurt,
// each once, and stops at the first node it cannot undo, which stays for
// the next heal.
func (env Env) stopNode(dur time.Duration, hurtVerb string, hurt func(context.Context, clusters.Node, *history.Value) error, undoVerb string, undo func(context.Context, clusters.Node) error) Fault {
	var hurts undoList[clusters.Node]
	return env.onNode(dur,
		func(ctx context.Context, n clusters.Node, v *history.Value, _ *rand.Rand) error {
			err := hurt(ctx, n, v)
			hurts.add(n, true)
			if err != nil {
				return fmt.Errorf("%s %s: %w", hurtVerb, n.Name, err)
			}
			return nil
		},
		func(ctx context.Context) ([]string, error) {
			return hurts.undo(false, func(n clusters.Node) (string, error) {
				if err := undo(ctx, n); err != nil {
					return "", fmt.Errorf("%s %s: %w", undoVerb, n.Name, err)
				}
				return n.Name, nil
			})
		})
}

// plain makes an ability that records nothing more a hurt of stopNode.
func plain(f func(context.Context, clusters.Node) error) func(context.Context, clusters.Node, *history.Value) error {
	return func(ctx context.Context, n clusters.Node, _ *history.Value) error { return f(ctx, n) }
}

// holdAt makes worker p stop at the pause point the next time it passes it
// and waits until it is there; a worker that does not get there is
// disarmed, so that it never blocks at the point later with no one to let
// it go. Its errors wrap errNotApplied: the worker was not touched.
func holdAt(ctx context.Context, c Clients, p int, point string) error {
	if err := c.Arm(p, point); err != nil {
		return fmt.Errorf("%w: arm p%d: %v", errNotApplied, p, err)
	}
	if _, err := c.WaitPoint(ctx, p); err != nil {
		_ = c.Disarm(p)
		return fmt.Errorf("%w: p%d did not reach %s: %v", errNotApplied, p, point, err)
	}
	return nil
}

// procName names worker p as a target, "p3".
func procName(p int) string { return fmt.Sprintf("p%d", p) }

// signed renders a clock jump with its sign, "+4s" or "-4s", for targets.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
