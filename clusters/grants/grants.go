// Package grants tells when a node of a lock service grants a lock, by
// asking the node itself over its client port, as package roles asks it
// for its role. Every provider uses it, so that a fault can be timed to a
// grant (kill-on-grant): the moment at which hurting the node can lose a
// live lock, which a fault drawn at a random time meets only by chance.
package grants

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNone is the error of a wait that saw no grant within its time.
var ErrNone = errors.New("no grant")

// Grant is one lease a node holds: a key with an expiry and its value.
type Grant struct {
	Key   string
	Value string
}

// String renders g for a fault's record, its key only: a lease's value
// is the holder's random secret and says nothing to a reader.
func (g Grant) String() string { return g.Key }

// poll is how often Redis asks the node what it holds: a few round trips
// on loopback, so that the fault follows the grant by milliseconds.
const poll = 2 * time.Millisecond

// leases lists, in one atomic step on the node, every string key that has
// an expiry, with its value: the leases a Redis lock grants (a SET NX PX,
// Redlock's on each node). Counters and other keys without an expiry (a
// fencing counter's INCR) are not leases. A node holds few keys in a run,
// so KEYS is cheap here.
var leases = redis.NewScript(`
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  if redis.call('PTTL', k) > 0 and redis.call('TYPE', k).ok == 'string' then
    table.insert(out, k)
    table.insert(out, redis.call('GET', k))
  end
end
return out`)

// Redis waits, for at most within, until the Redis node at addr holds a
// lease it did not hold when the wait began: a key with an expiry whose
// value is new (every lock of the catalogue writes a fresh random value at
// each acquire, so a key taken again is a new grant too). It returns that
// lease. A wait that ends without one returns an error wrapping ErrNone;
// a node that cannot be asked at the start is an error, while one that
// stops answering during the wait (a partition, a pause) is asked again
// until the wait ends.
func Redis(ctx context.Context, addr string, within time.Duration) (Grant, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	held, err := redisLeases(ctx, c)
	if err != nil {
		return Grant{}, fmt.Errorf("redis %s: list its leases: %w", addr, err)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return Grant{}, fmt.Errorf("redis %s: the wait for a grant ended early: %w", addr, err)
			}
			return Grant{}, fmt.Errorf("redis %s granted no lease within %s: %w", addr, within, ErrNone)
		case <-t.C:
		}
		now, err := redisLeases(ctx, c)
		if err != nil {
			continue // asked again at the next tick, until the wait ends
		}
		if g, ok := newGrant(held, now); ok {
			return g, nil
		}
	}
}

// redisLeases returns the leases the node holds now.
func redisLeases(ctx context.Context, c *redis.Client) ([]Grant, error) {
	v, err := leases.Run(ctx, c, nil).StringSlice()
	if err != nil {
		return nil, err
	}
	out := make([]Grant, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		out = append(out, Grant{Key: v[i], Value: v[i+1]})
	}
	return out, nil
}

// newGrant returns the first lease of now that before did not hold, in
// the node's order.
func newGrant(before, now []Grant) (Grant, bool) {
	for _, g := range now {
		if !slices.Contains(before, g) {
			return g, true
		}
	}
	return Grant{}, false
}
