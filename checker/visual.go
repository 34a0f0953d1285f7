package checker

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/history"
)

// Visualization is porcupine's picture of what a Linearizability check
// found, drawn from that check's own search (see CheckVisual): one
// partition per window it shows, each starting from the state the ops
// before the window leave.
type Visualization struct {
	// Ops is how many of the checker's Total ops it shows, in Windows of
	// the checker's windows.
	Ops, Total, Windows int
	// Note says what part of the ops it shows when that is not all of
	// them, or why it shows nothing.
	Note string

	model porcupine.Model
	info  porcupine.LinearizationInfo
	// sizes are the lengths of the partitions, the synthetic start op
	// included.
	sizes []int
}

// WriteHTML writes porcupine's page of the visualization to w. It fails
// when the visualization shows nothing (Ops is 0).
func (v *Visualization) WriteHTML(w io.Writer) error {
	if v.Ops == 0 {
		return fmt.Errorf("no visualization: %s", v.Note)
	}
	return porcupine.Visualize(v.model, v.info, w)
}

// Linearized reports whether porcupine linearized every window the
// visualization shows, from its start to its end.
func (v *Visualization) Linearized() bool {
	if v.Ops == 0 {
		return false
	}
	for i, part := range v.info.PartialLinearizations() {
		whole := false
		for _, seq := range part {
			whole = whole || len(seq) == v.sizes[i]
		}
		if !whole {
			return false
		}
	}
	return true
}

// picture returns the visualization of the windows idx of ws, whose
// porcupine search info is: total is the checker's number of ops, maxOps
// the most a picture shows, note what it says when it shows a violation.
func (c Linearizability) picture(info porcupine.LinearizationInfo, ws []window, idx []int, total, maxOps int, note string) *Visualization {
	noun := "acquire, release and death ops"
	if c.Model == RegisterModel {
		noun = "read and write ops"
	}
	v := &Visualization{Total: total, Windows: len(idx), Note: note,
		model: c.Model.porcupineModel(new(atomic.Bool)), info: info}
	last := int64(0)
	for _, i := range idx {
		v.Ops += len(ws[i].ops)
		v.sizes = append(v.sizes, len(ws[i].ops)+1)
		_, l := opSpan(ws[i].ops)
		last = max(last, l)
	}
	switch {
	case total == 0:
		v.Note = "the history has no " + noun + " to show"
	case v.Ops == 0:
		first := ws[0]
		for _, w := range ws {
			if w.ops[0].call < first.ops[0].call {
				first = w
			}
		}
		v.Note = fmt.Sprintf("the first window of the history has %d %s, more than the %d porcupine's visualization is made for", len(first.ops), noun, maxOps)
	case note == "" && v.Ops < total:
		v.Note = fmt.Sprintf("it shows the first %d of the %d %s (%d of the %d windows porcupine checked them in), up to %s",
			v.Ops, total, noun, len(idx), len(ws), secs(last))
	}
	if v.Ops == 0 {
		v.Windows, v.info = 0, porcupine.LinearizationInfo{}
	}
	return v
}

// RunVisual runs cs on h as Run does and returns, besides their results,
// the visualization of the first of them that is the porcupine mutex
// checker (a Linearizability of MutexModel), which it runs with
// CheckVisual(ctx, h, maxOps): the picture is of that check's own search.
// The visualization is nil when no such checker is among cs, or when it
// made none.
func RunVisual(ctx context.Context, h *history.Table, maxOps int, cs ...Checker) ([]Result, *Visualization) {
	var vis *Visualization
	cs = slices.Clone(cs)
	for i, c := range cs {
		if l, ok := c.(Linearizability); ok && l.Model == MutexModel {
			cs[i] = visualChecker{l, maxOps, &vis}
			break
		}
	}
	return Run(ctx, h, cs...), vis
}

// visualChecker is a Linearizability that keeps its visualization.
type visualChecker struct {
	Linearizability
	maxOps int
	vis    **Visualization
}

func (v visualChecker) Check(ctx context.Context, h *history.Table) Result {
	r, vis := v.CheckVisual(ctx, h, v.maxOps)
	*v.vis = vis
	return r
}
