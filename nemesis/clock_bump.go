package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "clock-bump", Heal: "clock-restore", Family: history.FamilyClock,
			Doc: "jumps a node's wall clock forward or back by --clock-bump for the window"},
		Settings: []string{"clock-bump", "clock-direction", "window"},
		Needs:    []Ability{NeedClocks},
		New:      newClockBump,
		pins:     pinNode,
	})
}

// clockBump jumps one node's wall clock forward or back by ClockBump (the
// direction is the seeded source's) for the window; the heal sets it back
// to the offset it had before.
type clockBump struct {
	kind
	env Env

	touched undoList[offsetWas]
}

// offsetWas is a node's clock offset before a fault moved it.
type offsetWas struct {
	node string
	was  time.Duration
}

func newClockBump(env Env) (Fault, error) {
	if err := clockEnv(env); err != nil {
		return nil, err
	}
	return &clockBump{env: env}, nil
}

func (f *clockBump) Duration() time.Duration { return f.env.Window }

func (f *clockBump) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	node, v, err := f.env.hitNode(ctx, f.Name(), 0, rng)
	if err != nil {
		return v, err
	}
	n := node.Name
	d := f.env.jump(rng)
	was := f.env.Clocks.Offset(n)
	off := was + d
	v.Targets, v.Duration = []string{n + signed(d)}, int64(off)
	f.touched.add(offsetWas{n, was}, false)
	return v, f.env.Clocks.Set(n, off)
}

func (f *clockBump) Heal(ctx context.Context) (history.Value, error) {
	var v history.Value
	// Undo in reverse order, so each node ends at its first offset.
	err := f.touched.undo(true, func(t offsetWas) error {
		if err := f.env.Clocks.Set(t.node, t.was); err != nil {
			return err
		}
		v.Targets = append(v.Targets, t.node)
		return nil
	})
	return v, err
}
