package nemesis

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"

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

// Pause is how long pause-client keeps a worker paused.
var Pause = NewSetting("pause", Duration, 0, "how long a worker stays frozen (0: 2×ttl)", nonNegativeDuration)

// PausePoint is where pause-client pauses a worker, and kill-client with
// kill-holder kills it: a pause point of the worker's loop
// (workloads.PausePoints); "" pauses at a random moment, and kills at
// after-acquire. Its flag says "random" for "".
var PausePoint = NewSetting("pause-point", Kind[string]{"string", func(s string) (string, error) {
	if s == "random" {
		return "", nil
	}
	return s, nil
}, func(s string) string { return cmp.Or(s, "random") }}, "after-acquire",
	"where a worker is stopped (by kill-client only with --kill-holder): after-acquire, before-write, an impl's own point (locktest list), or random",
	Bound[string]{})

// pauseClient freezes one worker process with SIGSTOP, as a stop-the-world
// GC pause would, and thaws it with SIGCONT. At a pause point it stops the
// worker exactly there: the worker reports the point and blocks, and is
// stopped before it is told to go on.
type pauseClient struct {
	env Env

	mu     sync.Mutex
	target int
	paused bool
}

func newPauseClient(env Env) (Fault, error) {
	if err := positive("client pause duration", Pause.Of(env)); err != nil {
		return nil, err
	}
	f := &pauseClient{env: env}
	return env.onProcess(Pause.Of(env), PausePoint.Of(env), f.stop, f.resume), nil
}

// stop freezes worker p, which waits at the pause point if there is one
// (onProcess found it there).
func (f *pauseClient) stop(_ context.Context, p int, v *history.Value, _ *rand.Rand) error {
	v.Duration = int64(Pause.Of(f.env))
	// The worker waits at the point until it is told to go on, which the
	// heal does only after SIGCONT: however late the kernel applies
	// SIGSTOP, the worker cannot get past the point while it is meant to be
	// paused.
	if err := f.env.Clients.Signal(p, syscall.SIGSTOP); err != nil {
		// The signal may have been delivered even though the wait for it
		// failed: undo it, and record the pause as of unknown effect.
		_ = f.env.Clients.Signal(p, syscall.SIGCONT)
		f.release(p)
		return fmt.Errorf("SIGSTOP p%d: %v", p, err)
	}
	f.mu.Lock()
	f.target, f.paused = p, true
	f.mu.Unlock()
	return nil
}

// resume thaws the worker the last stop froze, if it is still frozen, and
// lets it go on from its pause point.
func (f *pauseClient) resume(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.paused {
		return nil, nil
	}
	target := []string{procName(f.target)}
	if err := f.env.Clients.Signal(f.target, syscall.SIGCONT); err != nil && !slices.Contains(f.env.Clients.Processes(), f.target) {
		// The worker died while paused: nothing is left to resume.
		f.paused = false
		return target, nil
	} else if err != nil {
		return target, fmt.Errorf("SIGCONT p%d: %w", f.target, err)
	}
	f.release(f.target)
	f.paused = false
	return target, nil
}

// release lets a worker held at the pause point go on; for a worker that
// is not at a point (or has died) it is harmless.
func (f *pauseClient) release(p int) {
	if PausePoint.Of(f.env) != "" {
		_ = f.env.Clients.Continue(p)
	}
}
