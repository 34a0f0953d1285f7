package checker

import (
	"testing"

	"github.com/locktest/locktest/history"
)

func TestMutualExclusion(t *testing.T) {
	tests := []struct {
		name      string
		build     func(b *builder) []want
		verdict   Verdict
		stats     map[string]float64
		explained string // the first anomaly's explanation, when set
	}{
		{
			name: "clean sequential holds",
			build: func(b *builder) []want {
				b.h = cleanHistory()
				return nil
			},
			verdict: Valid,
			stats:   map[string]float64{"holds": 6, "acquire_ok": 6, "acquire_fail": 5, "acquire_info": 1, "overlaps": 0},
		},
		{
			name: "overlapping holds",
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 1090, 1100, 6, 1300)
				c := b.acquire(2, "x", 1150, 1204, 7, 2204)
				r := b.release(0, "x", 1250, 1260, 6, lv(0, 6))
				b.release(2, "x", 1400, 1410, 7, lv(2, 7))
				return []want{{"overlapping-holds", ops(a.done, c.done, r.inv)}}
			},
			verdict:   Invalid,
			stats:     map[string]float64{"holds": 2, "overlaps": 1},
			explained: `process 2 acquired lock "x" at 1.204s (token 7) while process 0 still held it (acquired at 1.100s with token 6, released only at 1.250s)`,
		},
		{
			name: "overlap with a hold that ends by valid_until",
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 1090, 1100, 6, 1300)
				c := b.acquire(2, "x", 1150, 1204, 7, 2204)
				return []want{{"overlapping-holds", ops(a.done, c.done)}}
			},
			verdict:   Invalid,
			explained: `process 2 acquired lock "x" at 1.204s (token 7) while process 0 still held it (acquired at 1.100s with token 6, believed valid until 1.300s)`,
		},
		{
			name: "overlap with a hold that never ends",
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 90, 100, 0, 0)
				c := b.acquire(1, "x", 150, 200, 0, 0)
				b.invoke(history.NemesisProcess, "partition", 500, history.Value{})
				return []want{{"overlapping-holds", ops(a.done, c.done)}}
			},
			verdict:   Invalid,
			explained: `process 1 acquired lock "x" at 0.200s while process 0 still held it (acquired at 0.100s, never released before the history ended at 0.500s)`,
		},
		{
			name: "each new hold is reported once, against the latest-ending live hold",
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 90, 100, 1, 1000)
				c := b.acquire(1, "x", 150, 200, 2, 2000)
				d := b.acquire(2, "x", 250, 300, 3, 500)
				e := b.acquire(0, "x", 1500, 1600, 4, 3000) // p0's earlier hold ended at 1.000s; p1's runs to 2.000s
				b.invoke(history.NemesisProcess, "partition", 5000, history.Value{})
				return []want{
					{"overlapping-holds", ops(a.done, c.done)},
					{"overlapping-holds", ops(c.done, d.done)},
					{"overlapping-holds", ops(c.done, e.done)},
				}
			},
			verdict: Invalid,
			stats:   map[string]float64{"overlaps": 3},
		},
		{
			name: "holds that merely touch do not overlap",
			build: func(b *builder) []want {
				b.acquire(0, "x", 90, 100, 1, 1100)
				b.release(0, "x", 200, 210, 1, lv(0, 1))
				b.acquire(1, "x", 150, 200, 2, 1200) // granted at the very ns p0 invoked release
				b.acquire(2, "x", 1150, 1200, 3, 0)  // granted at the ns p1's lease ends
				return nil
			},
			verdict: Valid,
			stats:   map[string]float64{"holds": 3},
		},
		{
			name: "a hold ended by valid_until needs no release",
			build: func(b *builder) []want {
				b.acquire(0, "x", 90, 100, 1, 300)
				b.acquire(1, "x", 250, 400, 2, 1400)
				b.release(1, "x", 500, 510, 2, lv(1, 2))
				return nil
			},
			verdict: Valid,
		},
		{
			name: "a hold ends when its process invokes acquire again",
			build: func(b *builder) []want {
				b.acquire(0, "x", 90, 100, 0, 0)
				b.invoke(0, history.Acquire, 300, history.Value{Lock: "x"})
				b.fail(0, history.Acquire, 310, history.Value{Lock: "x"}, "not acquired")
				b.acquire(1, "x", 250, 400, 0, 0)
				b.release(1, "x", 500, 510, 0, "")
				return nil
			},
			verdict: Valid,
			stats:   map[string]float64{"holds": 2, "acquire_ok": 2, "acquire_fail": 1},
		},
		{
			name: "an info acquire is not a hold",
			build: func(b *builder) []want {
				b.invoke(0, history.Acquire, 90, history.Value{Lock: "x"})
				b.info(0, history.Acquire, 100, history.Value{Lock: "x"})
				b.acquire(1, "x", 150, 200, 1, 1200)
				b.release(1, "x", 300, 310, 1, lv(1, 1))
				b.invoke(2, history.Acquire, 400, history.Value{Lock: "x"}) // never completes
				b.acquire(1, "x", 500, 600, 2, 1600)
				return nil
			},
			verdict: Valid,
			stats:   map[string]float64{"holds": 2, "acquire_ok": 2, "acquire_info": 1},
		},
		{
			name: "nemesis ops are ignored",
			build: func(b *builder) []want {
				b.acquire(0, "x", 90, 100, 1, 1100)
				b.invoke(history.NemesisProcess, history.Acquire, 150, history.Value{Lock: "x"})
				b.ok(history.NemesisProcess, history.Acquire, 160, history.Value{Lock: "x", Token: history.Tok(9)})
				b.invoke(history.NemesisProcess, "pause-client", 170, history.Value{Targets: []string{"p0"}})
				b.release(0, "x", 300, 310, 1, lv(0, 1))
				b.info(history.NemesisProcess, "pause-client", 320, history.Value{Targets: []string{"p0"}})
				return nil
			},
			verdict: Valid,
			stats:   map[string]float64{"holds": 1, "acquire_ok": 1},
		},
		{
			name: "two locks never conflict",
			build: func(b *builder) []want {
				b.acquire(0, "x", 90, 100, 1, 1100)
				b.acquire(1, "y", 90, 110, 1, 1100)
				b.acquire(2, "y", 1110, 1120, 2, 2100) // p1's lease of y ended at 1.100s
				b.release(0, "x", 300, 310, 1, lv(0, 1))
				return nil
			},
			verdict: Valid,
			stats:   map[string]float64{"holds": 3},
		},
		{
			name: "foreign release",
			build: func(b *builder) []want {
				b.acquire(0, "x", 90, 100, 1, 300)
				c := b.acquire(1, "x", 350, 400, 2, 1400)
				r := b.release(0, "x", 500, 510, 1, lv(1, 2)) // p0 deleted p1's lock
				b.release(1, "x", 600, 610, 2, "")            // removed unknown: fine
				return []want{{"foreign-release", ops(c.done, r.inv, r.done)}}
			},
			verdict:   Invalid,
			stats:     map[string]float64{"foreign_releases": 1, "overlaps": 0},
			explained: `process 0's release of lock "x" at 0.500s removed lock value "p1-2" of process 1 (acquired at 0.400s with token 2), not its own "p0-1"`,
		},
		{
			name: "foreign release of an unknown owner",
			build: func(b *builder) []want {
				b.acquire(0, "x", 90, 100, 1, 300)
				r := b.release(0, "x", 500, 510, 1, "somebody")
				return []want{{"foreign-release", ops(r.inv, r.done)}}
			},
			verdict: Invalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b builder
			ws := tt.build(&b)
			r := check(t, MutualExclusion{}, b.h, tt.verdict)
			expectResult(t, r, ws, nil, tt.stats, tt.explained)
		})
	}
}

// TestMutualExclusionArrivalOrder checks that ops are ordered by Time, not by
// their place in the file.
func TestMutualExclusionArrivalOrder(t *testing.T) {
	var b builder
	// p1's acquire arrives first but p0's release invocation came before it.
	b.acquire(0, "x", 90, 100, 1, 1100)
	b.acquire(1, "x", 150, 201, 2, 1200)
	b.release(0, "x", 200, 210, 1, lv(0, 1))
	check(t, MutualExclusion{}, b.h, Valid)
}
