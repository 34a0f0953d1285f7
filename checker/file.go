package checker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/locktest/locktest/history"
)

// FileFacts are what a first read of a history file finds, which a check
// that streams the file must know before it reads it again.
type FileFacts struct {
	// Ops is the number of ops in the file.
	Ops int
	// Slack is the most, in ns, by which an op's time is below the highest
	// time of the ops before it in the file: how far out of time order the
	// file is (a worker's ops wait a few ms in its ring, or in a stopped
	// worker).
	Slack int64
	// Leases says that an acquire ok carries a valid_until (Leases).
	Leases bool
	// Notices counts the lost-lock notices.
	Notices int
	// Register are the facts of StreamRegister.
	Register RegisterFacts
}

// Streamable says why a history of these facts cannot be checked by
// DecideFile, or returns nil when it can: the porcupine mutex model of
// session locks cuts its windows with what the whole history shows of
// each process's releases and deaths, and the statistics of lost-lock
// notices pair each notice with any hold of its process; both are checked
// with the history held whole (Decide).
func (f FileFacts) Streamable() error {
	switch {
	case !f.Leases && f.Ops > 0:
		return fmt.Errorf("its locks are not leases, and the porcupine mutex model of session locks needs the whole history")
	case f.Notices > 0:
		return fmt.Errorf("it has %d lost-lock notices, whose statistics need the whole history", f.Notices)
	}
	return nil
}

// ScanFacts reads the history file at path for its FileFacts: once, and
// once more for the reads of the values that writes of unknown outcome
// wrote, when there are such writes. Its memory is a few chunks of the
// file and those values. Errors are history.Scan's.
func ScanFacts(ctx context.Context, path string) (FileFacts, error) {
	var ff FileFacts
	high := int64(-1 << 63)
	invs := invocations{}
	unknown := map[string]map[int64]bool{}
	unknownWrite := func(inv history.Op) {
		if inv.F != history.Write || inv.Value.N == nil {
			return
		}
		if unknown[inv.Value.Lock] == nil {
			unknown[inv.Value.Lock] = map[int64]bool{}
		}
		unknown[inv.Value.Lock][*inv.Value.N] = true
	}
	n, err := history.Scan(ctx, path, func(op *history.Op) error {
		if op.Time < high {
			ff.Slack = max(ff.Slack, high-op.Time)
		}
		high = max(high, op.Time)
		if op.Type == history.OK && op.F == history.Acquire && op.Value.ValidUntil != 0 && op.Process >= 0 {
			ff.Leases = true
		}
		if op.Process < 0 {
			return nil
		}
		if op.Type == history.Notice {
			if op.F == history.Lost {
				ff.Notices++
			}
			return nil
		}
		// A write is of unknown outcome when it completed info, or never
		// completed: its process invoked again while it was open.
		if inv, ok, _ := invs.pair(*op); ok && (op.Type == history.Invoke || op.Type == history.Info) {
			unknownWrite(inv)
		}
		return nil
	})
	ff.Ops = n
	if err != nil {
		return ff, err
	}
	for _, inv := range invs {
		if inv.open {
			unknownWrite(inv.op)
		}
	}
	ff.Register = RegisterFacts{}
	if len(unknown) == 0 {
		return ff, nil
	}
	clear(invs)
	_, err = history.Scan(ctx, path, func(op *history.Op) error {
		if op.Process < 0 || op.Type == history.Notice {
			return nil
		}
		inv, ok, _ := invs.pair(*op)
		if !ok || op.Type != history.OK || inv.F != history.Read || op.Value.N == nil || !unknown[inv.Value.Lock][*op.Value.N] {
			return nil
		}
		l := inv.Value.Lock
		if ff.Register[l] == nil {
			ff.Register[l] = map[int64]int64{}
		}
		v, ret := *op.Value.N, max(op.Time, inv.Time)
		if r, seen := ff.Register[l][v]; !seen || ret > r {
			ff.Register[l][v] = ret
		}
		return nil
	})
	return ff, err
}

// DecideFile decides the run of facts whose history is the file at path,
// as Decide does, without holding the history: it reads the file once
// more, in its order, into the streaming checkers (StreamMutex,
// StreamResource, StreamFencing, StreamLiveness and StreamRegister, which
// put the ops back in time order within ff.Slack), and sums up the run as
// it goes. ff are the file's facts (ScanFacts), which must be Streamable.
// Its memory is what the checkers keep open, not the history's length.
// The Decision has no Visual. tail are ops to check after the file's (the
// ops a recorder kept after its file failed).
func DecideFile(ctx context.Context, path string, facts RunFacts, ff FileFacts, tail []history.Op) (Decision, error) {
	if err := ff.Streamable(); err != nil {
		return Decision{}, err
	}
	lin := Linearizability{Model: RegisterModel, Timeout: DefaultLinearizableTimeout}
	ss := []Stream{NewStreamMutex(), NewStreamResource(facts.Mode), NewStreamFencing(), NewStreamLiveness(Liveness{}),
		NewStreamRegister(ctx, lin, ff.Register)}
	all := NewFileStreams(ff.Slack, ss...)
	sum := newSummary(facts.Faults)
	start := time.Now()
	add := func(op *history.Op) error {
		sum.add(op)
		all.Add(*op)
		return nil
	}
	if _, err := history.Scan(ctx, path, add); err != nil {
		return Decision{}, err
	}
	for i := range tail {
		_ = add(&tail[i])
	}
	all.Finish()
	elapsed := time.Since(start)
	rs := make([]Result, len(ss))
	for i, s := range ss {
		// Each Finish names its checker, as the Checkers do.
		rs[i] = s.Finish()
		rs[i].Elapsed = int64(elapsed)
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return judge(facts, rs, sum.stats(), sum.neverApplied()), nil
}

// summary is Summarize and neverApplied, on ops read one at a time.
type summary struct {
	faults         []string
	s              map[string]float64
	last           int64
	n              int
	tried, applied map[string]bool
}

func newSummary(faults []string) *summary {
	return &summary{faults: FaultParts(faults), s: map[string]float64{}, tried: map[string]bool{}, applied: map[string]bool{}}
}

func (m *summary) add(op *history.Op) {
	m.n++
	m.last = op.Time
	if op.Process == history.NemesisProcess {
		if f := faultOf(op.F); slices.Contains(m.faults, f) {
			switch op.Type {
			case history.Invoke:
				m.tried[f] = true
			case history.OK:
				m.applied[f] = true
			}
		}
	}
	if op.Type != history.OK {
		return
	}
	switch {
	case op.Process == history.NemesisProcess && slices.Contains(m.faults, faultOf(op.F)):
		m.s["faults_injected"]++
	case op.F == history.Acquire:
		m.s["critical_sections"]++
	}
}

// stats is Summarize's.
func (m *summary) stats() map[string]float64 {
	out := map[string]float64{"ops": float64(m.n)}
	for k, v := range m.s {
		out[k] = v
	}
	if m.n > 0 {
		out["seconds"] = float64(m.last) / 1e9
	}
	return out
}

// neverApplied is neverApplied's.
func (m *summary) neverApplied() []string {
	var out []string
	for _, f := range m.faults {
		if m.tried[f] && !m.applied[f] {
			out = append(out, fmt.Sprintf("fault %s was tried but never applied (see its failed ops)", f))
		}
	}
	return out
}
