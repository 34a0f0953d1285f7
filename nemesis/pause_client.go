package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "pause-client", Heal: "resume-client", Family: history.FamilyProcess,
			Doc: "freezes a worker with SIGSTOP for --pause, at a pause point or anywhere: a stop-the-world GC pause"},
		Settings: []string{"pause", "pause-point"},
		Needs:    []Ability{NeedClients},
		New:      newPauseClient,
		pins:     pinProcess,
	})
}

// pauseClient freezes one worker process with SIGSTOP, as a stop-the-world
// GC pause would, and thaws it with SIGCONT. At a pause point it stops the
// worker exactly there: the worker reports the point and blocks, and is
// stopped before it is told to go on.
type pauseClient struct {
	kind
	env Env

	mu     sync.Mutex
	target int
	paused bool
}

func newPauseClient(env Env) (Fault, error) {
	if env.ClientPause <= 0 {
		return nil, fmt.Errorf("client pause duration must be positive, got %v", env.ClientPause)
	}
	return &pauseClient{env: env}, nil
}

func (f *pauseClient) Duration() time.Duration { return f.env.ClientPause }

func (f *pauseClient) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	p, err := f.env.pickProcess(f.Name(), f.env.Clients.Processes(), rng)
	if err != nil {
		return history.Value{}, err
	}
	v := history.Value{Targets: []string{fmt.Sprintf("p%d", p)}, Point: f.env.PausePoint,
		Duration: int64(f.env.ClientPause)}
	if f.env.PausePoint != "" {
		if err := f.env.Clients.Arm(p, f.env.PausePoint); err != nil {
			return v, fmt.Errorf("%w: arm p%d: %v", errNotApplied, p, err)
		}
		if _, err := f.env.Clients.WaitPoint(ctx, p); err != nil {
			_ = f.env.Clients.Disarm(p)
			return v, fmt.Errorf("%w: p%d did not reach %s: %v", errNotApplied, p, f.env.PausePoint, err)
		}
	}
	// The worker waits at the point until it is told to go on, which Heal
	// does only after SIGCONT: however late the kernel applies SIGSTOP, the
	// worker cannot get past the point while it is meant to be paused.
	if err := f.env.Clients.Signal(p, syscall.SIGSTOP); err != nil {
		// The signal may have been delivered even though the wait for it
		// failed: undo it, and record the pause as of unknown effect.
		_ = f.env.Clients.Signal(p, syscall.SIGCONT)
		f.release(p)
		return v, fmt.Errorf("SIGSTOP p%d: %v", p, err)
	}
	f.mu.Lock()
	f.target, f.paused = p, true
	f.mu.Unlock()
	return v, nil
}

func (f *pauseClient) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.paused {
		return history.Value{}, nil
	}
	v := history.Value{Targets: []string{fmt.Sprintf("p%d", f.target)}}
	if err := f.env.Clients.Signal(f.target, syscall.SIGCONT); err != nil && !slices.Contains(f.env.Clients.Processes(), f.target) {
		// The worker died while paused: nothing is left to resume.
		f.paused = false
		return v, nil
	} else if err != nil {
		return v, fmt.Errorf("SIGCONT p%d: %w", f.target, err)
	}
	f.release(f.target)
	f.paused = false
	return v, nil
}

// release lets a worker held at the pause point go on; for a worker that
// is not at a point (or has died) it is harmless.
func (f *pauseClient) release(p int) {
	if f.env.PausePoint != "" {
		_ = f.env.Clients.Continue(p)
	}
}
