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
			for _, r := range Run(context.Background(), b.h, MutualExclusion{}, Linearizable(MutexModel, time.Minute)) {
				if r.Valid != tc.want {
					t.Errorf("%s: verdict %s, want %s; anomalies %+v", r.Checker, r.Valid, tc.want, r.Anomalies)
				}
			}
		})
	}
}
