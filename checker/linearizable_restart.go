package checker

import (
	"math"
	"slices"

	"github.com/locktest/locktest/history"
)

// This file is what a server restart proves to the mutex model of session
// locks that live on one server (Linearizability.ServerSessions: a single
// MariaDB or PostgreSQL server, whose GET_LOCK, advisory and row locks
// belong to the server's sessions, in its memory).
//
// A crash is the ok completion of a node fault that kills the server and
// that restart-node heals (kill-node, kill-on-grant, power-loss). Its restart is the
// invocation of the first restart-node op after it, when no other
// restart-node was invoked between them: from the kill until then no server
// runs, so no session is opened. Hence every session opened before a
// restart R that follows a crash K was opened before the server died in K
// and died with it, and every effect of it happened before R. An op that
// completed before R (a client op of unknown outcome: its info; a process's
// death: its time) ran on such a session, or on none: what it did, it did
// before R, and it is over at R. Two consequences, each sound:
//
//   - An acquire of unknown outcome X of process p that completed before R
//     is left out (like the idle acquires of dropIdleAcquires) when every
//     release ok of p that could end its effect is clean. Only a release
//     invoked before R could: the crash ended X's effect, if it had one,
//     before the server ran again, and a release invoked after R talks to
//     the new server. An effect ended by the crash, not by a release ok, is
//     as good as none: while X was pending p did nothing, and whatever
//     others did with the lock taken by p's dead session is as legal with
//     it free.
//   - A release of unknown outcome Y of process p that completed before R,
//     when p has no acquire ok invoked after Y and before R, becomes a
//     death of p between Y's invocation and R: the lock p was releasing
//     was a lock of its session on the dead server, so by R it was free,
//     whether Y freed it or the crash did, and p, which had begun to
//     release it, believed it no longer held it. (A holder that did not
//     release its lock before the crash is not touched: it still believes
//     it holds the lock, and a grant to another after the restart is the
//     violation the mutex model is there to find.)
//
// A restart proves nothing of an op still open at R (it may have opened a
// session on the new server), and nothing when no crash completed ok
// before it.

// endedRelease marks, in linInput.n, a death that is a release of unknown
// outcome ended by a restart.
const endedRelease = 1

// restartOp is the f of the op that heals the server-killing faults.
const restartOp = "restart-node"

// restarts returns the restarts of h: the times, ascending, of the
// restart-node invocations, each with whether it follows a crash (the ok of
// a node fault healed by restart-node that completed after the restart
// before it, if any).
func restarts(h *history.Table) (times []int64, valid []bool) {
	crashed := false
	for i := range h.Len() {
		if h.Process(i) != history.NemesisProcess {
			continue
		}
		switch f := h.F(i); {
		case h.Type(i) == history.Invoke && f == restartOp:
			times, valid = append(times, h.Time(i)), append(valid, crashed)
			crashed = false
		case h.Type(i) == history.OK:
			if k, ok := history.FaultOfOp(f); ok && k.Family == history.FamilyNode && k.Heal == restartOp {
				crashed = true
			}
		}
	}
	// Lines are in arrival order; restarts are the nemesis's own, one at a
	// time, so their times ascend, but keep the search below safe.
	if !slices.IsSorted(times) {
		return nil, nil
	}
	return times, valid
}

// restartAfter returns the restart that ends what an op completed at c
// could have done: the first restart at or after c, when it follows a
// crash; math.MaxInt64 when there is none.
func restartAfter(times []int64, valid []bool, c int64) int64 {
	j, _ := slices.BinarySearch(times, c)
	if j == len(times) || !valid[j] {
		return math.MaxInt64
	}
	return times[j]
}

// endAtRestarts applies what the restarts of h prove (see above) to the
// call-ordered mutex ops of one lock: it turns the releases of unknown
// outcome ended by a restart into deaths ending at it, and returns, per op
// index, the restart that ended an acquire of unknown outcome
// (math.MaxInt64 for every other op), for dropIdleAcquires. The ops stay in
// call order.
func endAtRestarts(h *history.Table, ops []linOp, times []int64, valid []bool) []int64 {
	ended := make([]int64, len(ops))
	for i := range ended {
		ended[i] = math.MaxInt64
	}
	if len(times) == 0 {
		return ended
	}
	// The calls of each process's acquire oks, ascending.
	okAcq := map[int][]int64{}
	for i := range ops {
		if op := &ops[i]; op.in.kind == 'a' && !op.out.unknown {
			okAcq[op.in.proc] = append(okAcq[op.in.proc], op.call)
		}
	}
	for i := range ops {
		op := &ops[i]
		if !op.out.unknown || op.done < 0 || (op.in.kind != 'a' && op.in.kind != 'r') {
			continue
		}
		r := restartAfter(times, valid, h.Time(int(op.done)))
		if r == math.MaxInt64 {
			continue
		}
		if op.in.kind == 'a' {
			ended[i] = r
			continue
		}
		calls := okAcq[op.in.proc]
		j, _ := slices.BinarySearch(calls, op.call+1)
		if j < len(calls) && calls[j] < r {
			continue // p took the lock again before the restart
		}
		op.in.kind, op.in.n, op.ret, op.out.unknown = 'd', endedRelease, max(op.call, r), false
	}
	return ended
}
