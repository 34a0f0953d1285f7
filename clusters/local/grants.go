package local

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/grants"
)

var _ clusters.GrantWatcher = (*Redis)(nil)

// GrantWatchReason is "": a Redis node is asked what it holds over its
// client port (grants.Redis).
func (r *Redis) GrantWatchReason() string { return "" }

// WaitForGrant waits, for at most within, until the node holds a lease it
// did not hold when the wait began (grants.Redis) and returns its key. A
// wait without one wraps clusters.ErrUntouched.
func (r *Redis) WaitForGrant(ctx context.Context, node clusters.Node, within time.Duration) (string, error) {
	key, err := r.ask(ctx, node, func(ctx context.Context, addr string) (string, error) {
		g, err := grants.Redis(ctx, addr, within)
		return g.String(), err
	})
	if err != nil {
		return "", fmt.Errorf("%w: %s: wait for a grant of %s: %w", clusters.ErrUntouched, r.kind, node.Name, err)
	}
	return key, nil
}
