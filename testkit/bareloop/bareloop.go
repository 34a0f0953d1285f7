// Package bareloop is the reference the driver's throughput is measured
// against: the critical section a locktest worker makes with
// redis-set-nx-px, written as a bare go-redis loop with no history, no
// worker protocol and no resource store. Each section is the same four
// round trips — the acquire script (SET NX PX and the INCR of the fencing
// token), a read and a write of the protected counter, and the
// compare-and-delete release — so the ratio of locktest's critical
// sections per second to the loop's is what recording costs.
package bareloop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/workloads"
)

var acquire = goredis.NewScript(`if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return redis.call("incr", KEYS[2])
end
return false`)

var release = goredis.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`)

// Config is one loop: the Redis it talks to, the locks it contends for
// (each attempt picks one at random, as a worker's does), the lease time,
// how long it runs, and the retry policy after a failed acquire (the same
// Backoff the workers use).
type Config struct {
	Addr     string            `json:"addr"`
	Locks    []string          `json:"locks"`
	TTL      time.Duration     `json:"ttl"`
	Duration time.Duration     `json:"duration"`
	Backoff  workloads.Backoff `json:"backoff"`
	Seed     uint64            `json:"seed"`
}

// Result is what one loop did.
type Result struct {
	Sections int           `json:"sections"`
	Acquires int           `json:"acquires"` // acquire attempts, failed ones included
	Elapsed  time.Duration `json:"elapsed"`
}

// Run runs the loop for cfg.Duration and returns how many critical
// sections it made.
func Run(ctx context.Context, cfg Config) (Result, error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: cfg.Addr, PoolSize: 1, MaxRetries: -1})
	defer rdb.Close()
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	if len(cfg.Locks) == 0 {
		return Result{}, errors.New("bareloop: no locks")
	}
	var res Result
	start := time.Now()
	end := start.Add(cfg.Duration)
	failed := 0
	for i := 0; time.Now().Before(end); i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		// As a worker does: each attempt picks a lock at random.
		lock := cfg.Locks[rng.IntN(len(cfg.Locks))]
		value := fmt.Sprintf("bare-%d-%d", cfg.Seed, i)
		res.Acquires++
		_, err := acquire.Run(ctx, rdb, []string{lock, lock + ":fence"}, value, cfg.TTL.Milliseconds()).Int64()
		if errors.Is(err, goredis.Nil) {
			failed++
			time.Sleep(cfg.Backoff.Wait(failed, rng.Float64()))
			continue
		}
		if err != nil {
			return res, err
		}
		failed = 0
		counter := lock + ":counter"
		n, err := rdb.Get(ctx, counter).Int64()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return res, err
		}
		if err := rdb.Set(ctx, counter, n+1, 0).Err(); err != nil {
			return res, err
		}
		if err := release.Run(ctx, rdb, []string{lock}, value).Err(); err != nil {
			return res, err
		}
		res.Sections++
	}
	res.Elapsed = time.Since(start)
	return res, nil
}
