package seeded

import (
	"context"
	"time"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerEtcd(impls.Impl{
		Name: "seeded-etcd-txn-unchecked", Fenced: true, TokenSource: "the revision of the acquire's transaction",
		Seeded: "the transaction's Succeeded is never read: an acquire whose compare failed (the key was held) is taken as granted",
		New:    newEtcdImpl(func(c *leaseTxn) impls.Client { return &txnUnchecked{c} }),
	})
}

// txnUnchecked is etcd-lease-txn that forgets to look whether its
// transaction's compare held: every transaction that returned is a grant,
// the Else branch's read of the holder's key included.
type txnUnchecked struct{ *leaseTxn }

// Acquire runs one attempt and takes its answer as a grant.
func (c *txnUnchecked) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	a, err := c.try(ctx, etcdPrefix+lock, ttl)
	if err != nil {
		return impls.Lease{}, err
	}
	// BUG: a.resp.Succeeded is not read.
	return c.grant(lock, a, uint64(a.resp.Header.Revision), a.resp.Header.Revision), nil
}
