package reports

import (
	"fmt"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// Story tells a run's failing story in one sentence, from its history
// alone: each fault that took effect before anomaly a was proven (what
// it hit, for how long, and when), then a's own explanation. It is what
// the report of a shrunk run shows first: "p3 paused for 750ms at
// 1.020s, at its before-write point; then process 1 was granted token 18
// ...". A
// history with no such fault tells a's explanation alone.
func Story(h *history.Table, a checker.Anomaly) string {
	var proof int64
	for _, i := range a.Ops {
		if i >= 0 && i < h.Len() {
			proof = max(proof, h.Time(i))
		}
	}
	var faults []string
	for i := 0; i < h.Len(); i++ {
		op := h.At(i)
		if op.Time > proof {
			break
		}
		if !op.IsNemesis() || op.Type != history.OK || history.IsHeal(op.F) {
			continue
		}
		if _, ok := history.FaultOfOp(op.F); !ok {
			continue
		}
		faults = append(faults, faultClause(op))
	}
	if len(faults) == 0 {
		return a.Explanation
	}
	return strings.Join(faults, "; ") + "; then " + a.Explanation + "."
}

// faultClause says what one fault injection did: "p3 paused for 750ms at
// 1.020s, at its before-write point", "kill-node hit n2 for 2s at
// 3.100s".
func faultClause(op history.Op) string {
	at := fmt.Sprintf("at %.3fs", float64(op.Time)/1e9)
	targets := strings.Join(op.Value.Targets, ", ")
	if targets == "" {
		targets = "nothing named"
	}
	var dur string
	if op.Value.Duration > 0 {
		dur = " for " + time.Duration(op.Value.Duration).String()
	}
	switch {
	case op.F == "pause-client":
		where := ""
		if op.Value.Point != "" {
			where = ", at its " + op.Value.Point + " point"
		}
		return fmt.Sprintf("%s paused%s %s%s", targets, dur, at, where)
	case op.F == "kill-client":
		return fmt.Sprintf("%s killed %s", targets, at)
	}
	return fmt.Sprintf("%s hit %s%s %s", op.F, targets, dur, at)
}
