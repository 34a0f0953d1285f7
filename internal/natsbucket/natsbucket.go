// Package natsbucket is the one JetStream key-value bucket that locktest's
// NATS locks keep their keys in, as both sides of a run see it: the nats
// backend (clusters/backend) makes it while its cluster forms and reads its
// stream's leader, and the impls (impls/natskv) open it.
package natsbucket

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Name is the bucket's name, and Stream the name of the JetStream stream
// that holds it.
const (
	Name   = "locktest"
	Stream = "KV_" + Name
)

// MarkerTTL is how long the bucket keeps the marker the server writes when
// a key's TTL removes it. Setting it is what lets a key carry a TTL of its
// own (Nats-TTL, NATS 2.11 and later).
const MarkerTTL = time.Second

// Config is the bucket's configuration on a cluster of replicas servers:
// every server holds a replica (JetStream allows at most 5), only the
// latest revision of a key is kept, on disk.
func Config(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket: Name, Description: "locktest's locks", History: 1,
		Storage: jetstream.FileStorage, Replicas: replicas, LimitMarkerTTL: MarkerTTL,
	}
}

// Open returns the bucket through js, and makes it with Config(replicas)
// first where the cluster has none yet.
func Open(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Name)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("bucket %s: %w", Name, err)
	}
	kv, err = js.CreateKeyValue(ctx, Config(replicas))
	if err != nil {
		return nil, fmt.Errorf("create bucket %s with %d replicas: %w", Name, replicas, err)
	}
	return kv, nil
}

// TTL is the TTL a key of the bucket gets for a lease of ttl: JetStream
// counts a message's TTL in whole seconds and refuses less than one, so
// ttl is rounded up to the next second, at least one.
func TTL(ttl time.Duration) time.Duration {
	s := (ttl + time.Second - 1) / time.Second
	return max(s, 1) * time.Second
}
