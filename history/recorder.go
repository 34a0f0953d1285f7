package history

import (
	"errors"
	"fmt"
	"sync"
)

// ErrDoubleInvoke is returned when a process invokes while its previous op is
// still open.
var ErrDoubleInvoke = errors.New("double invoke")

// ErrNoInvoke is returned for a completion whose process has no open invoke,
// or whose f differs from the open invoke's.
var ErrNoInvoke = errors.New("completion without invoke")

// Sink receives every op the recorder accepts, in order.
type Sink interface {
	Append(Op) error
}

// Recorder builds a well-formed history from ops that arrive concurrently. It
// assigns each op its index, refuses a second invoke of a process whose op is
// still open and a completion that matches no open invoke, and hands every
// accepted op to its sink (if any) before Record returns. Once the sink
// fails, no later op is handed to it, so what the sink holds is always a
// prefix of the history (see SinkErr). It is safe for concurrent use.
//
// A recorder without a sink keeps the whole history in memory. One with a
// sink keeps only what it needs to admit the next op — the open invocation
// of each process — so its memory does not grow with the run; after a sink
// failure it also keeps the ops the sink did not take, which History
// returns, so nothing recorded is lost.
type Recorder struct {
	mu      sync.Mutex
	sink    Sink
	sinkErr error // the sink's first failure
	ops     History
	n       int        // ops recorded
	open    map[int]Op // process → its open invoke
}

// NewRecorder returns a recorder that appends to sink; sink may be nil.
func NewRecorder(sink Sink) *Recorder {
	return &Recorder{sink: sink, open: make(map[int]Op)}
}

// Record validates op, gives it the next index, keeps it (see Recorder)
// and passes it to the sink. A completion gets the process and f of its
// invocation checked. On error nothing is recorded, except a sink failure,
// which is returned (once: by the Record whose op the sink failed to take)
// after the op was kept in memory.
func (r *Recorder) Record(op Op) (Op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.admit(op); err != nil {
		return op, err
	}
	op.Index = r.n
	r.n++
	switch op.Type {
	case Invoke:
		r.open[op.Process] = op
	case Notice:
	default:
		delete(r.open, op.Process)
	}
	if r.sink == nil || r.sinkErr != nil {
		r.ops = append(r.ops, op)
		return op, nil
	}
	if err := r.sink.Append(op); err != nil {
		r.sinkErr = fmt.Errorf("history sink: %w", err)
		r.ops = append(r.ops, op)
		return op, r.sinkErr
	}
	return op, nil
}

// SinkErr returns the sink's first failure, or nil: the ops from the one it
// failed to take on are in memory only (History).
func (r *Recorder) SinkErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sinkErr
}

func (r *Recorder) admit(op Op) error {
	inv, isOpen := r.open[op.Process]
	return admit(&op, &inv, isOpen)
}

// admit checks op against the open invocation of its process, inv when
// isOpen: a known type, an f, no second invoke, a completion of the f
// invoked.
func admit(op, inv *Op, isOpen bool) error {
	if !op.Type.Valid() {
		return fmt.Errorf("unknown op type %q", op.Type)
	}
	if op.F == "" {
		return errors.New("op without f")
	}
	if op.Type == Notice {
		return nil
	}
	if op.Type == Invoke {
		if isOpen {
			return fmt.Errorf("%w: process %d invokes %s while op %d (%s) is open",
				ErrDoubleInvoke, op.Process, op.F, inv.Index, inv.F)
		}
		return nil
	}
	if !isOpen {
		return fmt.Errorf("%w: process %d completes %s with %s", ErrNoInvoke, op.Process, op.F, op.Type)
	}
	if inv.F != op.F {
		return fmt.Errorf("%w: process %d completes %s but invoked %s (op %d)",
			ErrNoInvoke, op.Process, op.F, inv.F, inv.Index)
	}
	return nil
}

// Open returns the open invocation of process, if any.
func (r *Recorder) Open(process int) (Op, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op, ok := r.open[process]
	return op, ok
}

// History returns a copy of the ops kept in memory: every op recorded, for
// a recorder without a sink; for one with a sink, the ops after the sink
// failed (none while it works), which follow what the sink holds.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(History(nil), r.ops...)
}

// Len returns the number of ops recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
