package checker

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/testkit/genhist"
)

func TestAll(t *testing.T) {
	var names []string
	for _, c := range All() {
		names = append(names, c.Name())
	}
	if want := []string{"mutual-exclusion", "resource", "fencing-tokens", "liveness"}; !slices.Equal(names, want) {
		t.Fatalf("All() names %v, want %v", names, want)
	}
	rs := Run(context.Background(), history.NewTable(cleanHistory()), All()...)
	for _, r := range rs {
		if r.Valid != Valid || len(r.Anomalies) != 0 {
			t.Errorf("%s on the clean history: %s %+v", r.Checker, r.Valid, r.Anomalies)
		}
	}
	if v := Overall(rs); v != Valid {
		t.Errorf("Overall = %s, want %s", v, Valid)
	}
}

func TestForMode(t *testing.T) {
	if got := All()[1]; got != (Resource{}) {
		t.Errorf("All()[1] = %#v, want the zero Resource", got)
	}
	for _, mode := range []string{"", "none", "fenced", "check-and-set", "etcd-guarded"} {
		cs := ForMode(mode)
		var names []string
		for _, c := range cs {
			names = append(names, c.Name())
		}
		if want := []string{"mutual-exclusion", "resource", "fencing-tokens", "liveness"}; !slices.Equal(names, want) {
			t.Errorf("ForMode(%q) names %v, want %v", mode, names, want)
		}
		if r, ok := cs[1].(Resource); !ok || r.Mode != mode {
			t.Errorf("ForMode(%q)[1] = %#v, want Resource{Mode: %q}", mode, cs[1], mode)
		}
	}
}

func TestFor(t *testing.T) {
	for _, tt := range []struct {
		mode   string
		leases bool
		want   []string
	}{
		{"fenced", true, []string{"mutual-exclusion", "resource", "fencing-tokens", "liveness", "linearizable-register"}},
		{"none", false, []string{"mutual-exclusion", "resource", "fencing-tokens", "liveness", "linearizable-mutex", "linearizable-register"}},
		{"check-and-set", true, []string{"mutual-exclusion", "resource", "fencing-tokens", "liveness", "linearizable-register"}},
		{"etcd-guarded", true, []string{"mutual-exclusion", "resource", "fencing-tokens", "liveness", "linearizable-register"}},
	} {
		var names []string
		for _, c := range For(tt.mode, tt.leases) {
			names = append(names, c.Name())
		}
		if !slices.Equal(names, tt.want) {
			t.Errorf("For(%q, %v) names %v, want %v", tt.mode, tt.leases, names, tt.want)
		}
		if r := For(tt.mode, tt.leases)[1].(Resource); r.Mode != tt.mode {
			t.Errorf("For(%q, %v)[1] = %#v", tt.mode, tt.leases, r)
		}
	}
	for i, m := range []Model{MutexModel, RegisterModel} {
		lin := For("", false)[4+i].(Linearizability)
		if lin.Model != m || lin.Timeout != DefaultLinearizableTimeout {
			t.Errorf("For adds %#v, want the %s model with the default timeout", lin, m)
		}
	}
}

func TestLeases(t *testing.T) {
	if !Leases(history.NewTable(cleanHistory())) {
		t.Error("Leases(history.NewTable(clean history with valid_until)) = false")
	}
	var b builder
	b.acquire(0, "x", 1, 2, 0, 0)
	if Leases(history.NewTable(b.h)) {
		t.Error("Leases(history.NewTable(session-lock history)) = true")
	}
}

func TestEmptyHistory(t *testing.T) {
	for _, r := range Run(context.Background(), history.NewTable(nil), All()...) {
		if r.Valid != Valid {
			t.Errorf("%s on an empty history: %s %+v", r.Checker, r.Valid, r)
		}
	}
}

// panicky is a checker that panics.
type panicky struct{}

func (panicky) Name() string { return "panicky" }
func (panicky) Check(context.Context, *history.Table) Result {
	panic("boom")
}

func TestRunTurnsAPanicIntoUnknown(t *testing.T) {
	rs := Run(context.Background(), history.NewTable(cleanHistory()), panicky{}, MutualExclusion{})
	if len(rs) != 2 {
		t.Fatalf("got %d results, want 2", len(rs))
	}
	if rs[0].Checker != "panicky" || rs[0].Valid != Unknown || !strings.Contains(rs[0].Error, "boom") {
		t.Errorf("panicking checker gave %+v, want unknown with the panic in Error", rs[0])
	}
	if rs[1].Valid != Valid {
		t.Errorf("the checker after the panic gave %s, want %s", rs[1].Valid, Valid)
	}
	if v := Overall(rs); v != Unknown {
		t.Errorf("Overall = %s, want %s", v, Unknown)
	}
}

func TestCancelledContextGivesUnknown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range All() {
		r := c.Check(ctx, history.NewTable(cleanHistory()))
		if r.Valid != Unknown || r.Error == "" {
			t.Errorf("%s with a cancelled ctx: %s %q, want unknown with an error", c.Name(), r.Valid, r.Error)
		}
	}
	for _, r := range Run(ctx, history.NewTable(cleanHistory()), All()...) {
		if r.Valid != Unknown {
			t.Errorf("Run: %s with a cancelled ctx: %s, want unknown", r.Checker, r.Valid)
		}
	}
}

// doneAfter is a context whose Err turns to Canceled after it has been
// asked n times, so that a check is cancelled part way through.
type doneAfter struct {
	context.Context
	n atomic.Int64
}

func (c *doneAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestCancelledMidCheckGivesUnknown(t *testing.T) {
	h := genhist.Valid(7, 50_000, 16)
	for _, c := range All() {
		// Count how often the check looks at ctx, then cancel it at many
		// of those looks, the last included.
		const lots = 1 << 40
		counter := &doneAfter{Context: context.Background()}
		counter.n.Store(lots)
		if r := c.Check(counter, history.NewTable(h)); r.Valid != Valid {
			t.Fatalf("%s: %s %v", c.Name(), r.Valid, r.Anomalies)
		}
		looks := lots - counter.n.Load()
		if looks < 10 {
			t.Errorf("%s looked at ctx only %d times over %d ops", c.Name(), looks, len(h))
		}
		for n := int64(0); n < looks; n += max(1, looks/16) {
			for _, n := range []int64{n, looks - 1 - n} {
				ctx := &doneAfter{Context: context.Background()}
				ctx.n.Store(n)
				r := c.Check(ctx, history.NewTable(h))
				if r.Valid != Unknown || !strings.Contains(r.Error, "cancel") {
					t.Errorf("%s cancelled after %d of %d looks at ctx: %s %q, want unknown", c.Name(), n, looks, r.Valid, r.Error)
				}
			}
		}
	}
}

func TestSecs(t *testing.T) {
	for ns, want := range map[int64]string{0: "0.000s", 12_403_000_000: "12.403s", 900_000_000: "0.900s", 1_999_600_000: "2.000s"} {
		if got := secs(ns); got != want {
			t.Errorf("secs(%d) = %q, want %q", ns, got, want)
		}
	}
}
