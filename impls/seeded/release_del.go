package seeded

import (
	"context"

	"github.com/locktest/locktest/impls"
)

func init() {
	registerRedis(impls.Impl{
		Name: "seeded-release-del", Fenced: true, TokenSource: "Redis INCR counter, in the acquire's Lua script",
		Seeded: "the release has no owner check: a plain DEL of the key, whoever holds it",
		New:    newRedisImpl(func(c *setNXPX) impls.Client { return &releaseDel{c} }),
	})
}

// releaseDel is redis-set-nx-px released by DEL instead of
// compare-and-delete: a holder whose lease expired deletes the next
// holder's lock. DEL says only how many keys it removed, not whose, so
// Released.Removed is left empty (unknown), as a user's client knows no
// more.
type releaseDel struct{ *setNXPX }

// Release deletes the key; impls.ErrNotHeld when there was none.
func (c *releaseDel) Release(ctx context.Context, l impls.Lease) (impls.Released, error) {
	n, err := c.rdb.Del(ctx, l.Lock).Result() // BUG: no check that the key holds l.Value.
	if err != nil {
		return impls.Released{}, err
	}
	if n == 0 {
		return impls.Released{}, impls.ErrNotHeld
	}
	return impls.Released{}, nil
}
