package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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

	// pinOf names a target as a pin would ("n2", "p3"). racing marks a
	// fault at a pause point, whose target is whichever candidate gets
	// there first: its plan pins the candidates (pins, the run's pins by
	// fault name), not the one that won the race.
	pinOf  func(T) string
	racing bool
	pins   map[string][]string

	mu   sync.Mutex
	last []string // the pins of the last injection, for its Plan entry
}

func (f *oneTarget[T]) Duration() time.Duration { return f.dur }

// Inject picks the target and hits it. A failed pick changes nothing; a
// failed hit is recorded with the value it completed.
func (f *oneTarget[T]) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	x, v, err := f.pick(ctx, f.Name(), rng)
	f.mu.Lock()
	switch {
	case f.racing || err != nil:
		// The candidates: a failed pick hit nothing, and a replay tries
		// the same choice again.
		f.last = slices.Clone(f.pins[f.Name()])
	default:
		f.last = []string{f.pinOf(x)}
	}
	f.mu.Unlock()
	if err != nil {
		return v, err
	}
	err = f.hit(ctx, x, &v, rng)
	return v, err
}

// plannedPins returns what the last injection's Plan entry pins: the
// target it hit, or its candidates (see racing).
func (f *oneTarget[T]) plannedPins() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
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
	return &oneTarget[clusters.Node]{dur: dur, pick: pick, hit: hit, heal: heal,
		pinOf: func(n clusters.Node) string { return n.Name }, pins: env.Targets}
}

// onProcess returns a fault that stays dur and, at each injection, hits one
// live worker of env's pool, honouring the fault's pins (see
// Env.pickProcess), recorded as the target "p3". With a pause point, the
// worker hit is instead the first of the candidates to stop at the point
// (see holdFirst), and hit finds it waiting there; the point is recorded
// also when no worker got there.
func (env Env) onProcess(dur time.Duration, point string, hit func(ctx context.Context, p int, v *history.Value, rng *rand.Rand) error, heal func(ctx context.Context) ([]string, error)) Fault {
	pick := func(ctx context.Context, fault string, rng *rand.Rand) (int, history.Value, error) {
		if point != "" {
			v := history.Value{Point: point}
			procs, err := env.processCandidates(fault, env.Clients.Processes())
			if err != nil {
				return 0, v, err
			}
			p, err := holdFirst(ctx, env.Clients, procs, point)
			if err != nil {
				return 0, v, err
			}
			v.Targets = []string{procName(p)}
			return p, v, nil
		}
		p, err := env.pickProcess(fault, env.Clients.Processes(), rng)
		if err != nil {
			return 0, history.Value{}, err
		}
		return p, history.Value{Targets: []string{procName(p)}}, nil
	}
	return &oneTarget[int]{dur: dur, pick: pick, hit: hit, heal: heal,
		pinOf: procName, racing: point != "", pins: env.Targets}
}

// undoEachProcess returns a fault that stays dur and hits one live worker
// at each injection with hit (see onProcess, also for point). Its heal calls undo for each
// worker whose hit succeeded since the last heal, oldest first, and records
// the targets undo names; it stops at the first worker undo fails on, which
// stays for the next heal.
func (env Env) undoEachProcess(dur time.Duration, point string, hit func(ctx context.Context, p int, v *history.Value, rng *rand.Rand) error, undo func(ctx context.Context, p int) (string, error)) Fault {
	var hits undoList[int]
	return env.onProcess(dur, point,
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
// all the same: it may be hurt anyway. A hurt that certainly did nothing
// (errNotApplied) is recorded as fail, and its node is not undone: a
// restart of a server that still runs would find its port taken. The heal undoes the nodes in the order they were first hurt,
// each once, and stops at the first node it cannot undo, which stays for
// the next heal.
func (env Env) stopNode(dur time.Duration, hurtVerb string, hurt func(context.Context, clusters.Node, *history.Value) error, undoVerb string, undo func(context.Context, clusters.Node) error) Fault {
	var hurts undoList[clusters.Node]
	return env.onNode(dur,
		func(ctx context.Context, n clusters.Node, v *history.Value, _ *rand.Rand) error {
			err := hurt(ctx, n, v)
			if errors.Is(err, errNotApplied) {
				// Nothing was done to n: its heal must not undo
				// anything (a restart of a node still running would
				// find its port taken).
				return fmt.Errorf("%s %s: %w", hurtVerb, n.Name, err)
			}
			hurts.add(n, true)
			if err == nil {
				return nil
			}
			// Also a hurt that the run's deadline cut short may have
			// happened: a kill sent over SSH before the deadline.
			return unknownOutcome{fmt.Errorf("%s %s: %w", hurtVerb, n.Name, err)}
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

// unknownOutcome is the error of an act that may have happened: the
// schedule records its completion as info, also when what cut it short was
// the run's context (a command to a remote host whose deadline passed after
// it was sent), which otherwise means that nothing was done.
type unknownOutcome struct{ err error }

func (e unknownOutcome) Error() string { return e.err.Error() }
func (e unknownOutcome) Unwrap() error { return e.err }

// plain makes an ability that records nothing more a hurt of stopNode.
func plain(f func(context.Context, clusters.Node) error) func(context.Context, clusters.Node, *history.Value) error {
	return func(ctx context.Context, n clusters.Node, _ *history.Value) error { return f(ctx, n) }
}

// holdFirst arms every worker of procs at the pause point, waits until the
// first of them stops there and returns it, waiting at the point; the
// others are disarmed (one that got there too goes on). Waiting for one
// worker picked in advance could miss the whole run: under the exponential
// backoff a worker that lost a few times can starve while the others take
// the lock, and the first to reach the point is the holder whose pause or
// death matters now. When none gets there (the run ends, the workers
// exit), every armed worker is disarmed, so that none blocks at the point
// later with no one to let it go, and the error wraps errNotApplied: no
// worker was touched.
func holdFirst(ctx context.Context, c Clients, procs []int, point string) (int, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type arrival struct {
		p   int
		err error
	}
	arrived := make(chan arrival, len(procs))
	var armed []int
	var armErr error
	for _, p := range procs {
		if err := c.Arm(p, point); err != nil {
			armErr = fmt.Errorf("arm p%d: %v", p, err)
			continue
		}
		armed = append(armed, p)
		go func() {
			_, err := c.WaitPoint(wctx, p)
			arrived <- arrival{p, err}
		}()
	}
	if len(armed) == 0 {
		return 0, fmt.Errorf("%w: %v", errNotApplied, armErr)
	}
	first, waitErr := -1, error(nil)
	for range armed {
		a := <-arrived
		switch {
		case a.err == nil && first < 0:
			first = a.p
			cancel()
		case a.err != nil && waitErr == nil:
			waitErr = a.err
		}
	}
	for _, p := range armed {
		if p != first {
			_ = c.Disarm(p)
		}
	}
	if first < 0 {
		names := make([]string, len(armed))
		for i, p := range armed {
			names[i] = procName(p)
		}
		return 0, fmt.Errorf("%w: %s did not reach %s: %v", errNotApplied, strings.Join(names, ","), point, waitErr)
	}
	return first, nil
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
