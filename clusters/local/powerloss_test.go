package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/clockshim"
)

// incrAOF is where Redis 7 appends, in its data directory.
const incrAOF = "appendonlydir/appendonly.aof.1.incr.aof"

// shimEnv builds the clock shim and returns the NodeEnv that preloads it,
// or skips the test without a C compiler.
func shimEnv(t *testing.T) func(string) []string {
	t.Helper()
	lib, err := clockshim.Build(context.Background(), t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	c, err := clockshim.New(lib, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return func(node string) []string {
		env, err := c.Env(node)
		if err != nil {
			t.Error(err)
		}
		return env
	}
}

// waitFor polls cond every 5 ms until it holds, failing t if it does not
// within a minute (a bound for a loaded machine, not a timing the test
// asserts).
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// aofSize is the size of n's incremental AOF now.
func aofSize(t *testing.T, r *Processes) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(r.nodes[0].dataDir(), incrAOF))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestPowerLossLosesWhatWasNotSynced runs redis-server with appendfsync
// everysec under the shim. A key it has synced survives a power cut; of
// the keys written after the last sync, each whose SET lies whole in the
// AOF's durable part is there after the restart, and each other is gone. Then the same keys after a process kill: nothing is lost, though
// nothing more was synced, because the page cache keeps what the node
// wrote. The moments are pinned by what the sync record shows, not by
// sleeps: Redis 7 fsyncs at once the first write of a wall-clock second
// and the others at the next second, so a burst of writes leaves some
// unsynced.
func TestPowerLossLosesWhatWasNotSynced(t *testing.T) {
	r := startRedis(t, Options{Persistence: backend.PersistenceEverysec, NodeEnv: shimEnv(t), TrackSyncs: true})
	ctx := context.Background()
	n := r.Nodes()[0]
	if why := r.PowerCutReason(); why != "" {
		t.Fatalf("PowerCutReason = %q", why)
	}
	unsynced := func() int64 {
		t.Helper()
		u, err := r.Unsynced(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	c := client(t, n)
	if err := c.Set(ctx, "synced", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the key is synced", func() (bool, error) { return unsynced() == 0, nil })

	// A burst of writes, each key with the AOF size after it, until some
	// are not synced; a cut that finds them synced after all (the second
	// turned meanwhile) is tried again on a restarted node.
	var cuts []clusters.FileCut
	keys := map[string]bool{}
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("five power cuts in a row found everything synced")
		}
		if attempt > 0 {
			if err := r.Restart(ctx, n); err != nil {
				t.Fatal(err)
			}
			c = client(t, n)
		}
		for i := 0; i < 200 && (i < 3 || unsynced() == 0); i++ {
			k := fmt.Sprintf("k%d-%d", attempt, i)
			if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			keys[k] = true
		}
		pid := r.Pids()[n.Name]
		var err error
		if cuts, err = r.CutPower(ctx, n); err != nil {
			t.Fatal(err)
		}
		if !procGone(pid) || r.Pids()[n.Name] != 0 {
			t.Fatalf("pid %d still there after CutPower", pid)
		}
		if len(cuts) > 0 {
			break
		}
		t.Logf("attempt %d: the cut found everything synced", attempt)
	}
	if len(cuts) != 1 || cuts[0].Path != incrAOF || cuts[0].Durable >= cuts[0].Size {
		t.Fatalf("cuts = %+v, want one cut of %s", cuts, incrAOF)
	}
	durableSize := cuts[0].Durable
	if got := aofSize(t, r); got != durableSize {
		t.Fatalf("the AOF has %d bytes after the cut, want %d", got, durableSize)
	}
	// What the cut kept: a key whose SET lies whole in the durable part of
	// the AOF must come back, any other must not. (Where a key's bytes lie
	// is read from the file, not from its size after the reply: with
	// everysec, Redis answers before it writes while a slow fsync is in
	// progress, as under stress-ng.)
	durable, err := os.ReadFile(filepath.Join(r.nodes[0].dataDir(), incrAOF))
	if err != nil {
		t.Fatal(err)
	}
	inDurable := func(k string) bool {
		return bytes.Contains(durable, fmt.Appendf(nil, "$%d\r\n%s\r\n$1\r\nv\r\n", len(k), k))
	}
	if err := r.Restart(ctx, n); err != nil {
		t.Fatal(err)
	}
	c = client(t, n)
	var lost, kept []string
	check := func(k string, want bool) {
		t.Helper()
		err := c.Get(ctx, k).Err()
		switch {
		case err != nil && !errors.Is(err, goredis.Nil):
			t.Fatal(err)
		case want && err != nil:
			t.Errorf("key %s, synced, is gone after the power cut", k)
		case !want && err == nil:
			t.Errorf("key %s, not whole in the durable %d bytes, survived the power cut", k, durableSize)
		}
		if want {
			kept = append(kept, k)
		} else {
			lost = append(lost, k)
		}
	}
	check("synced", true)
	for k := range keys {
		check(k, inDurable(k))
	}
	if len(lost) == 0 {
		t.Fatal("no key was lost")
	}
	t.Logf("power cut: %d bytes of %s lost, %d keys lost, %d kept", cuts[0].Size-cuts[0].Durable, incrAOF, len(lost), len(kept))

	// A process kill with unsynced writes loses none of them. A kill that
	// finds them synced after all is tried again.
	var written []string
	var u int64
	for attempt := 0; u == 0; attempt++ {
		if attempt == 5 {
			t.Fatal("five kills in a row found everything synced")
		}
		if attempt > 0 {
			if err := r.Restart(ctx, n); err != nil {
				t.Fatal(err)
			}
			c = client(t, n)
		}
		for i := 0; i < 200 && (i < 3 || unsynced() == 0); i++ {
			k := fmt.Sprintf("killed%d-%d", attempt, i)
			if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			written = append(written, k)
		}
		if err := r.Kill(ctx, n); err != nil {
			t.Fatal(err)
		}
		u = unsynced()
	}
	if err := r.Restart(ctx, n); err != nil {
		t.Fatal(err)
	}
	c = client(t, n)
	for _, k := range written {
		if err := c.Get(ctx, k).Err(); err != nil {
			t.Errorf("key %s lost across a process kill with everysec: %v", k, err)
		}
	}
	t.Logf("process kill: %d keys kept, %d bytes of them not synced at the kill", len(written), u)
}

// A cluster whose nodes keep no sync record says why it cannot cut power
// and refuses to, leaving the node running: a cut without the record would
// take synced data too.
func TestPowerCutRefusedWithoutSyncRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"not asked", Options{}, "do not record what they sync"},
		// Asked, but the shim that writes the record is not preloaded.
		{"no shim", Options{TrackSyncs: true}, "no sync record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startRedis(t, tc.opts)
			n := r.Nodes()[0]
			if why := r.PowerCutReason(); (why == "") != tc.opts.TrackSyncs {
				t.Errorf("PowerCutReason = %q", why)
			}
			pid := r.Pids()[n.Name]
			cuts, err := r.CutPower(context.Background(), n)
			if err == nil || !strings.Contains(err.Error(), tc.want) || len(cuts) != 0 {
				t.Errorf("CutPower = %v, %v; want an error with %q", cuts, err, tc.want)
			}
			if r.Pids()[n.Name] != pid || ping(t, n) != nil {
				t.Error("a refused CutPower stopped the node")
			}
		})
	}
}

// TestCutPowerOnWriteLosesAnAcknowledgedGrant runs redis-server with
// appendfsync everysec under the shim, waits in CutPowerOnWrite while
// grants come (a write of another key, then SET NX PX of a lock key, every
// 100 ms, so that most SETs wait for the next second's fsync), and checks
// that the cut came after a grant the node had acknowledged and lost it:
// after the restart, a lock key whose SET was answered OK is gone.
func TestCutPowerOnWriteLosesAnAcknowledgedGrant(t *testing.T) {
	r := startRedis(t, Options{Persistence: backend.PersistenceEverysec, NodeEnv: shimEnv(t), TrackSyncs: true})
	ctx := context.Background()
	n := r.Nodes()[0]
	type result struct {
		cuts []clusters.FileCut
		err  error
	}
	done := make(chan result, 1)
	go func() {
		cuts, err := r.CutPowerOnWrite(ctx, n, time.Minute)
		done <- result{cuts, err}
	}()
	c := client(t, n)
	var granted []string
	var res result
wait:
	for i := 0; ; i++ {
		select {
		case res = <-done:
			break wait
		case <-time.After(100 * time.Millisecond):
		}
		if err := c.Set(ctx, fmt.Sprintf("other-%d", i), "v", 0).Err(); err != nil {
			continue // the cut came
		}
		k := fmt.Sprintf("lock-%d", i)
		if ok, err := c.SetNX(ctx, k, "holder", 10*time.Minute).Result(); err == nil && ok {
			granted = append(granted, k)
		}
	}
	if res.err != nil {
		t.Fatalf("CutPowerOnWrite: %v", res.err)
	}
	if len(res.cuts) == 0 || res.cuts[0].Durable >= res.cuts[0].Size {
		t.Fatalf("cuts %+v: the cut lost nothing", res.cuts)
	}
	if err := r.Restart(ctx, n); err != nil {
		t.Fatal(err)
	}
	c = client(t, n)
	var lost []string
	for _, k := range granted {
		err := c.Get(ctx, k).Err()
		switch {
		case errors.Is(err, goredis.Nil):
			lost = append(lost, k)
		case err != nil:
			t.Fatal(err)
		}
	}
	if len(lost) == 0 {
		t.Fatalf("none of the %d acknowledged grants was lost by the cut %+v", len(granted), res.cuts)
	}
	t.Logf("the cut %+v lost the acknowledged grants %v of %d", res.cuts, lost, len(granted))
}
