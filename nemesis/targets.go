package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
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

// pinKind says what the pins of a fault (--target fault=...) may name.
type pinKind int

const (
	// pinNone: the fault takes no pins; its spec says why.
	pinNone pinKind = iota
	// pinProcess: worker processes, "p0".
	pinProcess
	// pinNode: nodes, by name ("n2") or by role ("leader").
	pinNode
	// pinClientOrNode: client hosts ("c0") and nodes, by name or role.
	pinClientOrNode
)

// pinsOf returns what the pins of fault name.
func pinsOf(fault string) pinKind {
	s, _ := lookup(fault)
	if s == nil {
		return pinNone
	}
	return s.pins
}

var (
	processPin = regexp.MustCompile(`^p[0-9]+$`)
	clientPin  = regexp.MustCompile(`^c[0-9]+$`)
)

// ParseTargets reads pinned targets, "clock-bump=n3;kill-node=master": for
// each fault, the nodes (by name or role), client hosts ("c0") or worker
// processes ("p0") it may hit. It refuses an unknown fault, a fault that
// takes no pins, and a pin of the wrong kind for its fault (a process for a
// node fault, say); what needs the cluster (does node n9 exist, can a node
// of this backend be a "leader") is checked by Build.
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
		if _, known := lookup(fault); !known {
			return nil, fmt.Errorf("target %q: unknown fault %q", part, fault)
		}
		for _, w := range strings.Split(who, ",") {
			if w = strings.TrimSpace(w); w != "" {
				out[fault] = append(out[fault], w)
			}
		}
		if err := checkPinKinds(fault, out[fault]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkPinKinds refuses pins that fault cannot take whatever the cluster:
// any pin of a fault that takes none, and pins of the wrong kind.
func checkPinKinds(fault string, pins []string) error {
	if len(pins) == 0 {
		return nil
	}
	pin := fault + "=" + strings.Join(pins, ",")
	switch pinsOf(fault) {
	case pinNone:
		s, _ := lookup(fault)
		return fmt.Errorf("%s: %s takes no target: %s", pin, fault, s.noPins)
	case pinProcess:
		for _, p := range pins {
			if !processPin.MatchString(p) {
				return fmt.Errorf("%s: %s hits worker processes, named p0, p1, ...; %q is not one", pin, fault, p)
			}
		}
	case pinNode:
		for _, p := range pins {
			switch {
			case processPin.MatchString(p):
				return fmt.Errorf("%s: %s hits nodes (by name or role), not worker processes like %s", pin, fault, p)
			case clientPin.MatchString(p):
				return fmt.Errorf("%s: %s hits nodes (by name or role), not client hosts like %s (client-isolate and reply-loss cut a client host)", pin, fault, p)
			}
		}
	case pinClientOrNode:
		for _, p := range pins {
			if processPin.MatchString(p) {
				return fmt.Errorf("%s: %s cuts a client host (c0, c1, ...) from nodes; %s is a worker process, not a host", pin, fault, p)
			}
		}
	}
	return nil
}

// CheckTargets refuses, before anything of a run starts, the pins of
// targets that a run of cluster with the given number of clients can never
// match (see Build): cluster may be one constructed but not started, whose
// Nodes already have their names. The run's client hosts are taken to be
// c0, c1, ... and its workers p0, p1, ..., one per client.
func CheckTargets(targets map[string][]string, cluster clusters.Cluster, clients int) error {
	env := Env{Cluster: cluster, Targets: targets}
	var procs []int
	for c := range clients {
		env.ClientHosts = append(env.ClientHosts, fmt.Sprintf("c%d", c))
		procs = append(procs, c)
	}
	faults := make([]string, 0, len(targets))
	for f := range targets {
		faults = append(faults, f)
	}
	sort.Strings(faults)
	for _, f := range faults {
		if _, ok := lookup(f); !ok {
			return fmt.Errorf("unknown fault %q", f)
		}
		if err := env.checkPins(f, procs); err != nil {
			return err
		}
	}
	return nil
}

// checkPins refuses, before the run starts, the pins of fault that env's
// cluster and clients can never match: a node the run does not have, a
// role no node the fault hits can have, a client host or worker (among
// procs; nil when they are not known) the run does not start. Roles are
// checked against what each node can ever be (clusters.RoleReader.Roles), not what
// it is now.
func (env Env) checkPins(fault string, procs []int) error {
	pins := env.Targets[fault]
	if err := checkPinKinds(fault, pins); err != nil || len(pins) == 0 {
		return err
	}
	pin := fault + "=" + strings.Join(pins, ",")
	switch pinsOf(fault) {
	case pinProcess:
		if procs == nil {
			return nil
		}
		var names []string
		for _, p := range procs {
			names = append(names, fmt.Sprintf("p%d", p))
		}
		for _, p := range pins {
			if !slices.Contains(names, p) {
				return fmt.Errorf("%s: the run starts workers %s; %s is not one of them", pin, strings.Join(names, ", "), p)
			}
		}
	case pinNode, pinClientOrNode:
		if env.Cluster == nil {
			return nil
		}
		cands := env.candidates(fault)
		var nodeNames, roles []string
		for _, n := range cands {
			nodeNames = append(nodeNames, n.Name)
			for _, r := range env.possibleRoles(n) {
				if !slices.Contains(roles, r) {
					roles = append(roles, r)
				}
			}
		}
		sort.Strings(roles)
		for _, p := range pins {
			if pinsOf(fault) == pinClientOrNode && clientPin.MatchString(p) {
				if !slices.Contains(env.ClientHosts, p) {
					return fmt.Errorf("%s: the run's client hosts are %s; %s is not one of them", pin, orNone(env.ClientHosts), p)
				}
				continue
			}
			if slices.Contains(nodeNames, p) || slices.Contains(roles, p) {
				continue
			}
			what := "nodes " + strings.Join(nodeNames, ", ")
			if len(roles) > 0 {
				what += " (by name) or the roles " + strings.Join(roles, ", ")
			} else {
				what += " by name (no node of this backend has a role)"
			}
			return fmt.Errorf("%s: %s hits %s; %q is neither", pin, fault, what, p)
		}
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none (each client has no network host of its own)"
	}
	return strings.Join(s, ", ")
}

// roleReadTimeout bounds the reading of every node's role at one pick.
const roleReadTimeout = 2 * time.Second

// candidates returns the nodes fault may hit: the data nodes (Targeter)
// for the node faults that stop a process, every node for the others.
func (env Env) candidates(fault string) []clusters.Node {
	if s, _ := lookup(fault); s != nil && s.dataNodes {
		return targetNodes(env.Cluster)
	}
	return env.Cluster.Nodes()
}

// possibleRoles returns the roles n can ever have: what the cluster's
// clusters.RoleReader says, else the role it started with.
func (env Env) possibleRoles(n clusters.Node) []string {
	if rr, ok := env.Cluster.(clusters.RoleReader); ok {
		return rr.Roles(n)
	}
	if n.Role != "" {
		return []string{n.Role}
	}
	return nil
}

// readRoles returns the role of each of nodes now: asked of the cluster, all
// at once, where it can tell (clusters.RoleReader), else the role the node started
// with. A node whose role cannot be read now is left out.
func (env Env) readRoles(ctx context.Context, nodes []clusters.Node) map[string]string {
	roles := make(map[string]string, len(nodes))
	rr, ok := env.Cluster.(clusters.RoleReader)
	if !ok {
		for _, n := range nodes {
			if n.Role != "" {
				roles[n.Name] = n.Role
			}
		}
		return roles
	}
	ctx, cancel := context.WithTimeout(ctx, roleReadTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := rr.Role(ctx, n); err == nil && r != "" {
				mu.Lock()
				roles[n.Name] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return roles
}

// pinned resolves the node pins of fault among cands at this moment: the
// nodes a pin names, by name or by the role the cluster reports now. It
// returns nil and no error when the fault has no node pins, and
// errNotApplied when pins are set but no node matches now. roles holds
// the roles read, when a pin names a role (nil otherwise).
func (env Env) pinned(ctx context.Context, fault string, cands []clusters.Node) (hit []clusters.Node, roles map[string]string, err error) {
	var pins []string
	for _, p := range env.Targets[fault] {
		if !(pinsOf(fault) == pinClientOrNode && clientPin.MatchString(p)) {
			pins = append(pins, p)
		}
	}
	if len(pins) == 0 {
		return nil, nil, nil
	}
	byRole := false
	for _, p := range pins {
		if !slices.ContainsFunc(cands, func(n clusters.Node) bool { return n.Name == p }) {
			byRole = true
		}
	}
	if byRole && env.Cluster != nil {
		roles = env.readRoles(ctx, cands)
	} else if byRole {
		roles = map[string]string{}
		for _, n := range cands {
			if n.Role != "" {
				roles[n.Name] = n.Role
			}
		}
	}
	for _, n := range cands {
		if slices.Contains(pins, n.Name) || (roles[n.Name] != "" && slices.Contains(pins, roles[n.Name])) {
			hit = append(hit, n)
		}
	}
	if len(hit) == 0 {
		return nil, roles, fmt.Errorf("%w: no node is among the targets %s now (roles: %s)", errNotApplied, strings.Join(pins, ","), describeRoles(cands, roles))
	}
	return hit, roles, nil
}

// describeRoles renders the roles read at a pick, "n1=leader n2=? n3=follower".
func describeRoles(nodes []clusters.Node, roles map[string]string) string {
	var parts []string
	for _, n := range nodes {
		r := roles[n.Name]
		if r == "" {
			r = "?"
		}
		parts = append(parts, n.Name+"="+r)
	}
	return strings.Join(parts, " ")
}

// rolesOf returns the roles of the named nodes, for Value.Roles: nil when
// no role was read.
func rolesOf(roles map[string]string, names ...string) map[string]string {
	if roles == nil {
		return nil
	}
	out := map[string]string{}
	for _, n := range names {
		if r := roles[n]; r != "" {
			out[n] = r
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// hitNode picks the node fault hits now among its candidates, honouring
// its pins and roles, and returns it with the Value that records it: the
// node as its target, d as its duration, the roles the pins resolved.
func (env Env) hitNode(ctx context.Context, fault string, d time.Duration, rng *rand.Rand) (clusters.Node, history.Value, error) {
	n, roles, err := env.pickNode(ctx, fault, env.candidates(fault), rng)
	if err != nil {
		return n, history.Value{}, err
	}
	return n, history.Value{Targets: []string{n.Name}, Duration: int64(d), Roles: roles}, nil
}

// pickNode chooses the node fault hits among cands: any of them, or only
// those Env.Targets pins for the fault, by name or by the role the cluster
// reports at the moment of the pick (clusters.RoleReader; a node whose role cannot be
// read then matches only by name). It also returns the role the chosen node
// had, as {name: role}, when a pin named a role.
func (env Env) pickNode(ctx context.Context, fault string, cands []clusters.Node, rng *rand.Rand) (clusters.Node, map[string]string, error) {
	hit, roles, err := env.pinned(ctx, fault, cands)
	if err != nil {
		return clusters.Node{}, nil, err
	}
	if hit != nil {
		cands = hit
	}
	if len(cands) == 0 {
		return clusters.Node{}, nil, fmt.Errorf("%w: no nodes", errNotApplied)
	}
	n := cands[rng.IntN(len(cands))]
	return n, rolesOf(roles, n.Name), nil
}

// pickProcess chooses the worker fault hits among procs: any, or only the
// processes ("p0") Env.Targets pins for the fault.
func (env Env) pickProcess(fault string, procs []int, rng *rand.Rand) (int, error) {
	procs, err := env.processCandidates(fault, procs)
	if err != nil {
		return 0, err
	}
	return procs[rng.IntN(len(procs))], nil
}

// processCandidates returns the workers of procs that fault may hit: the
// ones its pins name, or all when it has none. It fails, wrapping
// errNotApplied, when none is left.
func (env Env) processCandidates(fault string, procs []int) ([]int, error) {
	if pins := env.Targets[fault]; len(pins) > 0 {
		procs = slices.DeleteFunc(slices.Clone(procs), func(p int) bool {
			return !slices.Contains(pins, fmt.Sprintf("p%d", p))
		})
		if len(procs) == 0 {
			return nil, fmt.Errorf("%w: no live process is among the targets %s", errNotApplied, strings.Join(pins, ","))
		}
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("%w: no live client", errNotApplied)
	}
	return procs, nil
}

// jump returns the signed clock jump of one injection: ClockBump, in the
// direction Env.ClockDirection asks for. With ClockEither, a positive bump
// goes either way by a coin toss and a negative one always backward.
func (env Env) jump(rng *rand.Rand) time.Duration {
	d := ClockBump.Of(env)
	switch ClockDirection.Of(env) {
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
