package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/tick"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "clock-strobe", Heal: "clock-restore", Family: history.FamilyClock,
			Doc: "flips a node's wall clock between its time and --clock-bump ahead every --strobe for the window"},
		Settings: []string{"clock-bump", "strobe", "window"},
		Needs:    []Ability{NeedClocks},
		New:      newClockStrobe,
		pins:     pinNode,
	})
}

// Strobe is how often clock-strobe flips a node's clock.
var Strobe = NewSetting("strobe", Duration, 10*time.Millisecond, "how often a clock flips", positiveDuration)

// clockStrobe flips one node's clock between its offset and the offset plus
// ClockBump every StrobeRate for the window; the heal restores the offset.
type clockStrobe struct {
	env Env

	mu     sync.Mutex
	stop   chan struct{}
	done   chan struct{}
	target string
	was    time.Duration
}

func newClockStrobe(env Env) (Fault, error) {
	if err := clockEnv(env); err != nil {
		return nil, err
	}
	if err := positive("clock strobe rate", Strobe.Of(env)); err != nil {
		return nil, err
	}
	s := &clockStrobe{env: env}
	return env.onNode(Window.Of(env), s.start, s.restore), nil
}

// start starts flipping node n's clock.
func (s *clockStrobe) start(_ context.Context, node clusters.Node, v *history.Value, _ *rand.Rand) error {
	n := node.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target, s.stop, s.done = n, make(chan struct{}), make(chan struct{})
	was := s.env.Clocks.Offset(n)
	s.was = was
	go func(stop, done chan struct{}) {
		defer close(done)
		on := false
		tick.Every(Strobe.Of(s.env), stop, func() {
			on = !on
			d := was
			if on {
				d = was + ClockBump.Of(s.env)
			}
			_ = s.env.Clocks.Set(n, d)
		})
	}(s.stop, s.done)
	v.Targets = []string{fmt.Sprintf("%s 0/%+v every %v", n, ClockBump.Of(s.env), Strobe.Of(s.env))}
	return nil
}

// restore stops the flipping and sets the node's clock back to its offset.
func (s *clockStrobe) restore(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		return nil, nil
	}
	close(s.stop)
	<-s.done
	s.stop = nil
	return []string{s.target}, s.env.Clocks.Set(s.target, s.was)
}
