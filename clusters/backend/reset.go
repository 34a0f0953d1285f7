package backend

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/locktest/locktest/clusters"
)

// Reusable reports whether a started cluster of backend b may serve
// another run once its data is reset: whether b states both its Reset
// and its Residue (Service.Reset, Service.Residue). A backend that lacks
// either is started afresh for every run.
func Reusable(b string) bool {
	s, ok := ServiceOf(b)
	return ok && s.Reset != nil && s.Residue != nil
}

// Reset returns the data of the started cluster of layout l, whose nodes
// are nodes, to a fresh start's (Service.Reset). A backend that is not
// Reusable is an error.
func Reset(ctx context.Context, l Layout, nodes []clusters.Node) error {
	s, ok := ServiceOf(l.Backend)
	if !ok || s.Reset == nil {
		return fmt.Errorf("%s: no reset: its clusters are not reused", l.Backend)
	}
	return s.Reset(ctx, l, nodes)
}

// Residue lists what the started cluster of layout l, whose nodes are
// nodes, holds that a fresh start of it would not (Service.Residue),
// sorted. A backend that is not Reusable is an error.
func Residue(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error) {
	s, ok := ServiceOf(l.Backend)
	if !ok || s.Residue == nil {
		return nil, fmt.Errorf("%s: no residue check: its clusters are not reused", l.Backend)
	}
	out, err := s.Residue(ctx, l, nodes)
	slices.Sort(out)
	return out, err
}

// residueLimit bounds how many things of one kind on one node Residue
// lists one by one; the rest are counted.
const residueLimit = 20

// listed returns the first residueLimit of items, each as prefix+item, and
// one more line counting the rest.
func listed(prefix string, items []string) []string {
	var out []string
	for i, it := range items {
		if i == residueLimit {
			out = append(out, fmt.Sprintf("%s… and %d more", prefix, len(items)-residueLimit))
			break
		}
		out = append(out, prefix+it)
	}
	return out
}

// closingGrace is how long a session that Reset or an earlier check
// closed may still be listed by its server (a backend exits after the
// client's goodbye, not with it).
const closingGrace = 300 * time.Millisecond

// lasting returns the items list gives now that it still gives
// closingGrace later: the other clients' sessions, without those that
// were closing. A list that is empty at once is not asked again.
func lasting(ctx context.Context, list func() ([]string, error)) ([]string, error) {
	first, err := list()
	if err != nil || len(first) == 0 {
		return first, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(closingGrace):
	}
	again, err := list()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range first {
		if slices.Contains(again, it) {
			out = append(out, it)
		}
	}
	return out, nil
}
