package bareloop

import (
	"context"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
	"github.com/locktest/locktest/workloads"
)

// Two loops on one lock against a real Redis: every critical section
// they count incremented the counter under the lock, so without faults
// the counter is their sum. (Either loop may starve behind the other, so
// only their sum must be positive.)
func TestTwoLoopsCountEveryCriticalSection(t *testing.T) {
	gate.Need(t, "redis-server")
	r, err := local.NewProcesses("redis", local.Options{Dir: t.TempDir()})
	addr := testcluster.Started(t, r, err).Nodes()[0].Addr
	ctx := context.Background()
	var wg sync.WaitGroup
	res := make([]Result, 2)
	errs := make([]error, 2)
	for i := range res {
		wg.Go(func() {
			res[i], errs[i] = Run(ctx, Config{Addr: addr, Locks: []string{"l"}, TTL: 10 * time.Second, Duration: time.Second,
				Backoff: workloads.Backoff{Policy: workloads.BackoffUniform, Retry: workloads.Duration(time.Millisecond)}, Seed: uint64(i + 1)})
		})
	}
	wg.Wait()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	n, err := rdb.Get(ctx, "l:counter").Int()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i := range res {
		if errs[i] != nil || res[i].Acquires < res[i].Sections {
			t.Errorf("loop %d: %+v, %v", i, res[i], errs[i])
		}
		total += res[i].Sections
	}
	if total == 0 || n != total {
		t.Errorf("counter %d, but the loops counted %d critical sections", n, total)
	}
}
