package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/clusters"
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

// ClockBump is how far clock-bump jumps a node's clock, and
// clock-skew-client a worker's; clock-strobe flips a clock by it.
var ClockBump = NewSetting("clock-bump", Duration, 0, "how far a clock moves (0: 2×ttl)",
	Bound[time.Duration]{"must not be negative (--clock-direction says which way clocks jump)", nonNegativeDuration.OK})

// ClockDirection is the way a clock jump goes: ClockEither (a coin toss
// per jump), ClockForward or ClockBackward.
var ClockDirection = NewSetting("clock-direction", Text, ClockEither,
	"which way a clock jumps: "+ClockForward+" or "+ClockBackward+" (default: either, at random)",
	Bound[string]{"must be " + ClockForward + " or " + ClockBackward, func(s string) bool {
		return s == ClockEither || s == ClockForward || s == ClockBackward
	}})

// offsetWas is a node's clock offset before a fault moved it.
type offsetWas struct {
	node string
	was  time.Duration
}

// newClockBump jumps one node's wall clock forward or back by ClockBump
// (the direction is the seeded source's) for the window, and records the
// node's new offset as the duration; the heal sets each node it moved back
// to the offset it had before.
func newClockBump(env Env) (Fault, error) {
	if err := clockEnv(env); err != nil {
		return nil, err
	}
	var moved undoList[offsetWas]
	clocks := env.Clocks
	return env.onNode(Window.Of(env),
		func(_ context.Context, n clusters.Node, v *history.Value, rng *rand.Rand) error {
			d := env.jump(rng)
			was := clocks.Offset(n.Name)
			v.Targets, v.Duration = []string{n.Name + signed(d)}, int64(was+d)
			moved.add(offsetWas{n.Name, was}, false)
			return clocks.Set(n.Name, was+d)
		},
		func(context.Context) ([]string, error) {
			// Undo in reverse order, so each node ends at its first offset.
			return moved.undo(true, func(o offsetWas) (string, error) {
				return o.node, clocks.Set(o.node, o.was)
			})
		}), nil
}
