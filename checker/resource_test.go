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
	runBuilt(t, []builtCase{
		{
			name: "clean sequential writes",
			build: func(b *builder) ([]want, []want) {
				b.h = cleanHistory()
				return nil, nil
			},
			verdict: Valid,
			stats: map[string]float64{"writes_accepted": 6, "writes_rejected": 0, "saved_by_fencing": 0, "live_writes_rejected": 0,
				"writes_failed": 0, "writes_unknown": 0, "stale_writes": 0, "lost_updates": 0, "updates_lost": 0,
				"token_regressions": 0, "regressed_writes": 0},
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
			name: "a stale write that trampled nobody is a late write",
			mode: "fenced",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(0, "x", 0, 10, 1, 1010)
				b.read(0, "x", 20, 30, 0)
				w := b.write(0, "x", 1040, 1050, 1, 1, 1045) // woken after its lease ran out
				b.release(0, "x", 1060, 1070, 1, "")
				b.section(1, "x", 1100, 2, 1) // the next holder reads what it wrote
				return nil, []want{{"late-write", ops(a.done, w.inv, w.done)}}
			},
			verdict:   Valid,
			stats:     map[string]float64{"writes_accepted": 2, "stale_writes": 0, "late_writes": 1, "lost_updates": 0, "token_regressions": 0},
			explained: `process 0 wrote 1 under lock "x" with token 1 at 1.045s, 0.035s after its lease ended at 1.010s, but before any other process acquired the lock: a stale write that trampled nobody`,
		},
		{
			name: "a late write in mode none is a late write too",
			mode: "none",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(0, "x", 0, 10, 0, 1010)
				w := b.write(0, "x", 1040, 1050, 1, 0, 1045)
				return nil, []want{{"late-write", ops(a.done, w.inv, w.done)}}
			},
			verdict: Valid,
			stats:   map[string]float64{"stale_writes": 0, "late_writes": 1},
		},
		{
			name: "a holder granted at the very ns the late write is stored is trampled",
			mode: "fenced",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(0, "x", 0, 10, 1, 1010)
				c := b.acquire(1, "x", 1020, 1045, 2, 2045)
				w := b.write(0, "x", 1040, 1050, 1, 1, 1045)
				return []want{{"stale-write", ops(a.done, w.inv, c.done, w.done)}}, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"stale_writes": 1, "late_writes": 0},
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
			name: "lost update: A reads 5, B reads 5, B writes 6, A writes 6",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 1, 1100)
				b.acquire(1, "x", 140, 150, 2, 1150)
				r0 := b.read(0, "x", 160, 170, 5)
				b.read(1, "x", 175, 180, 5)
				w1 := b.write(1, "x", 200, 210, 6, 2, 205)
				w0 := b.write(0, "x", 220, 230, 6, 1, 225)
				b.release(0, "x", 300, 310, 1, lv(0, 1))
				b.release(1, "x", 320, 330, 2, lv(1, 2))
				return []want{{"lost-update", ops(r0.done, w1.done, w0.done)}}, nil
			},
			mode:      "none",
			verdict:   Invalid,
			stats:     map[string]float64{"writes_accepted": 2, "lost_updates": 1, "updates_lost": 1, "stale_writes": 0, "token_regressions": -1},
			explained: `process 0 wrote 6 under lock "x" (read 5 at 0.170s) at 0.225s over process 1's write of 6 at 0.205s: 1 update lost`,
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
			stats:     map[string]float64{"lost_updates": 1, "updates_lost": 1},
			explained: `process 3 wrote 3 under lock "y" (read nothing, so based on 2) at 0.225s over process 2's write of 3 at 0.205s: 1 update lost`,
		},
		{
			name: "three sections based on one value lose two updates",
			build: func(b *builder) ([]want, []want) {
				for p := range 3 {
					b.acquire(p, "x", 90, 100+int64(p), 0, 1000)
				}
				r0 := b.read(0, "x", 110, 111, 5)
				b.read(1, "x", 112, 113, 5)
				r2 := b.read(2, "x", 114, 115, 5)
				w1 := b.write(1, "x", 120, 121, 6, 0, 121)
				w2 := b.write(2, "x", 122, 123, 6, 0, 123)
				w0 := b.write(0, "x", 124, 125, 6, 0, 125)
				return []want{
					{"lost-update", ops(r2.done, w1.done, w2.done)},
					{"lost-update", ops(r0.done, w2.done, w0.done)},
				}, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"writes_accepted": 3, "lost_updates": 2, "updates_lost": 2},
		},
		{
			name: "a stale write that rolls the counter back is one lost update",
			mode: "none",
			build: func(b *builder) ([]want, []want) {
				as, _ := rollback(b)
				return as, nil
			},
			verdict: Invalid,
			stats: map[string]float64{"writes_accepted": 9, "stale_writes": 1, "lost_updates": 1, "updates_lost": 4,
				"token_regressions": -1, "regressed_writes": -1},
			explained: `process 3 wrote 1 under lock "x" with token 1 at 0.900s, 0.600s after its lease ended at 0.300s; process 0 had acquired token 2 at 0.401s`,
		},
		{
			name: "a rollback in a check-and-set run is one lost update too",
			mode: "check-and-set",
			build: func(b *builder) ([]want, []want) {
				as, _ := rollback(b)
				return as, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"stale_writes": 1, "lost_updates": 1, "updates_lost": 4, "token_regressions": -1},
		},
		{
			name: "a write based on one of unknown outcome is no lost update",
			build: func(b *builder) ([]want, []want) {
				b.section(0, "x", 100, 1, 0)
				b.acquire(1, "x", 200, 201, 2, 1201)
				b.read(1, "x", 202, 203, 1)
				b.invoke(1, history.Write, 204, wv("x", 1, 2, 2, 0))
				b.info(1, history.Write, 250, history.Value{Lock: "x"})
				b.release(1, "x", 260, 261, 2, lv(1, 2))
				b.section(2, "x", 300, 3, 2) // read 2 over a write of 1
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"writes_accepted": 2, "writes_unknown": 1, "lost_updates": 0, "updates_lost": 0},
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
			stats:     map[string]float64{"token_regressions": 1, "regressed_writes": 1, "lost_updates": 0, "stale_writes": 0},
			explained: `the store accepted process 0's write of token 1 under lock "x" at 0.300s after it had accepted process 1's write of token 2 at 0.200s`,
		},
		{
			name: "a rollback in a fenced run is a token regression too",
			mode: "fenced",
			build: func(b *builder) ([]want, []want) {
				as, reg := rollback(b)
				return append(as, reg), nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"stale_writes": 1, "lost_updates": 1, "token_regressions": 1, "regressed_writes": 1},
		},
		{
			name: "a reset token counter is one regression per maximum",
			mode: "fenced",
			build: func(b *builder) ([]want, []want) {
				t, n := int64(100), int64(0)
				sec := func(p int, tk uint64) section {
					s := b.section(p, "x", t, tk, n)
					t, n = t+100, n+1
					return s
				}
				var top section
				for tk := range uint64(5) {
					top = sec(int(tk%3), tk+1)
				}
				first := sec(1, 1) // the counter restarted
				sec(2, 2)
				sec(0, 3)
				six := sec(1, 6)
				five := sec(2, 5) // the old maximum, below the new one
				sec(0, 7)
				return []want{
					{"token-regression", ops(top.write.done, first.write.inv, first.write.done)},
					{"token-regression", ops(six.write.done, five.write.inv, five.write.done)},
				}, nil
			},
			verdict:   Invalid,
			stats:     map[string]float64{"token_regressions": 2, "regressed_writes": 4, "lost_updates": 0, "stale_writes": 0},
			explained: `the store accepted process 1's write of token 1 under lock "x" at 0.605s after it had accepted process 1's write of token 5 at 0.505s, and 2 later accepted writes were below token 5 too`,
		},
		regressionUnchecked("none"),
		regressionUnchecked("check-and-set"),
		{
			name: "token regressions are checked when the mode is unknown",
			build: func(b *builder) ([]want, []want) {
				s := b.section(0, "x", 100, 2, 0)
				r := b.section(1, "x", 200, 1, 1)
				return []want{{"token-regression", ops(s.write.done, r.write.inv, r.write.done)}}, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"token_regressions": 1, "regressed_writes": 1},
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
			stats:     map[string]float64{"writes_accepted": 1, "writes_rejected": 1, "saved_by_fencing": 1, "live_writes_rejected": 0, "stale_writes": 0},
			explained: `the store rejected process 3's write of token 41 under lock "x" at 12.403s: rejected: token 41 < 42 (saved by fencing)`,
		},
		{
			name: "a live holder's write rejected after a stale holder re-claimed",
			mode: "check-and-set",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(1, "x", 990, 1000, 0, 1500)
				b.claim(1, "x", 1010, 1011, 0)
				b.read(1, "x", 1020, 1021, 0)
				c := b.acquire(0, "x", 1990, 2000, 0, 2567)
				b.claim(0, "x", 2010, 2011, 0)
				b.read(0, "x", 2020, 2021, 0)
				b.claim(1, "x", 2200, 2201, 0) // process 1 wakes up from a pause
				w1 := b.write(1, "x", 2240, 2251, 1, 0, 2250)
				wi := b.invoke(0, history.Write, 2270, wv("x", 0, 1, 0, 0))
				wf := b.fail(0, history.Write, 2273, wv("x", 0, 1, 0, 2272), `rejected: claimant is "p1-0", not "p0-0"`)
				b.release(0, "x", 2300, 2301, 0, lv(0, 0))
				return []want{{"stale-write", ops(a.done, c.done, w1.inv, w1.done)}},
					[]want{{"live-write-rejected", ops(wi, wf)}}
			},
			verdict: Invalid,
			stats: map[string]float64{"writes_accepted": 1, "stale_writes": 1, "writes_rejected": 1, "saved_by_fencing": 0,
				"live_writes_rejected": 1, "lost_updates": 0},
		},
		{
			name: "rejected writes are classified by the writer's lease end",
			mode: "check-and-set",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 1990, 2000, 0, 2567)
				wi := b.invoke(0, history.Write, 2270, wv("x", 0, 1, 0, 0))
				wf := b.fail(0, history.Write, 2273, wv("x", 0, 1, 0, 2272), `rejected: claimant is "p1-0", not "p0-0"`)
				vi := b.invoke(0, history.Write, 2500, wv("x", 0, 1, 0, 0))
				vf := b.fail(0, history.Write, 2600, wv("x", 0, 1, 0, 2567), `rejected: claimant is "p1-0", not "p0-0"`)
				xi := b.invoke(0, history.Write, 2600, wv("x", 0, 1, 0, 0))
				xf := b.fail(0, history.Write, 2610, wv("x", 0, 1, 0, 2568), `rejected: claimant is "p1-0", not "p0-0"`)
				b.acquire(2, "x", 2990, 3000, 0, 0)
				b.release(2, "x", 3100, 3101, 0, lv(2, 0))
				yi := b.invoke(2, history.Write, 3200, wv("x", 2, 1, 0, 0))
				yf := b.fail(2, history.Write, 3210, wv("x", 2, 1, 0, 3205), "rejected: no fencing token")
				zi := b.invoke(3, history.Write, 3300, wv("x", 3, 1, 0, 0))
				zf := b.fail(3, history.Write, 3310, wv("x", 3, 1, 0, 3305), "rejected: no fencing token")
				return nil, []want{
					{"live-write-rejected", ops(wi, wf)},
					{"live-write-rejected", ops(vi, vf)}, // at the very ns the lease ends
					{"write-rejected", ops(xi, xf)},
					{"write-rejected", ops(yi, yf)}, // after its release
					{"write-rejected", ops(zi, zf)}, // without a lease
				}
			},
			verdict:   Valid,
			stats:     map[string]float64{"writes_rejected": 5, "saved_by_fencing": 3, "live_writes_rejected": 2},
			explained: `the store rejected process 0's write of 1 under lock "x" at 2.272s (rejected: claimant is "p1-0", not "p0-0") although its lease ran until 2.567s: an availability cost of the resource's check`,
		},
		{
			name: "a live write rejected without a store time is judged at its invocation",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 0, 0)
				wi := b.invoke(0, history.Write, 200, wv("x", 0, 1, 0, 0))
				wf := b.fail(0, history.Write, 210, history.Value{Lock: "x"}, "rejected: no fencing token")
				return nil, []want{{"live-write-rejected", ops(wi, wf)}}
			},
			verdict:   Valid,
			stats:     map[string]float64{"writes_rejected": 1, "saved_by_fencing": 0, "live_writes_rejected": 1},
			explained: `the store rejected process 0's write of 1 under lock "x" at 0.200s (rejected: no fencing token) although its lease had not ended: an availability cost of the resource's check`,
		},
		{
			name: "a write that failed before reaching the store was not rejected",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 1, 0)
				b.invoke(0, history.Write, 200, wv("x", 0, 1, 1, 0))
				b.fail(0, history.Write, 210, history.Value{Lock: "x"}, "dial tcp 127.0.0.1:4000: connect: connection refused")
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"writes_rejected": 0, "saved_by_fencing": 0, "live_writes_rejected": 0, "writes_failed": 1},
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
	}, func(tt builtCase) Checker { return Resource{Mode: tt.mode} })
}

// regressionUnchecked is a case of TestResource in mode, which does not
// check tokens: a write under token 1 after one under token 2 is no token
// regression, and the stats of regressions are absent.
func regressionUnchecked(mode string) builtCase {
	return builtCase{
		name: "token regressions are not checked in " + mode + " mode",
		mode: mode,
		build: func(b *builder) ([]want, []want) {
			b.section(0, "x", 100, 2, 0)
			b.section(1, "x", 200, 1, 1)
			return nil, nil
		},
		verdict: Valid,
		stats:   map[string]float64{"writes_accepted": 2, "token_regressions": -1, "regressed_writes": -1},
	}
}

// rollback builds a history in which process 3 reads 0 under token 1, is
// paused past its lease while four sections of other processes take the
// counter to 4 under tokens 2 to 5, and then writes 1, rolling the counter
// back; four correct sections under tokens 6 to 9 follow, reading 1, 2, 3
// and 4. It returns the stale-write and lost-update anomalies the resource
// checker reports in every mode, and the token-regression it reports only
// where tokens are checked.
func rollback(b *builder) (anomalies []want, regression want) {
	a := b.acquire(3, "x", 90, 100, 1, 300)
	r := b.read(3, "x", 110, 120, 0)
	wi := b.invoke(3, history.Write, 130, wv("x", 3, 1, 1, 0))
	first := b.section(0, "x", 400, 2, 0)
	b.section(1, "x", 500, 3, 1)
	b.section(2, "x", 600, 4, 2)
	last := b.section(0, "x", 700, 5, 3)
	wo := b.ok(3, history.Write, 905, wv("x", 3, 1, 1, 900))
	for k := range 4 {
		b.section(1+k%3, "x", 1000+100*int64(k), uint64(6+k), int64(1+k))
	}
	return []want{
			{"stale-write", ops(a.done, wi, first.acq.done, wo)},
			{"lost-update", ops(r.done, last.write.done, wo)},
		},
		want{"token-regression", ops(wi, last.write.done, wo)}
}

func TestResourceLostUpdateExplained(t *testing.T) {
	var b builder
	rollback(&b)
	r := check(t, Resource{Mode: "none"}, b.h, Invalid)
	want := `process 3 wrote 1 under lock "x" (read 0 at 0.120s) at 0.900s over process 0's write of 4 at 0.705s: 4 updates lost`
	if len(r.Anomalies) != 2 || r.Anomalies[1].Explanation != want {
		t.Errorf("got %+v\nwant the lost update explained as\n%s", r.Anomalies, want)
	}
}
