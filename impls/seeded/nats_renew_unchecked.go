package seeded

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerNats(impls.Impl{
		Name: "seeded-nats-renew-unchecked", Fenced: true, TokenSource: "the JetStream stream sequence of the key's create (its KV revision)",
		Seeded: "the renewal has no owner check: the keep-alive rewrites the key whoever holds it now, not only on its own last revision",
		New: func(ctx context.Context, cfg impls.Config) (impls.Client, error) {
			return newKVExtend(ctx, cfg, uncheckedRenewal)
		},
	})
}

// uncheckedRenewal rewrites the key with a fresh TTL whatever revision it
// is at: a holder whose key expired and was created again by the next
// holder takes it back and goes on believing it holds the lock.
func uncheckedRenewal(_ uint64, ttl time.Duration) []jetstream.PublishOpt {
	return []jetstream.PublishOpt{jetstream.WithMsgTTL(ttl)} // BUG: no WithExpectLastSequencePerSubject.
}
