package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/locktest/locktest/history"
)

func clockEnv(env Env) error {
	if env.Clocks == nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, orDefault(env.ClockReason, "the run has no clock shim"))
	}
	if env.ClockBump == 0 || env.Window <= 0 {
		return fmt.Errorf("clock bump must be non-zero and the fault window positive, got %v and %v", env.ClockBump, env.Window)
	}
	return nil
}

// clockBump jumps one node's wall clock forward or back by ClockBump (the
// direction is the seeded source's) for the window; the heal sets it back
// to the offset it had before.
type clockBump struct {
	env Env

	mu      sync.Mutex
	touched []offsetWas
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

func (f *clockBump) Name() string            { return "clock-bump" }
func (f *clockBump) HealName() string        { return "clock-restore" }
func (f *clockBump) Duration() time.Duration { return f.env.Window }

func (f *clockBump) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	node, roles, err := f.env.pickNode(ctx, f.Name(), f.env.candidates(f.Name()), rng)
	if err != nil {
		return history.Value{}, err
	}
	n := node.Name
	d := f.env.jump(rng)
	was := f.env.Clocks.Offset(n)
	off := was + d
	v := history.Value{Targets: []string{n + signed(d)}, Duration: int64(off), Roles: roles}
	f.mu.Lock()
	f.touched = append(f.touched, offsetWas{n, was})
	f.mu.Unlock()
	return v, f.env.Clocks.Set(n, off)
}

func (f *clockBump) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v history.Value
	// Undo in reverse order, so each node ends at its first offset.
	for len(f.touched) > 0 {
		t := f.touched[len(f.touched)-1]
		if err := f.env.Clocks.Set(t.node, t.was); err != nil {
			return v, err
		}
		v.Targets = append(v.Targets, t.node)
		f.touched = f.touched[:len(f.touched)-1]
	}
	return v, nil
}

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
	if env.StrobeRate <= 0 {
		return nil, fmt.Errorf("clock strobe rate must be positive, got %v", env.StrobeRate)
	}
	return &clockStrobe{env: env}, nil
}

func (f *clockStrobe) Name() string            { return "clock-strobe" }
func (f *clockStrobe) HealName() string        { return "clock-restore" }
func (f *clockStrobe) Duration() time.Duration { return f.env.Window }

func (f *clockStrobe) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	node, roles, err := f.env.pickNode(ctx, f.Name(), f.env.candidates(f.Name()), rng)
	if err != nil {
		return history.Value{}, err
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
	return history.Value{Targets: []string{fmt.Sprintf("%s 0/%+v every %v", n, f.env.ClockBump, f.env.StrobeRate)},
		Duration: int64(f.env.Window), Roles: roles}, nil
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

// clockReset sets every node's clock back to the host's: an explicit step in
// a scenario's schedule. Its heal does nothing.
type clockReset struct{ env Env }

func newClockReset(env Env) (Fault, error) {
	if env.Clocks == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, orDefault(env.ClockReason, "the run has no clock shim"))
	}
	return &clockReset{env: env}, nil
}

func (f *clockReset) Name() string            { return "clock-reset" }
func (f *clockReset) HealName() string        { return "clock-reset-done" }
func (f *clockReset) Duration() time.Duration { return 0 }

func (f *clockReset) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	var v history.Value
	for _, n := range nodeNames(f.env) {
		if f.env.Clocks.Offset(n) != 0 {
			v.Targets = append(v.Targets, n)
		}
		if err := f.env.Clocks.Set(n, 0); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (f *clockReset) Heal(ctx context.Context) (history.Value, error) { return history.Value{}, nil }

// clockSkewClient skews one worker's wall clock — the clock source of the
// impls that compute expiry from the client's clock — by ±ClockBump.
type clockSkewClient struct {
	env     Env
	clients SkewableClients

	mu     sync.Mutex
	skewed []int
}

func newClockSkewClient(env Env) (Fault, error) {
	c, ok := env.Clients.(SkewableClients)
	if !ok || env.Clients == nil {
		return nil, fmt.Errorf("%w: the client pool cannot skew clocks", ErrUnavailable)
	}
	if env.ClockBump == 0 || env.Window <= 0 {
		return nil, fmt.Errorf("clock bump must be non-zero and the fault window positive, got %v and %v", env.ClockBump, env.Window)
	}
	return &clockSkewClient{env: env, clients: c}, nil
}

func (f *clockSkewClient) Name() string            { return "clock-skew-client" }
func (f *clockSkewClient) HealName() string        { return "clock-unskew-client" }
func (f *clockSkewClient) Duration() time.Duration { return f.env.Window }

func (f *clockSkewClient) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	p, err := f.env.pickProcess(f.Name(), f.clients.Processes(), rng)
	if err != nil {
		return history.Value{}, err
	}
	d := f.env.jump(rng)
	v := history.Value{Targets: []string{fmt.Sprintf("p%d", p) + signed(d)}, Duration: int64(d)}
	if err := f.clients.SetWallOffset(p, d); err != nil {
		return v, fmt.Errorf("%w: %v", errNotApplied, err)
	}
	f.mu.Lock()
	f.skewed = append(f.skewed, p)
	f.mu.Unlock()
	return v, nil
}

func (f *clockSkewClient) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v history.Value
	for len(f.skewed) > 0 {
		p := f.skewed[0]
		// A worker that died since cannot be unskewed and needs no unskew.
		if err := f.clients.SetWallOffset(p, 0); err == nil {
			v.Targets = append(v.Targets, fmt.Sprintf("p%d", p))
		}
		f.skewed = f.skewed[1:]
	}
	return v, nil
}

// signed renders a clock jump with its sign, "+4s" or "-4s", for targets.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
