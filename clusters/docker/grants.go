package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/clusters"
)

var _ clusters.GrantWatcher = (*Cluster)(nil)

// GrantWatchReason is "" for a backend whose nodes the host can ask what
// they hold (redis: grants.Redis), and says so for the others.
func (c *Cluster) GrantWatchReason() string {
	if c.b.grant == nil {
		return fmt.Sprintf("only the redis backend's nodes are asked what they hold, not %s's", c.opts.Backend)
	}
	return ""
}

// WaitForGrant waits, for at most within, until the node holds a lock it
// did not hold when the wait began, asking it from the host at its
// container's address, and returns the lock's name. A wait without one
// wraps clusters.ErrUntouched.
func (c *Cluster) WaitForGrant(ctx context.Context, target clusters.Node, within time.Duration) (string, error) {
	var addr string
	err := c.with(target, func(n *node) error {
		addr = n.addr()
		return nil
	})
	if err == nil && c.b.grant == nil {
		err = fmt.Errorf("docker: %s", c.GrantWatchReason())
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", clusters.ErrUntouched, err)
	}
	g, err := c.b.grant(ctx, addr, within)
	if err != nil {
		return "", fmt.Errorf("%w: docker %s: wait for a grant of %s: %w", clusters.ErrUntouched, c.opts.Backend, target.Name, err)
	}
	return g.String(), nil
}
