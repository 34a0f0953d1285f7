package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/history"
)

// Cut is one pair of host sets between which every packet is dropped.
type Cut struct{ A, B []string }

// shapeIn is what a partition shape cuts: the node names, the client hosts,
// the explicit groups of "partition", and the nodes and client hosts the
// fault's pins chose at this moment (empty when it is not pinned).
type shapeIn struct {
	nodes, clients []string
	groups         [][]string
	pinned         []string
	pinnedClients  []string
}

// A shape returns the cuts to make and its subject: the nodes in the place
// a pin chooses (the isolated node, the pinned nodes of the minority, the
// bridge, the nodes a client loses); nil for shapes that take no pins. Every choice comes from
// rng, so a seed names the partition; an unpinned shape draws exactly as it
// did before pins existed.
type shape func(in shapeIn, rng *rand.Rand) (cuts []Cut, subject []string, err error)

// Shapes of partitions.
var shapes = map[string]shape{
	// isolate cuts one node from every other host, nodes and clients; a pin
	// chooses that node.
	"isolate": func(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
		if len(in.nodes) < 2 {
			return nil, nil, fmt.Errorf("isolate needs at least 2 nodes")
		}
		from := in.nodes
		if len(in.pinned) > 0 {
			from = in.pinned
		}
		n := from[rng.IntN(len(from))]
		rest := append(without(in.nodes, n), in.clients...)
		return []Cut{{A: []string{n}, B: rest}}, []string{n}, nil
	},
	// halves splits the nodes into two halves (the smaller first) and puts
	// each client on a random side. Pinned nodes go to the smaller half
	// first: those of them that fit, then random other nodes fill it.
	"halves": func(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
		if len(in.nodes) < 2 {
			return nil, nil, fmt.Errorf("halves needs at least 2 nodes")
		}
		var s []string
		if len(in.pinned) > 0 {
			s = append(shuffled(in.pinned, rng), shuffled(without(in.nodes, in.pinned...), rng)...)
		} else {
			s = shuffled(in.nodes, rng)
		}
		a, b := slices.Clone(s[:len(s)/2]), slices.Clone(s[len(s)/2:])
		subject := slices.Clone(a)
		if len(in.pinned) > 0 {
			subject = slices.DeleteFunc(subject, func(n string) bool { return !slices.Contains(in.pinned, n) })
		}
		for _, c := range in.clients {
			if rng.IntN(2) == 0 {
				a = append(a, c)
			} else {
				b = append(b, c)
			}
		}
		return []Cut{{A: a, B: b}}, subject, nil
	},
	// majorities-ring puts the nodes on a ring in random order; each sees
	// the nodes within distance k of it, a majority, and no two see the same
	// majority. Clients keep every node. It takes no pins.
	"majorities-ring": func(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
		n := len(in.nodes)
		if n < 5 {
			return nil, nil, fmt.Errorf("majorities-ring needs at least 5 nodes (with %d every majority ring is the whole cluster)", n)
		}
		if len(in.pinned)+len(in.pinnedClients) > 0 {
			return nil, nil, fmt.Errorf("majorities-ring takes no target")
		}
		maj := n/2 + 1
		k := maj / 2 // sees 2k+1 ≥ maj nodes
		s := shuffled(in.nodes, rng)
		var cuts []Cut
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				d := min(j-i, n-(j-i))
				if d > k {
					cuts = append(cuts, Cut{A: []string{s[i]}, B: []string{s[j]}})
				}
			}
		}
		return cuts, nil, nil
	},
	// bridge splits the nodes into two halves that cannot talk, except
	// through one bridge node that sees both; clients join a random half. A
	// pin chooses the bridge node.
	"bridge": func(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
		if len(in.nodes) < 3 {
			return nil, nil, fmt.Errorf("bridge needs at least 3 nodes")
		}
		var a, b []string
		var bridge string
		mid := len(in.nodes) / 2
		if len(in.pinned) > 0 {
			bridge = in.pinned[rng.IntN(len(in.pinned))]
			o := shuffled(without(in.nodes, bridge), rng)
			a, b = slices.Clone(o[:mid]), slices.Clone(o[mid:])
		} else {
			s := shuffled(in.nodes, rng)
			a, bridge, b = slices.Clone(s[:mid]), s[mid], slices.Clone(s[mid+1:])
		}
		for _, c := range in.clients {
			if rng.IntN(2) == 0 {
				a = append(a, c)
			} else {
				b = append(b, c)
			}
		}
		return []Cut{{A: a, B: b}}, []string{bridge}, nil
	},
	// client-isolate cuts one client host from a random non-empty set of
	// nodes. Pinned client hosts choose the client; pinned nodes are the
	// set, all of them.
	"client-isolate": func(in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
		if len(in.clients) == 0 || len(in.nodes) == 0 {
			return nil, nil, fmt.Errorf("client-isolate needs client hosts and nodes")
		}
		from := in.clients
		if len(in.pinnedClients) > 0 {
			from = in.pinnedClients
		}
		c := from[rng.IntN(len(from))]
		var cut []string
		if len(in.pinned) > 0 {
			cut = slices.Clone(in.pinned)
		} else {
			s := shuffled(in.nodes, rng)
			cut = slices.Clone(s[:1+rng.IntN(len(s))])
		}
		return []Cut{{A: []string{c}, B: cut}}, slices.Clone(cut), nil
	},
	// partition applies the grouping given on the command line: hosts of
	// different groups are cut; hosts in no group keep everything, and so
	// does a host named in two groups, which bridges them (Kleppmann's
	// Redlock case: c0 sees n1,n2,n3 and c1 sees n3,n4,n5). It takes no
	// pins: the groups name every host.
	"partition": func(in shapeIn, _ *rand.Rand) ([]Cut, []string, error) {
		groups := in.groups
		if len(groups) < 2 {
			return nil, nil, fmt.Errorf("partition needs at least two groups (--partition n1,n2/n3,c0)")
		}
		if len(in.pinned)+len(in.pinnedClients) > 0 {
			return nil, nil, fmt.Errorf("partition takes no target")
		}
		var cuts []Cut
		for i := range groups {
			for j := i + 1; j < len(groups); j++ {
				a := slices.DeleteFunc(slices.Clone(groups[i]), func(h string) bool { return slices.Contains(groups[j], h) })
				b := slices.DeleteFunc(slices.Clone(groups[j]), func(h string) bool { return slices.Contains(groups[i], h) })
				if len(a) > 0 && len(b) > 0 {
					cuts = append(cuts, Cut{A: a, B: b})
				}
			}
		}
		if len(cuts) == 0 {
			return nil, nil, fmt.Errorf("partition %v cuts nothing: every group is contained in another", groups)
		}
		return cuts, nil, nil
	},
}

// ShapeCuts returns the cuts the partition shape makes of nodes and clients
// with rng, unpinned; for tests and for the docs.
func ShapeCuts(shape string, nodes, clients []string, groups [][]string, rng *rand.Rand) ([]Cut, error) {
	f, ok := shapes[shape]
	if !ok {
		return nil, fmt.Errorf("unknown partition shape %q", shape)
	}
	cuts, _, err := f(shapeIn{nodes: nodes, clients: clients, groups: groups}, rng)
	return cuts, err
}

// without returns s without the elements of xs, in order.
func without(s []string, xs ...string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !slices.Contains(xs, v) {
			out = append(out, v)
		}
	}
	return out
}

func shuffled(s []string, rng *rand.Rand) []string {
	c := slices.Clone(s)
	rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c
}

func nodeNames(env Env) []string {
	var out []string
	for _, n := range env.Cluster.Nodes() {
		out = append(out, n.Name)
	}
	return out
}

// describe renders cuts as "a,b|c,d; ...", the targets of the op.
func describe(cuts []Cut) []string {
	var out []string
	for _, c := range cuts {
		out = append(out, strings.Join(c.A, ",")+"|"+strings.Join(c.B, ","))
	}
	return out
}

// partitionFault cuts the network in one shape for the window.
type partitionFault struct {
	env   Env
	shape string
}

func partitionBuilder(shape string) func(Env) (Fault, error) {
	return func(env Env) (Fault, error) {
		if env.Net == nil {
			return nil, fmt.Errorf("%w: %s", ErrUnavailable, orDefault(env.NetReason, "the run has no network namespaces"))
		}
		if env.Window <= 0 {
			return nil, fmt.Errorf("fault window must be positive, got %v", env.Window)
		}
		// Check the shape fits the cluster now, not in the middle of the run.
		if _, _, err := shapes[shape](shapeIn{nodes: nodeNames(env), clients: env.ClientHosts, groups: env.Groups}, rand.New(rand.NewPCG(0, 0))); err != nil {
			return nil, err
		}
		if shape == "partition" {
			known := append(nodeNames(env), env.ClientHosts...)
			for _, g := range env.Groups {
				for _, h := range g {
					if !slices.Contains(known, h) {
						return nil, fmt.Errorf("--partition names host %q, which this run does not have (hosts: %s)", h, strings.Join(known, ", "))
					}
				}
			}
		}
		return &partitionFault{env: env, shape: shape}, nil
	}
}

func (f *partitionFault) Name() string {
	if f.shape == "partition" {
		return "partition"
	}
	return "partition-" + f.shape
}
func (f *partitionFault) HealName() string        { return "heal-network" }
func (f *partitionFault) Duration() time.Duration { return f.env.Window }

// Inject cuts the network in the fault's shape. A pinned fault first
// resolves its pins: the nodes they name now (by name, or by the role the
// cluster reports at this moment) and the client hosts they name; a pin
// that matches nothing now leaves the network as it is.
func (f *partitionFault) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	in := shapeIn{nodes: nodeNames(f.env), clients: f.env.ClientHosts, groups: f.env.Groups}
	for _, p := range f.env.Targets[f.shape] {
		if clientPin.MatchString(p) && slices.Contains(in.clients, p) {
			in.pinnedClients = append(in.pinnedClients, p)
		}
	}
	hit, roles, err := f.env.pinned(ctx, f.shape, f.env.Cluster.Nodes())
	if err != nil {
		return history.Value{}, err
	}
	for _, n := range hit {
		in.pinned = append(in.pinned, n.Name)
	}
	cuts, subject, err := shapes[f.shape](in, rng)
	if err != nil {
		return history.Value{}, fmt.Errorf("%w: %v", errNotApplied, err)
	}
	v := history.Value{Targets: describe(cuts), Duration: int64(f.env.Window), Roles: rolesOf(roles, subject...)}
	for _, c := range cuts {
		if err := f.env.Net.Cut(ctx, c.A, c.B); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (f *partitionFault) Heal(ctx context.Context) (history.Value, error) {
	return history.Value{}, f.env.Net.Heal(ctx)
}

// lossFault drops a fraction of the packets arriving at one node.
type lossFault struct{ env Env }

func newLoss(env Env) (Fault, error) {
	if env.Net == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, orDefault(env.NetReason, "the run has no network namespaces"))
	}
	if !(env.Loss > 0 && env.Loss <= 1) {
		return nil, fmt.Errorf("loss probability must be in (0, 1], got %v", env.Loss)
	}
	if env.Window <= 0 {
		return nil, fmt.Errorf("fault window must be positive, got %v", env.Window)
	}
	return &lossFault{env: env}, nil
}

func (f *lossFault) Name() string            { return "loss" }
func (f *lossFault) HealName() string        { return "heal-network" }
func (f *lossFault) Duration() time.Duration { return f.env.Window }

func (f *lossFault) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	node, roles, err := f.env.pickNode(ctx, f.Name(), f.env.candidates(f.Name()), rng)
	if err != nil {
		return history.Value{}, err
	}
	n := node.Name
	v := history.Value{Targets: []string{fmt.Sprintf("%s@%g%%", n, f.env.Loss*100)}, Duration: int64(f.env.Window), Roles: roles}
	return v, f.env.Net.Loss(ctx, []string{n}, f.env.Loss)
}

func (f *lossFault) Heal(ctx context.Context) (history.Value, error) {
	return history.Value{}, f.env.Net.Heal(ctx)
}

// delayFault adds latency to the traffic of one node.
type delayFault struct{ env Env }

func newDelay(env Env) (Fault, error) {
	if env.Delayer == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, orDefault(env.DelayReason, "no delay mechanism"))
	}
	if env.Delay <= 0 || env.Window <= 0 {
		return nil, fmt.Errorf("delay and fault window must be positive, got %v and %v", env.Delay, env.Window)
	}
	return &delayFault{env: env}, nil
}

func (f *delayFault) Name() string            { return "delay" }
func (f *delayFault) HealName() string        { return "heal-delay" }
func (f *delayFault) Duration() time.Duration { return f.env.Window }

func (f *delayFault) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	node, roles, err := f.env.pickNode(ctx, f.Name(), f.env.candidates(f.Name()), rng)
	if err != nil {
		return history.Value{}, err
	}
	n := node.Name
	v := history.Value{Targets: []string{fmt.Sprintf("%s+%v(%s)", n, f.env.Delay, f.env.Delayer.Mechanism())},
		Duration: int64(f.env.Window), Roles: roles}
	return v, f.env.Delayer.Delay(ctx, []string{n}, f.env.Delay)
}

func (f *delayFault) Heal(ctx context.Context) (history.Value, error) {
	return history.Value{}, f.env.Delayer.Delay(ctx, nil, 0)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
