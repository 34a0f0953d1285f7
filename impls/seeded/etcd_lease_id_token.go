package seeded

import (
	"context"
	"time"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerEtcd(impls.Impl{
		Name: "seeded-etcd-lease-id-token", Fenced: true, TokenSource: "the ID of the lock key's lease",
		Seeded: "the fencing token is the lease's ID, which each etcd member makes from its own ID and clock, not the key's create revision",
		New:    newEtcdImpl(func(c *leaseTxn) impls.Client { return &leaseIDToken{c} }),
	})
}

// leaseIDToken is etcd-lease-txn whose token is the ID of the lease the
// key is attached to. A lease ID is unique, and it looks like a growing
// number, but the member that took the grant request made it: its own
// member ID in the top bits, then its clock and a counter. Grants
// through different members do not increase from holder to holder.
type leaseIDToken struct{ *leaseTxn }

// Acquire is etcd-lease-txn's, with the lease's ID as the token.
func (c *leaseIDToken) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	key := etcdPrefix + lock
	for {
		a, err := c.try(ctx, key, ttl)
		if err != nil {
			return impls.Lease{}, err
		}
		if a.resp.Succeeded {
			return c.grant(lock, a, uint64(a.lease.ID), a.resp.Header.Revision), nil // BUG: the lease ID is no counter.
		}
		if err := c.wait(ctx, key, a); err != nil {
			return impls.Lease{}, err
		}
	}
}
