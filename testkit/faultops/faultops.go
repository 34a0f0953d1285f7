// Package faultops reads the nemesis's ops out of a history, for the tests
// that replay a schedule and compare what the two runs injected.
package faultops

import (
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// Lines returns the nemesis completions of h as "f type targets
// duration" (targets joined by commas): the injections in the order they
// happened, and the heals sorted, since a replayed heal runs on its own
// timer and only their set is fixed.
func Lines(h history.History) (injections, heals []string) {
	for _, o := range h {
		if !o.IsNemesis() || o.Type == history.Invoke {
			continue
		}
		line := fmt.Sprintf("%s %s %s %d", o.F, o.Type, strings.Join(o.Value.Targets, ","), o.Value.Duration)
		if _, inject := history.FaultOfOp(o.F); inject {
			injections = append(injections, line)
		} else {
			heals = append(heals, line)
		}
	}
	slices.Sort(heals)
	return injections, heals
}
