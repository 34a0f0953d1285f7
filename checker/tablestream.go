package checker

import (
	"context"
	"slices"

	"github.com/locktest/locktest/history"
)

// streamTable checks the ops of h with the streaming checker s, a fresh
// one of this package, and returns its Result, named name, and whether h
// holds lost-lock notices. It reads the ops in time order (then index),
// as a reorder buffer releases them, without one: every op of a time is
// read once an op of a later time has come, and s decides after each op
// what the ops read so far let it decide. It returns unknown when ctx is
// done first.
func streamTable(ctx context.Context, h *history.Table, name string, s Stream) (r Result, notices bool) {
	order, notices := sharedOrder(ctx, h)
	o := s.(ordered)
	rd := *o.reorderOf()
	rd.slack = 0
	// now are the ops of the latest time, not read yet.
	var now []history.Op
	for step, k := range order {
		if err := stopped(ctx, step); err != nil {
			return cancelled(name, err), notices
		}
		if len(now) > 0 && k.t > now[0].Time {
			for _, op := range now {
				o.read(op)
			}
			rd.released = now[0].Time
			now = now[:0]
		}
		op := h.At(int(k.pos))
		now = append(now, op)
		rd.seen = k.t
		o.step()
	}
	for _, op := range now {
		o.read(op)
	}
	r = s.Finish()
	r.Checker = name
	return r, notices
}

// sharedOrder returns the ops of h in time order (then index, then
// position) and whether h holds lost-lock notices. The checkers of one
// Run share it (sharedView), so the streaming checkers build it once
// between them; the slice is only read.
func sharedOrder(ctx context.Context, h *history.Table) ([]opKey, bool) {
	if sv, shared := ctx.Value(viewKey{}).(*sharedView); shared && sv.h == h {
		sv.orderOnce.Do(func() { sv.order, sv.notices = timeOrder(h) })
		return sv.order, sv.notices
	}
	return timeOrder(h)
}

// timeOrder returns the ops of h in time order (then index, then
// position), and whether h holds lost-lock notices.
func timeOrder(h *history.Table) (order []opKey, notices bool) {
	order = make([]opKey, h.Len())
	for i := range order {
		order[i] = opKey{t: h.Time(i), pos: int32(i)}
		notices = notices || h.Type(i) == history.Notice && h.F(i) == history.Lost
	}
	if byTime := compareKeys(h); !slices.IsSortedFunc(order, byTime) {
		slices.SortFunc(order, byTime)
	}
	return order, notices
}
