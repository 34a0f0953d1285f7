package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/history"
)

// step is a fault whose injection is all it does (noop, clock-reset): it
// draws nothing from the schedule's source, stays dur, and its heal has
// nothing to undo.
type step struct {
	kind
	dur    time.Duration
	inject func(ctx context.Context) (history.Value, error)
}

func (f *step) Duration() time.Duration { return f.dur }

func (f *step) Inject(ctx context.Context, _ *rand.Rand) (history.Value, error) {
	return f.inject(ctx)
}

// Heal does nothing and records nothing.
func (f *step) Heal(context.Context) (history.Value, error) { return history.Value{}, nil }
