package backend

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPatienceGrowsOnlyForQueriesThatRanOut checks the limits a wait's
// queries get: a second at first; twice as long after a query that ran
// out of its own limit, up to 8 s; unchanged after a query that failed
// otherwise (refused, an error of the server's) or answered, and after
// one that the wait's own end cut off.
func TestPatienceGrowsOnlyForQueriesThatRanOut(t *testing.T) {
	ranOut := func(p *Patience, ctx context.Context) {
		qctx, done := p.Query(ctx)
		<-qctx.Done() // its own limit, a second
		done(qctx.Err())
	}
	var p Patience
	if got := p.Limit(); got != time.Second {
		t.Fatalf("first limit %v, want 1s", got)
	}
	qctx, done := p.Query(context.Background())
	if dl, ok := qctx.Deadline(); !ok || time.Until(dl) > time.Second {
		t.Errorf("the first query's deadline is %v away, want at most 1s", time.Until(dl))
	}
	done(errors.New("connection refused"))
	if got := p.Limit(); got != time.Second {
		t.Errorf("after a refusal the limit is %v, want 1s still", got)
	}
	_, done = p.Query(context.Background())
	done(nil)
	if got := p.Limit(); got != time.Second {
		t.Errorf("after an answer the limit is %v, want 1s still", got)
	}
	ranOut(&p, context.Background())
	if got := p.Limit(); got != 2*time.Second {
		t.Errorf("after a query that ran out the limit is %v, want 2s", got)
	}
	// The wait's own end is not the query's slowness.
	wctx, cancel := context.WithCancel(context.Background())
	qctx, done = p.Query(wctx)
	cancel()
	done(qctx.Err())
	if got := p.Limit(); got != 2*time.Second {
		t.Errorf("after the wait's end cut a query off the limit is %v, want 2s still", got)
	}
	for _, tc := range []struct {
		limit  time.Duration
		ranOut bool
		want   time.Duration
	}{
		{2 * time.Second, true, 4 * time.Second},
		{4 * time.Second, true, 8 * time.Second},
		{8 * time.Second, true, 8 * time.Second},
		{8 * time.Second, false, 8 * time.Second},
	} {
		if got := nextLimit(tc.limit, tc.ranOut); got != tc.want {
			t.Errorf("after a query of %v that ran out %v the limit is %v, want %v", tc.limit, tc.ranOut, got, tc.want)
		}
	}
}
