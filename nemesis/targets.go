package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
)

// Clock directions of Env.ClockDirection.
const (
	// ClockEither jumps forward or backward, by a coin toss per injection.
	ClockEither = ""
	// ClockForward always jumps forward: expiries come early.
	ClockForward = "forward"
	// ClockBackward always jumps backward: expiries come late.
	ClockBackward = "backward"
)

// ParseTargets reads pinned targets, "clock-bump=n3,kill-node=master": for
// each fault, the nodes (by name or role) or processes ("p0") it may hit.
func ParseTargets(s string) (map[string][]string, error) {
	out := map[string][]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ";") {
		fault, who, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || fault == "" || who == "" {
			return nil, fmt.Errorf("target %q: want fault=target[,target...], e.g. clock-bump=n3", part)
		}
		if _, known := builders[fault]; !known {
			return nil, fmt.Errorf("target %q: unknown fault %q", part, fault)
		}
		for _, w := range strings.Split(who, ",") {
			if w = strings.TrimSpace(w); w != "" {
				out[fault] = append(out[fault], w)
			}
		}
	}
	return out, nil
}

// RoleReader is an optional ability of a cluster whose nodes' roles change
// as it runs (a ZooKeeper leader, a Redis master after a failover): Role
// asks the node what it is now.
type RoleReader interface {
	Role(ctx context.Context, n clusters.Node) (string, error)
}

// pickNode chooses the node fault hits among nodes: any of them, or only
// those Env.Targets pins for the fault, by name or role. Roles are asked
// of the cluster at the moment of the pick where it can tell them
// (RoleReader); a node that does not answer keeps the role it started with.
func (env Env) pickNode(ctx context.Context, fault string, nodes []clusters.Node, rng *rand.Rand) (clusters.Node, error) {
	if pins := env.Targets[fault]; len(pins) > 0 {
		nodes = slices.Clone(nodes)
		if rr, ok := env.Cluster.(RoleReader); ok {
			for i := range nodes {
				if r, err := rr.Role(ctx, nodes[i]); err == nil && r != "" {
					nodes[i].Role = r
				}
			}
		}
		nodes = slices.DeleteFunc(nodes, func(n clusters.Node) bool {
			return !slices.Contains(pins, n.Name) && (n.Role == "" || !slices.Contains(pins, n.Role))
		})
		if len(nodes) == 0 {
			return clusters.Node{}, fmt.Errorf("%w: no node is among the targets %s", errNotApplied, strings.Join(pins, ","))
		}
	}
	if len(nodes) == 0 {
		return clusters.Node{}, fmt.Errorf("%w: no nodes", errNotApplied)
	}
	return nodes[rng.IntN(len(nodes))], nil
}

// pickName is pickNode for faults that see nodes by name only.
func (env Env) pickName(ctx context.Context, fault string, names []string, rng *rand.Rand) (string, error) {
	nodes := make([]clusters.Node, len(names))
	for i, n := range names {
		nodes[i] = clusters.Node{Name: n}
		if env.Cluster != nil {
			for _, c := range env.Cluster.Nodes() {
				if c.Name == n {
					nodes[i].Role = c.Role
				}
			}
		}
	}
	n, err := env.pickNode(ctx, fault, nodes, rng)
	return n.Name, err
}

// pickProcess chooses the worker fault hits among procs: any, or only the
// processes ("p0") Env.Targets pins for the fault.
func (env Env) pickProcess(fault string, procs []int, rng *rand.Rand) (int, error) {
	if pins := env.Targets[fault]; len(pins) > 0 {
		procs = slices.DeleteFunc(slices.Clone(procs), func(p int) bool {
			return !slices.Contains(pins, fmt.Sprintf("p%d", p))
		})
		if len(procs) == 0 {
			return 0, fmt.Errorf("%w: no live process is among the targets %s", errNotApplied, strings.Join(pins, ","))
		}
	}
	if len(procs) == 0 {
		return 0, fmt.Errorf("%w: no live client", errNotApplied)
	}
	return procs[rng.IntN(len(procs))], nil
}

// jump returns the signed clock jump of one injection: ClockBump, in the
// direction Env.ClockDirection asks for. With ClockEither, a positive bump
// goes either way by a coin toss and a negative one always backward.
func (env Env) jump(rng *rand.Rand) time.Duration {
	d := env.ClockBump
	switch env.ClockDirection {
	case ClockForward:
		return max(d, -d)
	case ClockBackward:
		return min(d, -d)
	}
	if d > 0 && rng.IntN(2) == 1 {
		d = -d
	}
	return d
}
