package reports

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/history"
)

// LinearizabilityFile is porcupine's own visualization of a run's mutex
// ops, written next to report.html when the linearizability checker ran.
const LinearizabilityFile = "linearizability.html"

// maxVisualizedOps is the largest number of mutex ops porcupine's
// visualization is made for: its page grows with the history (20,000 ops
// make about 4.5 MB, which Chromium opens in about 3.5 s), and a larger one
// no longer opens in reasonable time.
const maxVisualizedOps = 20_000

// minVisualizedPrefix is the shortest prefix of a longer history worth a
// page.
const minVisualizedPrefix = 1000

// visualizeTimeout bounds porcupine's search for the visualization.
const visualizeTimeout = 20 * time.Second

// mutexIn is one mutex op for the visualization.
type mutexIn struct {
	acquire bool
	proc    int
	lock    string
}

// mutexOut is its outcome; unknown means it may or may not have taken
// effect.
type mutexOut struct{ unknown bool }

// mutexModel is the model of checker.MutexModel, partitioned by lock and
// described for people: a non-reentrant lock per name, whose state is the
// holding process (-1: free).
var mutexModel = porcupine.NondeterministicModel{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byLock := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range ops {
			l := op.Input.(mutexIn).lock
			if _, ok := byLock[l]; !ok {
				order = append(order, l)
			}
			byLock[l] = append(byLock[l], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, l := range order {
			out = append(out, byLock[l])
		}
		return out
	},
	Init: func() []any { return []any{-1} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(int), input.(mutexIn), output.(mutexOut)
		switch {
		case in.acquire && s == -1 && out.unknown:
			return []any{s, in.proc}
		case in.acquire && s == -1:
			return []any{in.proc}
		case !in.acquire && s == in.proc && out.unknown:
			return []any{s, -1}
		case !in.acquire && s == in.proc:
			return []any{-1}
		case out.unknown:
			return []any{s}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(mutexIn), output.(mutexOut)
		f := "release"
		if in.acquire {
			f = "acquire"
		}
		res := "ok"
		if out.unknown {
			res = "unknown"
		}
		return fmt.Sprintf("p%d %s(%s) -> %s", in.proc, f, in.lock, res)
	},
	DescribeState: func(state any) string {
		if s := state.(int); s >= 0 {
			return fmt.Sprintf("held by p%d", s)
		}
		return "free"
	},
}

// mutexOps returns the acquire and release ops of h as porcupine
// operations, as checker.Linearizability reads them: failed ops are left
// out, and one of unknown outcome may take effect any time up to the end
// of the history. Metadata is the invocation's history index.
func mutexOps(h history.History) []porcupine.Operation {
	pair := h.Pair()
	var end int64
	for i := range h {
		end = max(end, h[i].Time)
	}
	var ops []porcupine.Operation
	for i := range h {
		o := &h[i]
		if o.Process < 0 || o.Type != history.Invoke || (o.F != history.Acquire && o.F != history.Release) {
			continue
		}
		ret, unknown := end+1, true
		if c := pair[i]; c >= 0 {
			switch h[c].Type {
			case history.Fail:
				continue
			case history.OK:
				ret, unknown = max(h[c].Time, o.Time), false
			}
		}
		ops = append(ops, porcupine.Operation{ClientId: o.Process, Call: o.Time, Return: ret,
			Input: mutexIn{acquire: o.F == history.Acquire, proc: o.Process, lock: o.Value.Lock}, Output: mutexOut{unknown: unknown},
			Metadata: i})
	}
	return ops
}

// visualizeLinearizability renders porcupine's visualization of h's mutex
// ops. A history of more than maxVisualizedOps such ops is cut: the page
// shows its longest prefix of at most maxVisualizedOps ops (in invocation
// order) after which every op was invoked when every op of the prefix had
// returned, so that the prefix is linearizable if the history is; note
// says so. When there is no such prefix there is no page, and note says
// why.
func visualizeLinearizability(h history.History) (page []byte, note string, err error) {
	ops := mutexOps(h)
	if len(ops) == 0 {
		return nil, "the history has no acquire or release to show", nil
	}
	if len(ops) > maxVisualizedOps {
		slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		k := quiescentCut(ops, maxVisualizedOps)
		if k < minVisualizedPrefix {
			return nil, fmt.Sprintf("the history has %d acquire and release ops, more than the %d porcupine's visualization is made for, and no prefix of %d to %d ops ends with every op returned", len(ops), maxVisualizedOps, minVisualizedPrefix, maxVisualizedOps), nil
		}
		note = fmt.Sprintf("it shows the first %d of the %d acquire and release ops, up to %s", k, len(ops), secsLabel(us(ops[k].Call), 1000))
		ops = ops[:k]
	}
	m := mutexModel
	m.DescribeOperationMetadata = func(info any) string { return fmt.Sprintf("history op %v", info) }
	model := m.ToModel()
	_, info := porcupine.CheckOperationsVerbose(model, ops, visualizeTimeout)
	var buf bytes.Buffer
	if err := porcupine.Visualize(model, info, &buf); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), note, nil
}

// quiescentCut returns the largest k ≤ limit such that every op of the
// call-ordered ops[:k] returned before ops[k] was invoked, or 0.
func quiescentCut(ops []porcupine.Operation, limit int) int {
	best := 0
	maxRet := int64(math.MinInt64)
	for k := 0; k < len(ops) && k <= limit; k++ {
		if k > 0 && maxRet < ops[k].Call {
			best = k
		}
		maxRet = max(maxRet, ops[k].Return)
	}
	return best
}
