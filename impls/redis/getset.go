package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/impls"
)

// SetNXGetSet is redis-setnx-getset, the recipe the SETNX documentation gave
// before Redis 2.6.12 added SET NX PX. The value is "<expiry>:<id>", where
// expiry is the client's wall clock (Config.Wall) plus the ttl plus 1ms, in
// Unix milliseconds, and id is unique. The key has no TTL: expiry exists
// only in the clients' reading of the value.
//
// Acquire: SETNX; if the key exists, GET it, and if the expiry it holds has
// passed by this client's clock, GETSET it to our value; the lock is ours if
// GETSET returned exactly the value we read. Release: GET, and DEL if the key
// still holds our value and our expiry has not passed by our clock.
//
// Failure modes: every client's wall clock is trusted, so a client whose
// clock runs ahead takes over a live lock; a contender that loses the GETSET
// race has already overwritten the winner's value (the winner's release then
// fails and the lock stays until the loser's expiry); release is a GET
// followed by a DEL, so a takeover in between is deleted; and a value that
// cannot be parsed is a lock that nobody can take. There is no fencing token.
type SetNXGetSet struct {
	*conn
}

var _ impls.Client = (*SetNXGetSet)(nil)

// parseExpiry returns the expiry, in Unix milliseconds, written before the
// first ':' of a lock value.
func parseExpiry(v string) (int64, bool) {
	s, _, found := strings.Cut(v, ":")
	if !found {
		return 0, false
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return ms, true
}

// Acquire tries SETNX, then the GET/GETSET takeover of an expired lock, once.
// It returns impls.ErrNotAcquired if the lock is live by this client's clock,
// its value cannot be parsed, it vanished between SETNX and GET, or another
// contender's GETSET came first (in which case this client's GETSET has
// nevertheless replaced the key's value with its own).
func (c *SetNXGetSet) Acquire(ctx context.Context, lock string, ttl time.Duration) (impls.Lease, error) {
	if err := checkTTL(ttl); err != nil {
		return impls.Lease{}, err
	}
	start := c.cfg.Now()
	expiry := c.cfg.Wall().Add(ttl + time.Millisecond).UnixMilli()
	value := fmt.Sprintf("%d:%s", expiry, c.values.Next())
	ok, err := c.rdb.SetNX(ctx, lock, value, 0).Result() // 0: plain SETNX, no TTL
	if err != nil {
		return impls.Lease{}, err
	}
	if ok {
		return c.lease(lock, value, start, ttl), nil
	}
	read, err := c.rdb.Get(ctx, lock).Result()
	if errors.Is(err, goredis.Nil) {
		return impls.Lease{}, impls.ErrNotAcquired // released meanwhile; the recipe retries later
	}
	if err != nil {
		return impls.Lease{}, err
	}
	held, ok := parseExpiry(read)
	if !ok || held >= c.cfg.Wall().UnixMilli() {
		return impls.Lease{}, impls.ErrNotAcquired
	}
	old, err := c.rdb.GetSet(ctx, lock, value).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return impls.Lease{}, err
	}
	if old != read {
		return impls.Lease{}, impls.ErrNotAcquired
	}
	return c.lease(lock, value, start, ttl), nil
}

// Release deletes the key if it still holds the lease's value and the
// lease's expiry has not passed by this client's clock; it returns
// impls.ErrNotHeld otherwise. The check and the delete are two commands, so
// the delete can remove a lock another client took over in between; it is
// done with GETDEL (the same effect as the recipe's DEL) so that
// Released.Removed says whose lock it really removed.
func (c *SetNXGetSet) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	cur, err := c.rdb.Get(ctx, l.Lock).Result()
	if errors.Is(err, goredis.Nil) {
		return impls.Released{}, impls.ErrNotHeld
	}
	if err != nil {
		return impls.Released{}, err
	}
	expiry, ok := parseExpiry(l.Value)
	if cur != l.Value || !ok || expiry < c.cfg.Wall().UnixMilli() {
		return impls.Released{}, impls.ErrNotHeld
	}
	return c.getDel(ctx, l.Lock)
}
