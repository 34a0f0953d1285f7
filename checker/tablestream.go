package checker

import (
	"context"

	"github.com/locktest/locktest/history"
)

// streamTable checks the ops of h with the streaming checker s and
// returns s's Result, named name, and whether h holds lost-lock notices.
// It feeds them in h's order through a reorder buffer whose slack is how
// far out of time order h is, so that s reads them by time, then index.
// It returns unknown when ctx is done first.
func streamTable(ctx context.Context, h *history.Table, name string, s Stream) (r Result, notices bool) {
	var slack, high int64
	for i := range h.Len() {
		t := h.Time(i)
		if i > 0 {
			slack = max(slack, high-t)
		}
		high = max(high, t)
		notices = notices || h.Type(i) == history.Notice && h.F(i) == history.Lost
	}
	all := NewFileStreams(slack, s)
	for i := range h.Len() {
		if err := stopped(ctx, i); err != nil {
			return cancelled(name, err), notices
		}
		all.Add(h.At(i))
	}
	all.Finish()
	r = s.Finish()
	r.Checker = name
	return r, notices
}
