package redlock

import (
	"slices"
	"sync"
	"testing"
)

// TestAttemptCountsEachRoundAfresh: with WithTries(2) redsync asks every
// node twice; the pause points name the replies of one round, and the
// grants are those of the last round.
func TestAttemptCountsEachRoundAfresh(t *testing.T) {
	var mu sync.Mutex
	var points []string
	a := &attempt{quorum: 2, granted: make([]bool, 3), hook: func(p string) {
		mu.Lock()
		points = append(points, p)
		mu.Unlock()
	}}
	// Round 1: only node 0 grants (no majority).
	for n, ok := range []bool{true, false, false} {
		a.send()
		a.reply(n, ok)
	}
	// Round 2: nodes 1 and 2 grant.
	for n, ok := range []bool{false, true, true} {
		a.send()
		a.reply(n, ok)
	}
	want := []string{PointAfterNode(1), PointAfterNode(2), PointAfterNode(3),
		PointAfterNode(1), PointAfterNode(2), PointAfterNode(3), PointAfterMajority}
	if !slices.Equal(points, want) {
		t.Errorf("points %v, want %v", points, want)
	}
	if a.grants() != 2 {
		t.Errorf("grants %d, want 2 (the last round's)", a.grants())
	}
	if got := a.grantedNames([]string{"n1", "n2", "n3"}); !slices.Equal(got, []string{"n2", "n3"}) {
		t.Errorf("granted %v, want [n2 n3]", got)
	}
}
