package checker

import (
	"testing"

	"github.com/locktest/locktest/history"
)

// wv is the value of a write of n with token t under lock.
func wv(lock string, p int, n int64, t uint64, store int64) history.Value {
	return history.Value{Lock: lock, N: history.Num(n), Token: tok(t), LockValue: lv(p, int(t)), StoreTime: ms(store)}
}

func TestResource(t *testing.T) {
	tests := []struct {
		name      string
		build     func(b *builder) (anomalies, notes []want)
		verdict   Verdict
		stats     map[string]float64
		explained string // the first anomaly's (or else note's) explanation, when set
	}{
		{
			name: "clean sequential writes",
			build: func(b *builder) ([]want, []want) {
				b.h = cleanHistory()
				return nil, nil
			},
			verdict: Valid,
			stats: map[string]float64{"writes_accepted": 6, "writes_rejected": 0, "saved_by_fencing": 0, "writes_unknown": 0,
				"stale_writes": 0, "lost_updates": 0, "token_regressions": 0},
		},
		{
			name: "stale write that trampled the next holder",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(3, "x", 11000, 11100, 41, 11503)
				b.read(3, "x", 11110, 11120, 11)
				wi := b.invoke(3, history.Write, 11130, wv("x", 3, 12, 41, 0))
				c := b.acquire(1, "x", 11600, 12100, 42, 13100)
				wo := b.ok(3, history.Write, 12410, wv("x", 3, 12, 41, 12403))
				b.release(1, "x", 12500, 12510, 42, lv(1, 42))
				b.release(3, "x", 12600, 12610, 41, "")
				return []want{{"stale-write", ops(a.done, wi, c.done, wo)}}, nil
			},
			verdict:   Invalid,
			stats:     map[string]float64{"writes_accepted": 1, "stale_writes": 1},
			explained: `process 3 wrote 12 under lock "x" with token 41 at 12.403s, 0.900s after its lease ended at 11.503s; process 1 had acquired token 42 at 12.100s`,
		},
		{
			name: "stale write after its own release",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(0, "x", 90, 100, 0, 0)
				b.release(0, "x", 200, 210, 0, "")
				b.invoke(0, history.Acquire, 300, history.Value{Lock: "x"})
				b.fail(0, history.Acquire, 310, history.Value{Lock: "x"}, "not acquired")
				w := b.write(0, "x", 320, 330, 1, 0, 325)
				return []want{{"stale-write", ops(a.done, w.inv, w.done)}}, nil
			},
			verdict:   Invalid,
			explained: `process 0 wrote 1 under lock "x" at 0.325s, 0.125s after it invoked release at 0.200s`,
		},
		{
			name: "write without a hold",
			build: func(b *builder) ([]want, []want) {
				b.section(0, "x", 100, 1, 0)
				w := b.write(2, "x", 300, 310, 2, 0, 305)
				return []want{{"stale-write", ops(w.inv, w.done)}}, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"writes_accepted": 2, "stale_writes": 1},
		},
		{
			name: "lost update",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 1, 1100)
				b.acquire(1, "x", 140, 150, 2, 1150)
				r0 := b.read(0, "x", 160, 170, 5)
				r1 := b.read(1, "x", 175, 180, 5)
				w0 := b.write(0, "x", 200, 210, 6, 1, 205)
				w1 := b.write(1, "x", 220, 230, 6, 2, 225)
				b.release(0, "x", 300, 310, 1, lv(0, 1))
				b.release(1, "x", 320, 330, 2, lv(1, 2))
				return []want{{"lost-update", ops(r0.done, r1.done, w0.done, w1.done)}}, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"writes_accepted": 2, "lost_updates": 1, "stale_writes": 0, "token_regressions": 0},
		},
		{
			name: "lost update without reads is based on n - 1",
			build: func(b *builder) ([]want, []want) {
				b.acquire(2, "y", 90, 100, 0, 0)
				b.acquire(3, "y", 90, 110, 0, 0)
				w2 := b.write(2, "y", 200, 210, 3, 0, 205)
				w3 := b.write(3, "y", 220, 230, 3, 0, 225)
				b.write(3, "y", 240, 250, 4, 0, 245)
				return []want{{"lost-update", ops(w2.done, w3.done)}}, nil
			},
			verdict:   Invalid,
			explained: `2 critical sections of lock "y" were based on counter value 2 and the store accepted the write of each (process 2 wrote 3 at 0.205s, process 3 wrote 3 at 0.225s): 1 update lost`,
		},
		{
			name: "token regression",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 1, 10000)
				b.acquire(1, "x", 140, 150, 2, 10000)
				b.read(1, "x", 160, 165, 0)
				w1 := b.write(1, "x", 170, 200, 1, 2, 200)
				b.read(0, "x", 250, 255, 1)
				w0 := b.write(0, "x", 260, 300, 2, 1, 300)
				return []want{{"token-regression", ops(w1.done, w0.inv, w0.done)}}, nil
			},
			verdict:   Invalid,
			stats:     map[string]float64{"token_regressions": 1, "lost_updates": 0, "stale_writes": 0},
			explained: `the store accepted process 0's write of token 1 under lock "x" at 0.300s after it had accepted process 1's write of token 2 at 0.200s`,
		},
		{
			name: "stale write rejected by fencing is a note",
			build: func(b *builder) ([]want, []want) {
				b.acquire(3, "x", 11000, 11100, 41, 11503)
				b.read(3, "x", 11110, 11120, 11)
				wi := b.invoke(3, history.Write, 11130, wv("x", 3, 12, 41, 0))
				b.acquire(1, "x", 11600, 12100, 42, 13100)
				b.read(1, "x", 12110, 12120, 11)
				b.write(1, "x", 12130, 12140, 12, 42, 12135)
				wf := b.fail(3, history.Write, 12410, wv("x", 3, 12, 41, 12403), "rejected: token 41 < 42")
				b.release(1, "x", 12500, 12510, 42, lv(1, 42))
				return nil, []want{{"write-rejected", ops(wi, wf)}}
			},
			verdict:   Valid,
			stats:     map[string]float64{"writes_accepted": 1, "writes_rejected": 1, "saved_by_fencing": 1, "stale_writes": 0},
			explained: `the store rejected process 3's write of token 41 under lock "x" at 12.403s: rejected: token 41 < 42 (saved by fencing)`,
		},
		{
			name: "writes of unknown outcome are not anomalies",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 1, 300)
				b.invoke(0, history.Write, 110, wv("x", 0, 1, 1, 0))
				b.info(0, history.Write, 500, history.Value{Lock: "x"})
				b.acquire(1, "x", 400, 410, 2, 1410)
				b.invoke(1, history.Write, 420, wv("x", 1, 1, 2, 0))
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"writes_accepted": 0, "writes_unknown": 2},
		},
		{
			name: "nemesis ops are ignored",
			build: func(b *builder) ([]want, []want) {
				b.section(0, "x", 100, 1, 0)
				b.invoke(history.NemesisProcess, history.Write, 150, wv("x", -1, 1, 1, 0))
				b.ok(history.NemesisProcess, history.Write, 160, wv("x", -1, 1, 1, 155))
				b.section(1, "x", 200, 2, 1)
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"writes_accepted": 2},
		},
		{
			name: "two locks never conflict",
			build: func(b *builder) ([]want, []want) {
				b.section(0, "x", 100, 5, 0)
				b.section(1, "y", 102, 1, 0) // same base, lower token, stored later
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"writes_accepted": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b builder
			as, ns := tt.build(&b)
			r := check(t, Resource{}, b.h, tt.verdict)
			expect(t, "anomalies", r.Anomalies, as)
			expect(t, "notes", r.Notes, ns)
			for k, v := range tt.stats {
				if r.Stats[k] != v {
					t.Errorf("stat %s = %v, want %v", k, r.Stats[k], v)
				}
			}
			if tt.explained != "" {
				got := ""
				switch {
				case len(r.Anomalies) > 0:
					got = r.Anomalies[0].Explanation
				case len(r.Notes) > 0:
					got = r.Notes[0].Explanation
				}
				if got != tt.explained {
					t.Errorf("explanation\n got %s\nwant %s", got, tt.explained)
				}
			}
		})
	}
}
