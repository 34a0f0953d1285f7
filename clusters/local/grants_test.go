package local

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
)

// TestWaitForGrant asks a real redis-server. A lease the node held when
// the wait began is no grant, nor is a key without an expiry (a fencing
// counter); a SET NX PX during the wait is, and so is the same key taken
// again with a new value. A wait in which nothing is granted ends at its
// time with clusters.ErrUntouched.
func TestWaitForGrant(t *testing.T) {
	r := startRedis(t, RedisOptions{})
	n := r.Nodes()[0]
	c := goredis.NewClient(&goredis.Options{Addr: n.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "held", "a", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "fence", "7", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Nothing new: the wait ends at its time, touching nothing.
	if key, err := r.WaitForGrant(ctx, n, 100*time.Millisecond); !errors.Is(err, clusters.ErrUntouched) {
		t.Errorf("wait with nothing granted = %q, %v; want an error wrapping ErrUntouched", key, err)
	}

	// Each grant is made again and again, with a new value each time,
	// until the wait returns: a wait that began late on a loaded machine
	// still sees one made after its first look.
	for _, tc := range []struct {
		name  string
		grant func(i int) error
		want  string
	}{
		{"a counter is no lease, a new lease is", func(i int) error {
			if err := c.Incr(ctx, "fence").Err(); err != nil || i < 5 {
				return err
			}
			return c.Set(ctx, "lock-0", i, 5*time.Second).Err()
		}, "lock-0"},
		{"the same key taken again with a new value", func(i int) error {
			return c.Set(ctx, "held", i, time.Minute).Err()
		}, "held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			errc := make(chan error, 1)
			go func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						errc <- nil
						return
					case <-time.After(20 * time.Millisecond):
					}
					if err := tc.grant(i); err != nil {
						errc <- err
						return
					}
				}
			}()
			key, err := r.WaitForGrant(ctx, n, time.Minute)
			close(stop)
			if gerr := <-errc; gerr != nil {
				t.Fatal(gerr)
			}
			if err != nil || key != tc.want {
				t.Errorf("WaitForGrant = %q, %v; want %q", key, err, tc.want)
			}
		})
	}
}
