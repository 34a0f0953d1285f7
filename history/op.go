// Package history holds the record of a test: the operations every process
// invoked and how each completed, as docs/history.md describes. It imports
// nothing of locktest but two leaves, a JSON scanner (internal/jsonscan)
// and the loop of its writer's fsyncs (internal/tick), so checkers and
// reports can read a stored history without the code that produced it.
package history

import (
	"encoding/json"
	"fmt"
	"time"
)

// Type says whether an op is an invocation or one of the three completions.
type Type string

// The op types, after Jepsen.
const (
	// Invoke starts an operation.
	Invoke Type = "invoke"
	// OK says the operation took effect.
	OK Type = "ok"
	// Fail says the operation certainly had no effect.
	Fail Type = "fail"
	// Info says the outcome is unknown: the operation may have taken effect at
	// any time after its invocation, or never.
	Info Type = "info"
	// Notice is an event, not an operation: a client's library told the
	// holder something at that moment (f "lost": its lease is gone, or may
	// be). It stands alone, with no invocation; a process may record one
	// while an op of its own is open, and it neither opens nor completes
	// an op.
	Notice Type = "notice"
)

// Valid reports whether t is one of the four op types.
func (t Type) Valid() bool {
	switch t {
	case Invoke, OK, Fail, Info, Notice:
		return true
	}
	return false
}

// NemesisProcess is the process id of the fault injector.
const NemesisProcess = -1

// NotSent begins the error of a fail whose request never reached the
// lock service (its connection could not even be dialled): the op
// certainly had no effect, and it says nothing of the lock's state either.
// The liveness checker does not count such a fail as a refusal.
const NotSent = "not sent: "

// The operation names of lock clients. Nemesis ops use the fault's name.
const (
	Acquire = "acquire"
	Release = "release"
	Claim   = "claim" // check-and-set mode: make this holder the resource's claimant
	Read    = "read"
	Write   = "write"
	// Lost is the f of a notice: the holder's library said its lease is
	// gone, or may be gone (the op's error gives the library's reason, its
	// value the lock and lock value when the client named them).
	Lost = "lost"
)

// Op is one line of a history: an invocation or a completion.
//
// Index is the op's position in the history (0-based) and is assigned by the
// recorder. Time is nanoseconds of CLOCK_MONOTONIC since the test's start;
// because every process on the host shares that clock, ops of different
// processes compare in real time. Ops are stored in the order the recorder
// received them, which may differ from Time order by the few milliseconds
// an op waits in its worker's event ring; checkers order by Time.
type Op struct {
	Index   int    `json:"index"`
	Type    Type   `json:"type"`
	Process int    `json:"process"`
	F       string `json:"f"`
	Time    int64  `json:"time"`
	Value   Value  `json:"value"`
	Error   string `json:"error,omitempty"`
}

// Value carries what an op is about. Fields that do not apply stay empty and
// are left out of the JSON.
type Value struct {
	// Lock is the lock name of acquire, release, claim, read and write ops.
	Lock string `json:"lock,omitempty"`
	// Token is the fencing token the lock service granted; nil where the
	// backend grants none.
	Token *uint64 `json:"token,omitempty"`
	// LockValue is the unique value the holder wrote into the lock service.
	LockValue string `json:"lock_value,omitempty"`
	// ValidUntil is the holder's own belief of when its lease ends, on the
	// history's clock (ns since start); 0 means the lock has no expiry.
	ValidUntil int64 `json:"valid_until,omitempty"`
	// N is the counter value a read returned or a write wrote.
	N *int64 `json:"n,omitempty"`
	// StoreTime is when the resource store received the request, on the
	// history's clock. Set on completions of read, write and claim.
	StoreTime int64 `json:"store_time,omitempty"`
	// Removed is, on a release completion, the lock value the release
	// removed from the lock service (a foreign value means the release
	// deleted another holder's lock).
	Removed string `json:"removed,omitempty"`
	// Node names the lock-service node that answered, where one did.
	Node string `json:"node,omitempty"`
	// Targets names what a nemesis op acted on: processes ("p3") or nodes.
	Targets []string `json:"targets,omitempty"`
	// Duration is, for a nemesis op, how long the fault is meant to last, in ns.
	Duration int64 `json:"duration,omitempty"`
	// Point is the pause point at which a client pause happened.
	Point string `json:"point,omitempty"`
	// Roles is, on the completion of a nemesis injection pinned to a role
	// (--target isolate=leader), the role each node it chose had when the
	// fault picked it: node name → role, as the cluster reported it then.
	Roles map[string]string `json:"roles,omitempty"`
}

// Tok returns a pointer to t, for Value.Token.
func Tok(t uint64) *uint64 { return &t }

// Num returns a pointer to n, for Value.N.
func Num(n int64) *int64 { return &n }

// IsNemesis reports whether the op belongs to the fault injector.
func (o Op) IsNemesis() bool { return o.Process == NemesisProcess }

// String renders the op in one line for logs and anomaly explanations.
func (o Op) String() string {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Sprintf("op %d", o.Index)
	}
	return string(b)
}

// History is a sequence of ops, indexed by Op.Index.
type History []Op

// ClientSpan is the time from the first client op to the last one,
// nemesis ops aside: the span of the workload, which rates are taken
// over. It is 0 for a history without client ops.
func (h History) ClientSpan() time.Duration {
	var first, last int64 = -1, 0
	for _, o := range h {
		if o.IsNemesis() {
			continue
		}
		if first < 0 || o.Time < first {
			first = o.Time
		}
		last = max(last, o.Time)
	}
	if first < 0 {
		return 0
	}
	return time.Duration(last - first)
}

// Pair links each invocation to its completion: Pair()[i] is the index of the
// completion of invoke i (or of the invoke of completion i), and -1 where the
// history ended before the op completed, and for a notice. It assumes a
// well-formed history, as the recorder and the decoder guarantee.
func (h History) Pair() []int {
	pair := make([]int, len(h))
	open := make(map[int]int)
	for i, o := range h {
		pair[i] = -1
		switch o.Type {
		case Invoke:
			open[o.Process] = i
			continue
		case Notice:
			continue
		}
		if inv, ok := open[o.Process]; ok {
			pair[i] = inv
			pair[inv] = i
			delete(open, o.Process)
		}
	}
	return pair
}
