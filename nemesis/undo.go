package nemesis

import "sync"

// undoList is what a fault did and has not undone yet, in the order it
// did it; Inject adds to it and Heal undoes it, safely from both.
type undoList[T comparable] struct {
	mu   sync.Mutex
	done []T
}

// add records x; once keeps a single record of an x already there.
func (u *undoList[T]) add(x T, once bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, y := range u.done {
		if once && y == x {
			return
		}
	}
	u.done = append(u.done, x)
}

// undo calls f for each record, oldest first (newest first with
// newestFirst, so that undoing stacked changes ends at the first state),
// and forgets each one f undid. It returns the targets f named for the
// records it undid, in that order (f names none with ""), for the heal's
// value. It stops at the first error, which it returns; that record and the
// later ones stay for the next heal.
func (u *undoList[T]) undo(newestFirst bool, f func(x T) (target string, err error)) ([]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var targets []string
	for len(u.done) > 0 {
		i := 0
		if newestFirst {
			i = len(u.done) - 1
		}
		t, err := f(u.done[i])
		if err != nil {
			return targets, err
		}
		if t != "" {
			targets = append(targets, t)
		}
		u.done = append(u.done[:i], u.done[i+1:]...)
	}
	return targets, nil
}
