package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/locktest/locktest/history"
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

// clockStrobe flips one node's clock between its offset and the offset plus
// ClockBump every StrobeRate for the window; the heal restores the offset.
type clockStrobe struct {
	kind
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
	if env.StrobeRate <= 0 {
		return nil, fmt.Errorf("clock strobe rate must be positive, got %v", env.StrobeRate)
	}
	return &clockStrobe{env: env}, nil
}

func (f *clockStrobe) Duration() time.Duration { return f.env.Window }

func (f *clockStrobe) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	node, v, err := f.env.hitNode(ctx, f.Name(), f.env.Window, rng)
	if err != nil {
		return v, err
	}
	n := node.Name
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target, f.stop, f.done = n, make(chan struct{}), make(chan struct{})
	was := f.env.Clocks.Offset(n)
	f.was = was
	go func(stop, done chan struct{}) {
		defer close(done)
		t := time.NewTicker(f.env.StrobeRate)
		defer t.Stop()
		on := false
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				on = !on
				d := was
				if on {
					d = was + f.env.ClockBump
				}
				_ = f.env.Clocks.Set(n, d)
			}
		}
	}(f.stop, f.done)
	v.Targets = []string{fmt.Sprintf("%s 0/%+v every %v", n, f.env.ClockBump, f.env.StrobeRate)}
	return v, nil
}

func (f *clockStrobe) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop == nil {
		return history.Value{}, nil
	}
	close(f.stop)
	<-f.done
	f.stop = nil
	return history.Value{Targets: []string{f.target}}, f.env.Clocks.Set(f.target, f.was)
}
