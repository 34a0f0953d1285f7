package checker

import (
	"testing"

	"github.com/locktest/locktest/history"
)

func TestFencingTokens(t *testing.T) {
	runBuilt(t, []builtCase{
		{
			name: "clean increasing tokens",
			build: func(b *builder) ([]want, []want) {
				b.h = cleanHistory()
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"tokens": 6, "token_regressions": 0, "regressed_grants": 0, "duplicate_tokens": 0},
		},
		{
			name: "token regression",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(0, "x", 90, 100, 5, 1100)
				b.release(0, "x", 150, 160, 5, lv(0, 5))
				c := b.acquire(1, "x", 200, 210, 3, 1210)
				return []want{{"token-regression", ops(a.done, c.inv, c.done)}}, nil
			},
			verdict:   Invalid,
			stats:     map[string]float64{"tokens": 2, "token_regressions": 1, "regressed_grants": 1},
			explained: `process 1 was granted token 3 of lock "x" at 0.210s (invoked at 0.200s), lower than token 5 granted to process 0 at 0.100s`,
		},
		{
			name: "a reset token counter is one regression per maximum",
			build: func(b *builder) ([]want, []want) {
				grant := b.grants(100)
				var top pair
				for tk := range uint64(5) {
					top = grant(int(tk%3), 11+tk)
				}
				first := grant(0, 1) // the counter restarted at 1
				grant(1, 2)
				grant(2, 3)
				grant(0, 4)
				high := grant(1, 17)
				low := grant(2, 16) // below the new maximum
				grant(0, 18)
				return []want{
					{"token-regression", ops(top.done, first.inv, first.done)},
					{"token-regression", ops(high.done, low.inv, low.done)},
				}, nil
			},
			verdict:   Invalid,
			stats:     map[string]float64{"tokens": 12, "token_regressions": 2, "regressed_grants": 5, "duplicate_tokens": 0},
			explained: `process 0 was granted token 1 of lock "x" at 0.601s (invoked at 0.600s), lower than token 15 granted to process 1 at 0.501s, and 3 later grants were below token 15 too`,
		},
		{
			name: "resets of two locks collapse per lock",
			build: func(b *builder) ([]want, []want) {
				x := b.acquire(0, "x", 90, 100, 10, 0)
				y := b.acquire(1, "y", 90, 100, 20, 0)
				x1 := b.acquire(2, "x", 200, 210, 1, 0)
				y1 := b.acquire(3, "y", 200, 210, 1, 0)
				b.acquire(2, "x", 300, 310, 2, 0)
				b.acquire(3, "y", 300, 310, 2, 0)
				b.acquire(2, "x", 400, 410, 3, 0)
				return []want{
					{"token-regression", ops(x.done, x1.inv, x1.done)},
					{"token-regression", ops(y.done, y1.inv, y1.done)},
				}, nil
			},
			verdict:   Invalid,
			stats:     map[string]float64{"tokens": 7, "token_regressions": 2, "regressed_grants": 5},
			explained: `process 2 was granted token 1 of lock "x" at 0.210s (invoked at 0.200s), lower than token 10 granted to process 0 at 0.100s, and 2 later grants were below token 10 too`,
		},
		{
			name: "a regression is reported against the highest earlier token",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 5, 0)
				a := b.acquire(1, "x", 95, 110, 9, 0)
				b.acquire(2, "x", 96, 120, 7, 0)
				c := b.acquire(3, "x", 200, 210, 6, 0)
				return []want{
					{"token-regression", ops(a.done, c.inv, c.done)},
				}, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"tokens": 4, "token_regressions": 1, "regressed_grants": 1},
		},
		{
			name: "concurrent acquires may be granted in any order",
			build: func(b *builder) ([]want, []want) {
				b.invoke(0, history.Acquire, 100, history.Value{Lock: "x"})
				b.invoke(1, history.Acquire, 110, history.Value{Lock: "x"})
				b.ok(1, history.Acquire, 120, history.Value{Lock: "x", Token: history.Tok(2)})
				b.ok(0, history.Acquire, 130, history.Value{Lock: "x", Token: history.Tok(1)})
				return nil, nil
			},
			verdict: Valid,
		},
		{
			name: "a token granted at the ns of the next invocation is not before it",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 5, 0)
				b.acquire(1, "x", 100, 110, 4, 0)
				return nil, nil
			},
			verdict: Valid,
		},
		{
			name: "duplicate token",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(0, "x", 1090, 1100, 7, 1300)
				b.release(0, "x", 1150, 1160, 7, lv(0, 7))
				c := b.acquire(2, "x", 1190, 1204, 7, 2204)
				return []want{{"duplicate-token", ops(a.done, c.done)}}, nil
			},
			verdict:   Invalid,
			stats:     map[string]float64{"duplicate_tokens": 1, "token_regressions": 0},
			explained: `token 7 of lock "x" was granted 2 times: to process 0 at 1.100s, process 2 at 1.204s`,
		},
		{
			name: "a re-grant after a release of unknown outcome continues the hold",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 7, 1100)
				b.releaseUnknown(0, "x", 150, 1150, 7)
				b.acquire(0, "x", 1150, 1160, 7, 2160)
				b.release(0, "x", 1200, 1210, 7, lv(0, 7))
				b.acquire(1, "x", 1300, 1310, 8, 2310)
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"tokens": 3, "duplicate_tokens": 0, "continued_holds": 1, "token_regressions": 0},
		},
		{
			name: "a chain of re-grants is one hold, failed acquires between allowed",
			build: func(b *builder) ([]want, []want) {
				b.acquire(2, "x", 90, 100, 1339, 1100)
				t := int64(150)
				for range 3 {
					b.releaseUnknown(2, "x", t, t+1000, 1339)
					b.invoke(2, history.Acquire, t+1001, history.Value{Lock: "x"})
					b.fail(2, history.Acquire, t+1500, history.Value{Lock: "x"}, "not acquired")
					b.acquire(2, "x", t+1501, t+1510, 1339, t+2510)
					t += 2000
				}
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"tokens": 4, "duplicate_tokens": 0, "continued_holds": 3},
		},
		{
			name: "a re-grant after others were granted is a duplicate",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(1, "x", 90, 100, 396, 1100)
				b.releaseUnknown(1, "x", 150, 1150, 396)
				b.invoke(1, history.Acquire, 1151, history.Value{Lock: "x"})
				b.section(2, "x", 1200, 406, 0)
				b.section(3, "x", 1300, 415, 1)
				c := b.ok(1, history.Acquire, 1400, history.Value{Lock: "x", Token: tok(396), LockValue: lv(1, 396), ValidUntil: ms(2400)})
				return []want{{"duplicate-token", ops(a.done, c)}}, nil
			},
			verdict:   Invalid,
			stats:     map[string]float64{"tokens": 4, "duplicate_tokens": 1, "continued_holds": 0, "token_regressions": 0},
			explained: `token 396 of lock "x" was granted 2 times: to process 1 at 0.100s, process 1 at 1.400s; the grant to process 1 at 1.400s came after its release of unknown outcome, but 2 other grants of the lock came between, so it was not the same hold going on`,
		},
		{
			name: "a re-grant invoked after others were granted is a regression too",
			build: func(b *builder) ([]want, []want) {
				a := b.acquire(1, "x", 90, 100, 396, 1100)
				b.releaseUnknown(1, "x", 150, 1150, 396)
				b.section(2, "x", 1200, 406, 0)
				top := b.section(3, "x", 1300, 415, 1)
				c := b.acquire(1, "x", 1400, 1410, 396, 2410)
				return []want{
					{"token-regression", ops(top.acq.done, c.inv, c.done)},
					{"duplicate-token", ops(a.done, c.done)},
				}, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"tokens": 4, "duplicate_tokens": 1, "continued_holds": 0, "token_regressions": 1},
		},
		regranted("a re-grant after a release that succeeded is a duplicate", func(b *builder) int {
			b.release(0, "x", 150, 160, 7, lv(0, 7))
			return b.acquire(0, "x", 200, 210, 7, 1210).done
		}),
		regranted("a re-grant after a release that failed is a duplicate", func(b *builder) int {
			b.invoke(0, history.Release, 150, history.Value{Lock: "x", Token: tok(7), LockValue: lv(0, 7)})
			b.fail(0, history.Release, 160, history.Value{Lock: "x"}, "not held")
			return b.acquire(0, "x", 200, 210, 7, 1210).done
		}),
		regranted("a re-grant with another lock value is a duplicate", func(b *builder) int {
			b.releaseUnknown(0, "x", 150, 1150, 7)
			b.invoke(0, history.Acquire, 1160, history.Value{Lock: "x"})
			return b.ok(0, history.Acquire, 1170, history.Value{Lock: "x", Token: tok(7), LockValue: "another", ValidUntil: ms(2170)})
		}),
		regranted("a re-grant after an acquire of unknown outcome is a duplicate", func(b *builder) int {
			b.releaseUnknown(0, "x", 150, 1150, 7)
			b.invoke(0, history.Acquire, 1160, history.Value{Lock: "x"})
			b.info(0, history.Acquire, 2160, history.Value{Lock: "x"})
			return b.acquire(0, "x", 2170, 2180, 7, 3180).done
		}),
		regranted("a re-grant to a process killed after its release is a duplicate", func(b *builder) int {
			b.releaseUnknown(0, "x", 150, 1150, 7)
			b.invoke(history.NemesisProcess, "kill-client", 1155, history.Value{})
			b.ok(history.NemesisProcess, "kill-client", 1156, history.Value{Targets: []string{"p0"}})
			return b.acquire(0, "x", 1200, 1210, 7, 2210).done
		}),
		regranted("a second grant to a holder that never released is a duplicate", func(b *builder) int {
			return b.acquire(0, "x", 200, 210, 7, 1210).done
		}),
		{
			name: "tokens granted again after a reset are one duplicate anomaly per range",
			build: func(b *builder) ([]want, []want) {
				grant := b.grants(100)
				one := grant(0, 1)
				grant(1, 2)
				three := grant(2, 3)
				again := grant(0, 1) // the counter restarted
				grant(1, 2)
				grant(2, 3)
				nine := grant(0, 9)
				nineAgain := grant(1, 9) // an unrelated duplicate
				return []want{
					{"token-regression", ops(three.done, again.inv, again.done)},
					{"duplicate-token", ops(one.done, again.done)},
					{"duplicate-token", ops(nine.done, nineAgain.done)},
				}, nil
			},
			verdict: Invalid,
			stats:   map[string]float64{"tokens": 8, "token_regressions": 1, "regressed_grants": 2, "duplicate_tokens": 4},
		},
		{
			name: "no tokens",
			build: func(b *builder) ([]want, []want) {
				b.section(0, "x", 100, 0, 0)
				b.section(1, "x", 200, 0, 1)
				return nil, []want{{"no-tokens", ops()}}
			},
			verdict: Valid,
			stats:   map[string]float64{"tokens": 0},
		},
		notAGrant("info acquires are not granted tokens", func(b *builder) {
			b.invoke(1, history.Acquire, 200, history.Value{Lock: "x"})
			b.info(1, history.Acquire, 210, history.Value{Lock: "x", Token: history.Tok(3)})
		}),
		notAGrant("nemesis ops are ignored", func(b *builder) {
			b.invoke(history.NemesisProcess, history.Acquire, 200, history.Value{Lock: "x"})
			b.ok(history.NemesisProcess, history.Acquire, 210, history.Value{Lock: "x", Token: history.Tok(5)})
		}),
		{
			name: "two locks never conflict",
			build: func(b *builder) ([]want, []want) {
				b.acquire(0, "x", 90, 100, 5, 0)
				b.acquire(1, "y", 200, 210, 1, 0)
				b.acquire(2, "y", 300, 310, 5, 0)
				return nil, nil
			},
			verdict: Valid,
			stats:   map[string]float64{"tokens": 3},
		},
	}, func(builtCase) Checker { return FencingTokens{} })
}

// notAGrant returns the case of TestFencingTokens called name: between
// the grants of tokens 5 and 6 of lock x, at 0.1 s and 0.31 s, between
// appends an acquire that carries a token but is not a grant, so the check
// must count two tokens and find nothing wrong (the token it carries would
// be a regression or a duplicate were it a grant).
func notAGrant(name string, between func(b *builder)) builtCase {
	return builtCase{
		name: name,
		build: func(b *builder) ([]want, []want) {
			b.acquire(0, "x", 90, 100, 5, 0)
			between(b)
			b.acquire(2, "x", 300, 310, 6, 0)
			return nil, nil
		},
		verdict: Valid,
		stats:   map[string]float64{"tokens": 2},
	}
}

// grants returns grant, which appends a hold of lock x by p with token tk
// (acquired in 1 ms, with a lease of 50 ms, released after 10 ms) and
// returns its acquire: the first at start ms, each next 100 ms later.
func (b *builder) grants(start int64) func(p int, tk uint64) pair {
	t := start
	return func(p int, tk uint64) pair {
		a := b.acquire(p, "x", t, t+1, tk, t+50)
		b.release(p, "x", t+10, t+11, tk, lv(p, int(tk)))
		t += 100
		return a
	}
}

func TestDuplicateRangeIsExplained(t *testing.T) {
	var b builder
	grant := b.grants(100)
	for i, tk := range []uint64{1, 2, 3, 1, 2, 3} {
		grant(i%2, tk)
	}
	r := check(t, FencingTokens{}, b.h, Invalid)
	var dup []string
	for _, a := range r.Anomalies {
		if a.Kind == "duplicate-token" {
			dup = append(dup, a.Explanation)
		}
	}
	want := `token 1 of lock "x" was granted 2 times: to process 0 at 0.101s, process 1 at 0.401s, and tokens 2 to 3 were each granted more than once too`
	if len(dup) != 1 || dup[0] != want {
		t.Fatalf("duplicate-token explanations %q, want exactly\n%s", dup, want)
	}
}

// releaseUnknown appends a release by p of its hold with token t whose
// outcome is unknown (info at done: its deadline passed).
func (b *builder) releaseUnknown(p int, lock string, inv, done int64, t uint64) pair {
	i := b.invoke(p, history.Release, inv, history.Value{Lock: lock, Token: tok(t), LockValue: lv(p, int(t))})
	d := b.add(history.Info, p, history.Release, done, history.Value{Lock: lock, Token: tok(t), LockValue: lv(p, int(t))}, "context deadline exceeded")
	return pair{i, d}
}

// regranted is a case of TestFencingTokens in which process 0 is granted
// token 7 of lock "x" at 0.100s, and then regrant appends what the case
// names and a grant of token 7 again, and returns that grant's completion:
// the two grants must be one duplicate token, not a hold going on.
func regranted(name string, regrant func(b *builder) int) builtCase {
	return builtCase{
		name: name,
		build: func(b *builder) ([]want, []want) {
			a := b.acquire(0, "x", 90, 100, 7, 1100)
			c := regrant(b)
			return []want{{"duplicate-token", ops(a.done, c)}}, nil
		},
		verdict: Invalid,
		stats:   map[string]float64{"duplicate_tokens": 1, "continued_holds": 0},
	}
}
