// Package genhist generates large lock histories from a seed, for the
// benchmarks of the checkers and of `locktest check`.
package genhist

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locktest/locktest/history"
)

// Valid returns a valid history of at least n ops by procs processes
// over four locks, from a seeded generator: critical sections one after
// another (acquire, read, write, release) with increasing tokens per lock and
// a counter per lock, failed and unknown acquire attempts of other processes
// interleaved with them, nemesis ops now and then, and an arrival order that
// differs slightly from time order.
func Valid(seed uint64, n, procs int) history.History {
	return Overlapping(seed, n, procs, 0)
}

// Overlapping is Valid with, when every > 0, a second holder inside every
// every-th critical section: another process acquires the same lock with
// the same fencing token after the holder, writes the counter it read
// before the holder's write, and releases before the holder does — an
// overlap of holds, a duplicate token and a stale write each time.
func Overlapping(seed uint64, n, procs, every int) history.History {
	rng := rand.New(rand.NewPCG(seed, 0x10c4))
	locks := []string{"a", "b", "c", "d"}
	tokens := make([]uint64, len(locks))
	counters := make([]int64, len(locks))
	h := make(history.History, 0, n+64)
	var sec history.History
	t := int64(1_000_000)
	step := func() int64 { t += 1 + rng.Int64N(2_000_000); return t }
	for k := 0; len(h) < n; k++ {
		sec = sec[:0]
		add := func(typ history.Type, p int, f string, at int64, v history.Value, e string) {
			sec = append(sec, history.Op{Type: typ, Process: p, F: f, Time: at, Value: v, Error: e})
		}
		l := rng.IntN(len(locks))
		lock := locks[l]
		p := rng.IntN(procs)
		tokens[l]++
		tk := history.Tok(tokens[l])
		value := fmt.Sprintf("p%d-%d", p, k)
		start := t
		add(history.Invoke, p, history.Acquire, step(), history.Value{Lock: lock}, "")
		acquired := step()
		add(history.OK, p, history.Acquire, acquired, history.Value{Lock: lock, Token: tk, LockValue: value, ValidUntil: acquired + 10_000_000_000}, "")
		add(history.Invoke, p, history.Read, step(), history.Value{Lock: lock}, "")
		at := step()
		add(history.OK, p, history.Read, at, history.Value{Lock: lock, N: history.Num(counters[l]), StoreTime: at}, "")
		counters[l]++
		wv := history.Value{Lock: lock, N: history.Num(counters[l]), Token: tk, LockValue: value}
		add(history.Invoke, p, history.Write, step(), wv, "")
		wv.StoreTime = step()
		add(history.OK, p, history.Write, wv.StoreTime, wv, "")
		add(history.Invoke, p, history.Release, step(), history.Value{Lock: lock, Token: tk, LockValue: value}, "")
		add(history.OK, p, history.Release, step(), history.Value{Lock: lock, Removed: value}, "")
		end := t
		rogue := -1
		if every > 0 && k%every == 0 && procs > 1 {
			rogue = (p + 1) % procs
			rv := fmt.Sprintf("p%d-%d-rogue", rogue, k)
			// Inside the holder's section: [acquired, end].
			at := func(f float64) int64 { return acquired + 1 + int64(f*float64(end-acquired-2)) }
			add(history.Invoke, rogue, history.Acquire, at(0), history.Value{Lock: lock}, "")
			add(history.OK, rogue, history.Acquire, at(0.05), history.Value{Lock: lock, Token: tk, LockValue: rv, ValidUntil: at(0.05) + 10_000_000_000}, "")
			stale := history.Value{Lock: lock, N: history.Num(counters[l]), Token: tk, LockValue: rv}
			add(history.Invoke, rogue, history.Write, at(0.9), stale, "")
			stale.StoreTime = at(0.92)
			add(history.OK, rogue, history.Write, stale.StoreTime, stale, "")
			add(history.Invoke, rogue, history.Release, at(0.95), history.Value{Lock: lock, Token: tk, LockValue: rv}, "")
			add(history.OK, rogue, history.Release, at(0.97), history.Value{Lock: lock, Removed: rv}, "")
		}
		// Other processes try the same lock during the section and fail, or
		// give up not knowing.
		for q := range procs {
			if q == p || q == rogue || rng.IntN(4) != 0 {
				continue
			}
			a := start + rng.Int64N(end-start)
			add(history.Invoke, q, history.Acquire, a, history.Value{Lock: lock}, "")
			d := a + rng.Int64N(end-a) + 1
			if rng.IntN(10) == 0 {
				add(history.Info, q, history.Acquire, d, history.Value{Lock: lock}, "")
			} else {
				add(history.Fail, q, history.Acquire, d, history.Value{Lock: lock}, "not acquired")
			}
		}
		if k%50 == 0 {
			add(history.Invoke, history.NemesisProcess, "pause-client", start+1, history.Value{Targets: []string{"p0"}}, "")
			add(history.Info, history.NemesisProcess, "pause-client", end, history.Value{Targets: []string{"p0"}}, "")
		}
		slices.SortStableFunc(sec, func(a, b history.Op) int {
			if a.Time < b.Time {
				return -1
			}
			if a.Time > b.Time {
				return 1
			}
			return 0
		})
		h = append(h, sec...)
		step()
	}
	// Arrival order: now and then two neighbours of different processes
	// arrive swapped.
	for i := 0; i+1 < len(h); i++ {
		if h[i].Process != h[i+1].Process && rng.IntN(100) == 0 {
			h[i], h[i+1] = h[i+1], h[i]
			i++
		}
	}
	for i := range h {
		h[i].Index = i
	}
	return h
}
