package ssh

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/grants"
)

var _ clusters.GrantWatcher = (*Cluster)(nil)

// GrantWatchReason is "" for the redis backend, whose nodes the harness
// asks what they hold over their client ports (grants.Redis); the other
// backends' nodes are not asked.
func (cl *Cluster) GrantWatchReason() string {
	if cl.opts.Backend != "redis" {
		return fmt.Sprintf("only the redis backend's nodes are asked what they hold, not %s's", cl.opts.Backend)
	}
	return ""
}

// WaitForGrant waits, for at most within, until the redis node holds a
// lease it did not hold when the wait began (grants.Redis), asking it
// from here over its client port, and returns its key. A wait without one
// wraps clusters.ErrUntouched.
func (cl *Cluster) WaitForGrant(ctx context.Context, cn clusters.Node, within time.Duration) (string, error) {
	n, err := cl.find(cn.Name)
	if err == nil {
		if why := cl.GrantWatchReason(); why != "" {
			err = fmt.Errorf("ssh: %s", why)
		}
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", clusters.ErrUntouched, err)
	}
	g, err := grants.Redis(ctx, n.addr(), within)
	if err != nil {
		return "", fmt.Errorf("%w: ssh redis: wait for a grant of %s: %w", clusters.ErrUntouched, n.name, err)
	}
	return g.String(), nil
}
