package checker

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
)

// attempts appends n failed acquire attempts of lock by the processes ps in
// turn, the first invoked at from ms, every `every` ms, each failing 100 ms
// after its invocation. It returns the first and the last failure.
func (b *builder) attempts(lock string, ps []int, n int, from, every int64) (first, last int) {
	for k := range n {
		p := ps[k%len(ps)]
		at := from + every*int64(k)
		b.invoke(p, history.Acquire, at, history.Value{Lock: lock})
		i := b.fail(p, history.Acquire, at+100, history.Value{Lock: lock}, "not acquired")
		if k == 0 {
			first = i
		}
		last = i
	}
	return first, last
}

// die appends a read of lock "x" by p invoked at ms and completed info
// "worker exited" at the same time, as the pool records a worker killed
// with an op open, and returns the info op.
func (b *builder) die(p int, at int64) int {
	b.invoke(p, history.Read, at, history.Value{Lock: "x"})
	return b.add(history.Info, p, history.Read, at, history.Value{Lock: "x"}, "worker exited: signal: killed")
}

// diedHolding returns a build in which process 0 acquires lock "x" and
// dies holding it at 20 ms, and then process 1 makes n failed attempts to
// acquire it, from 1 s on, every `every` ms; it wants no anomaly, for the
// attempts are too few or too close together to prove the lock stuck.
func diedHolding(n int, every int64) func(b *builder) []want {
	return func(b *builder) []want {
		b.acquire(0, "x", 0, 10, 0, 0)
		b.die(0, 20)
		b.attempts("x", []int{1}, n, 1000, every)
		return nil
	}
}

func TestLiveness(t *testing.T) {
	tests := []struct {
		name      string
		c         Liveness
		build     func(b *builder) []want
		verdict   Verdict
		explained string // part of the first anomaly's explanation
	}{
		{
			name: "a session holder killed with an op open",
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 0, 10, 0, 0)
				b.invoke(0, history.Read, 20, history.Value{Lock: "x"})
				d := b.add(history.Info, 0, history.Read, 1000, history.Value{Lock: "x"}, "worker exited: signal: killed")
				f, l := b.attempts("x", []int{1, 2}, 4, 2000, 2000)
				return []want{{"stuck-lock", ops(a.done, d, f, l)}}
			},
			verdict:   Invalid,
			explained: `lock "x" stayed stuck: process 0 acquired it at 0.010s and never released it (it died at 1.000s), and all 4 acquire attempts by other processes from 2.100s to 8.100s failed, 7.100s after the hold ended`,
		},
		{
			name: "a session holder killed by the nemesis between ops",
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 0, 10, 0, 0)
				b.invoke(history.NemesisProcess, "kill-client", 500, history.Value{})
				k := b.ok(history.NemesisProcess, "kill-client", 510, history.Value{Targets: []string{"p0"}})
				f, l := b.attempts("x", []int{1}, 3, 1000, 3000)
				return []want{{"stuck-lock", ops(a.done, k, f, l)}}
			},
			verdict: Invalid,
		},
		{
			name: "a session holder whose release failed",
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 0, 10, 0, 0)
				ri := b.invoke(0, history.Release, 20, history.Value{Lock: "x"})
				rd := b.info(0, history.Release, 30, history.Value{Lock: "x"})
				f, l := b.attempts("x", []int{1, 2}, 4, 1000, 1500)
				b.attempts("x", []int{0}, 3, 1200, 2000) // the holder's own: not counted
				return []want{{"stuck-lock", ops(a.done, ri, rd, f, l)}}
			},
			verdict:   Invalid,
			explained: "its release failed at 0.030s",
		},
		{
			name: "a lease never freed after it expired",
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 0, 10, 5, 2010) // a 2 s lease
				f, l := b.attempts("x", []int{1}, 4, 3000, 2000)
				return []want{{"stuck-lock", ops(a.done, f, l)}}
			},
			verdict:   Invalid,
			explained: "its lease ended at 2.010s",
		},
		{
			name: "a lease is stuck only for longer than the lease",
			build: func(b *builder) []want {
				b.acquire(0, "x", 0, 10, 5, 10010)        // a 10 s lease
				b.attempts("x", []int{1}, 4, 10100, 2000) // 6.1 s of failures after it
				return nil
			},
			verdict: Valid,
		},
		{
			name: "a silent session holder rightly keeps its lock",
			build: func(b *builder) []want {
				b.acquire(0, "x", 0, 10, 0, 0)
				b.invoke(history.NemesisProcess, "pause-client", 20, history.Value{Targets: []string{"p0"}})
				b.attempts("x", []int{1, 2}, 10, 100, 2000)
				return nil
			},
			verdict: Valid,
		},
		{
			name: "the lock was acquired again: contention, not stuck",
			build: func(b *builder) []want {
				b.acquire(0, "x", 0, 10, 0, 0)
				b.die(0, 20)
				b.attempts("x", []int{1}, 5, 1000, 2000)
				b.acquire(2, "x", 11000, 11010, 0, 0)
				b.release(2, "x", 11020, 11030, 0, "")
				return nil
			},
			verdict: Valid,
		},
		{
			name: "a released lock is not stuck",
			build: func(b *builder) []want {
				b.section(0, "x", 0, 0, 0)
				b.invoke(0, history.Write, 20, history.Value{Lock: "x", N: history.Num(1)})
				b.add(history.Info, 0, history.Write, 30, history.Value{Lock: "x", N: history.Num(1)}, "worker exited")
				b.attempts("x", []int{1}, 5, 1000, 2000)
				return nil
			},
			verdict: Valid,
		},
		{
			name:    "too few attempts",
			build:   diedHolding(2, 8000),
			verdict: Valid,
		},
		{
			name:    "too short a window",
			build:   diedHolding(10, 300),
			verdict: Valid,
		},
		{
			name: "the holder's own failures do not count",
			build: func(b *builder) []want {
				b.acquire(0, "x", 0, 10, 0, 0)
				b.invoke(0, history.Release, 20, history.Value{Lock: "x"})
				b.fail(0, history.Release, 30, history.Value{Lock: "x"}, "not held")
				b.attempts("x", []int{0}, 10, 1000, 2000)
				return nil
			},
			verdict: Valid,
		},
		{
			name: "thresholds can be set",
			c:    Liveness{MinAttempts: 1, MinWindow: time.Millisecond},
			build: func(b *builder) []want {
				a := b.acquire(0, "x", 0, 10, 0, 0)
				d := b.die(0, 20)
				f, l := b.attempts("x", []int{1}, 1, 1000, 0)
				return []want{{"stuck-lock", ops(a.done, d, f, l)}}
			},
			verdict: Invalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b builder
			ws := tt.build(&b)
			r := check(t, tt.c, b.h, tt.verdict)
			for i := range ws {
				ws[i].ops = dedupe(ws[i].ops)
			}
			expect(t, "anomalies", r.Anomalies, ws)
			if tt.explained != "" && !strings.Contains(r.Anomalies[0].Explanation, tt.explained) {
				t.Errorf("explanation\n got %s\nwant %s", r.Anomalies[0].Explanation, tt.explained)
			}
			if r.Stats["stuck_locks"] != float64(len(ws)) {
				t.Errorf("stuck_locks %v, want %d", r.Stats["stuck_locks"], len(ws))
			}
		})
	}
}

// dedupe drops repeated indexes from a sorted list.
func dedupe(is []int) []int {
	var out []int
	for i, x := range is {
		if i == 0 || x != is[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func TestLivenessStats(t *testing.T) {
	var b builder
	// Five grants with latencies 1, 2, 3, 4 and 100 ms; two failures.
	for k, lat := range []int64{1, 2, 3, 4, 100} {
		at := int64(1000 * (k + 1))
		b.acquire(k%2, "x", at, at+lat, 0, 0)
		b.release(k%2, "x", at+200, at+210, 0, "")
	}
	b.attempts("x", []int{2}, 2, 1300, 1000)
	b.invoke(history.NemesisProcess, "partition", 12000, history.Value{})
	r := check(t, Liveness{}, b.h, Valid)
	want := map[string]float64{
		"acquire_attempts":       7,
		"acquire_ok":             5,
		"acquire_success_rate":   5.0 / 7,
		"acquire_latency_p50_ms": 3,
		"acquire_latency_p99_ms": 100,
		// from the last grant at 5.1 s to the end of the history at 12 s
		"longest_no_acquire_s": 6.9,
		"stuck_locks":          0,
	}
	for k, v := range want {
		if got := r.Stats[k]; got < v-1e-9 || got > v+1e-9 {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	r = check(t, Liveness{}, nil, Valid)
	if _, ok := r.Stats["acquire_success_rate"]; ok {
		t.Errorf("success rate of no attempts: %v", r.Stats)
	}
}

// TestLivenessStatsAroundFaults: a fault window from 100 to 300 ms, during
// which nothing is acquired; acquires at 10, 50, 350 and 900 ms, and the
// history ends at 1000 ms. Outside the fault the longest gap is 350→900 ms;
// the recovery after the heal (at 300 ms) took 50 ms.
func TestLivenessStatsAroundFaults(t *testing.T) {
	var b builder
	b.acquire(1, "x", 0, 10, 0, 20)
	b.acquire(2, "x", 40, 50, 0, 60)
	b.invoke(history.NemesisProcess, "pause-node", 100, history.Value{})
	b.ok(history.NemesisProcess, "pause-node", 101, history.Value{Targets: []string{"n1"}})
	b.invoke(history.NemesisProcess, "resume-node", 299, history.Value{})
	b.ok(history.NemesisProcess, "resume-node", 300, history.Value{Targets: []string{"n1"}})
	b.acquire(1, "x", 340, 350, 0, 360)
	b.acquire(2, "x", 890, 900, 0, 910)
	b.invoke(3, history.Acquire, 990, history.Value{Lock: "x"})
	b.fail(3, history.Acquire, 1000, history.Value{Lock: "x"}, "not acquired")
	r := Run(context.Background(), history.NewTable(b.h), Liveness{})[0]
	for k, want := range map[string]float64{
		"longest_no_acquire_s":                0.55,
		"longest_no_acquire_outside_faults_s": 0.55,
		"recovery_after_heal_max_s":           0.05,
		"recovery_after_heal_mean_s":          0.05,
		"heals_without_recovery":              0,
		"fault_windows":                       1,
		"faults_effective":                    0, // nothing held from 100 to 300 ms
	} {
		if got := r.Stats[k]; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	// A fault that is never followed by an acquire.
	b.invoke(history.NemesisProcess, "kill-node", 920, history.Value{})
	b.ok(history.NemesisProcess, "kill-node", 921, history.Value{Targets: []string{"n1"}})
	b.invoke(history.NemesisProcess, "restart-node", 950, history.Value{})
	b.ok(history.NemesisProcess, "restart-node", 960, history.Value{Targets: []string{"n1"}})
	b.invoke(3, history.Acquire, 990, history.Value{Lock: "x"})
	b.fail(3, history.Acquire, 1000, history.Value{Lock: "x"}, "not acquired")
	r = Run(context.Background(), history.NewTable(b.h), Liveness{})[0]
	if r.Stats["heals_without_recovery"] != 1 {
		t.Errorf("heals_without_recovery = %v, want 1", r.Stats["heals_without_recovery"])
	}
	// A fault in force while p1 held x (1010 to 1100 ms) had a chance to
	// matter; so does one that began inside a lease that never ends.
	b.acquire(1, "x", 1000, 1010, 0, 1100)
	b.invoke(history.NemesisProcess, "pause-node", 1050, history.Value{})
	b.ok(history.NemesisProcess, "pause-node", 1051, history.Value{Targets: []string{"n1"}})
	b.invoke(history.NemesisProcess, "resume-node", 1200, history.Value{})
	b.ok(history.NemesisProcess, "resume-node", 1201, history.Value{Targets: []string{"n1"}})
	r = Run(context.Background(), history.NewTable(b.h), Liveness{})[0]
	if r.Stats["fault_windows"] != 3 || r.Stats["faults_effective"] != 1 {
		t.Errorf("fault_windows %v, faults_effective %v; want 3 and 1", r.Stats["fault_windows"], r.Stats["faults_effective"])
	}
	b.acquire(2, "y", 1300, 1310, 0, 0)
	b.invoke(history.NemesisProcess, "kill-node", 1400, history.Value{})
	b.ok(history.NemesisProcess, "kill-node", 1401, history.Value{Targets: []string{"n1"}})
	r = Run(context.Background(), history.NewTable(b.h), Liveness{})[0]
	if r.Stats["fault_windows"] != 4 || r.Stats["faults_effective"] != 2 {
		t.Errorf("fault_windows %v, faults_effective %v; want 4 and 2", r.Stats["fault_windows"], r.Stats["faults_effective"])
	}
}

// TestStuckAfterADeathInsideAnAcquire: p0 dies inside an acquire (between
// SETNX and EXPIRE, say) after the last hold was released; every later
// attempt fails: stuck. If a live holder still holds the lock when p0's
// acquire began, the others fail because of it, and nothing is stuck.
func TestStuckAfterADeathInsideAnAcquire(t *testing.T) {
	for _, tc := range []struct {
		name string
		// release is when the holder invokes its release and when the
		// release ok comes; none when release[0] is 0. The dead process
		// invokes its acquire at 100 and dies at 160.
		release   [2]int64
		wantStuck bool
	}{
		{"after a release", [2]int64{20, 30}, true},
		{"across a release invoked before it", [2]int64{90, 165}, true},
		// The acquire waited on the lock, which a release invoked after
		// the acquire freed before the death (the debate's
		// redis-setnx-expire-crash, once).
		{"across a release that completed before the death", [2]int64{120, 140}, true},
		{"across a release that completed after the death", [2]int64{120, 165}, false},
		{"while a live session holder holds it", [2]int64{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			b.acquire(1, "x", 0, 10, 0, 0)
			// The ops of both processes and the nemesis, in time order.
			type step struct {
				at int64
				do func()
			}
			steps := []step{
				{100, func() { b.invoke(0, history.Acquire, 100, history.Value{Lock: "x"}) }},
				{150, func() { b.invoke(history.NemesisProcess, "kill-client", 150, history.Value{}) }},
				{160, func() {
					b.add(history.Info, 0, history.Acquire, 160, history.Value{Lock: "x"}, "worker exited: signal: killed")
				}},
				{170, func() { b.ok(history.NemesisProcess, "kill-client", 170, history.Value{Targets: []string{"p0"}}) }},
			}
			if r := tc.release; r[0] > 0 {
				steps = append(steps,
					step{r[0], func() { b.invoke(1, history.Release, r[0], history.Value{Lock: "x"}) }},
					step{r[1], func() { b.ok(1, history.Release, r[1], history.Value{Lock: "x"}) }})
			}
			slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
			for _, st := range steps {
				st.do()
			}
			b.attempts("x", []int{2, 3}, 6, 1000, 1500)
			r := Run(context.Background(), history.NewTable(b.h), Liveness{})[0]
			stuck := 0
			for _, a := range r.Anomalies {
				if a.Kind == "stuck-lock" {
					stuck++
					if !strings.Contains(a.Explanation, "inside an acquire") {
						t.Errorf("explanation %q", a.Explanation)
					}
				}
			}
			if (stuck == 1) != tc.wantStuck {
				t.Errorf("%d stuck locks, want stuck %v: %+v", stuck, tc.wantStuck, r.Anomalies)
			}
		})
	}
}
