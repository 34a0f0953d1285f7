package checker

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
)

// TestAKilledSessionHolderHoldsNothing: a session lock (no valid_until)
// whose holder is killed is taken over by another process. The dead
// process's hold ends at its death, so the takeover is no overlap; without
// the evidence of the death it is one.
func TestAKilledSessionHolderHoldsNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		death func(b *builder)
		want  Verdict
	}{
		{"no evidence of death", func(b *builder) {}, Invalid},
		{"kill-client names the holder", func(b *builder) {
			b.invoke(history.NemesisProcess, "kill-client", 4, history.Value{})
			b.ok(history.NemesisProcess, "kill-client", 5, history.Value{Targets: []string{"p1"}})
		}, Valid},
		{"a kill-client that failed proves nothing", func(b *builder) {
			b.invoke(history.NemesisProcess, "kill-client", 4, history.Value{})
			b.fail(history.NemesisProcess, "kill-client", 5, history.Value{Targets: []string{"p1"}}, "not applied")
		}, Invalid},
		{"kill-client names another process", func(b *builder) {
			b.invoke(history.NemesisProcess, "kill-client", 4, history.Value{})
			b.ok(history.NemesisProcess, "kill-client", 5, history.Value{Targets: []string{"p11"}})
		}, Invalid},
		{"the pool completed its open op as worker exited", func(b *builder) {
			b.invoke(1, history.Read, 3, history.Value{Lock: "x"})
			b.add(history.Info, 1, history.Read, 5, history.Value{Lock: "x"}, "worker exited: signal: killed")
		}, Valid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			b.acquire(1, "x", 1, 2, 1, 0)
			tc.death(&b)
			b.acquire(2, "x", 6, 7, 2, 0)
			// The fast checker and the porcupine mutex model agree.
			for _, r := range Run(context.Background(), history.NewTable(b.h), MutualExclusion{}, Linearizable(MutexModel, time.Minute)) {
				if r.Valid != tc.want {
					t.Errorf("%s: verdict %s, want %s; anomalies %+v", r.Checker, r.Valid, tc.want, r.Anomalies)
				}
			}
		})
	}
}

// TestAHolderKilledAtItsPausePoint: kill-client --kill-holder begins (its
// invocation) before its victim's acquire completes — the kill waits for the
// victim to reach the pause point after the acquire — so the victim was
// alive at its acquire ok, after the kill began. Its death is no earlier
// than that ok: its hold is empty, and a takeover after the kill is no
// overlap for either checker. (Found by the backend matrix: mysql-for-update
// killed at after-acquire gave thousands of false overlapping holds.)
func TestAHolderKilledAtItsPausePoint(t *testing.T) {
	var b builder
	b.acquire(2, "x", 0, 1, 1, 0)
	b.invoke(2, history.Release, 1, history.Value{Lock: "x"})
	b.ok(2, history.Release, 2, history.Value{Lock: "x"})
	b.invoke(history.NemesisProcess, "kill-client", 3, history.Value{})
	b.acquire(1, "x", 4, 5, 2, 0) // the victim's acquire, after the kill began
	b.invoke(3, history.Acquire, 6, history.Value{Lock: "x"})
	b.ok(history.NemesisProcess, "kill-client", 8, history.Value{Targets: []string{"p1"}})
	b.ok(3, history.Acquire, 9, history.Value{Lock: "x", Token: tok(3), LockValue: lv(3, 3)})
	for _, r := range Run(context.Background(), history.NewTable(b.h), MutualExclusion{}, Linearizable(MutexModel, time.Minute)) {
		if r.Valid != Valid {
			t.Errorf("%s: verdict %s, want valid; anomalies %+v", r.Checker, r.Valid, r.Anomalies)
		}
	}
	// The same takeover before the victim's acquire ok would be a real
	// overlap: the victim was alive and holding then.
	var c builder
	c.invoke(history.NemesisProcess, "kill-client", 0, history.Value{})
	c.acquire(1, "x", 1, 2, 1, 0)
	c.acquire(3, "x", 2, 3, 2, 0)
	c.read(1, "x", 4, 5, 0) // p1 still alive, holding, after p3's acquire
	c.ok(history.NemesisProcess, "kill-client", 8, history.Value{Targets: []string{"p1"}})
	for _, r := range Run(context.Background(), history.NewTable(c.h), MutualExclusion{}, Linearizable(MutexModel, time.Minute)) {
		if r.Valid != Invalid {
			t.Errorf("%s: verdict %s, want invalid: p1 held the lock while alive; anomalies %+v", r.Checker, r.Valid, r.Anomalies)
		}
	}
}
