package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/history"
)

// Cut is one pair of host sets between which every packet is dropped,
// both ways; with OneWay, only the packets from a host of A to a host of
// B.
type Cut struct {
	A, B   []string
	OneWay bool
}

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
// bridge, the nodes a client loses or whose replies it loses); nil for
// shapes that take no pins. Every choice comes from
// rng, so a seed names the partition; an unpinned shape draws exactly as it
// did before pins existed.
type shape func(in shapeIn, rng *rand.Rand) (cuts []Cut, subject []string, err error)

// partitionShape is how one partition fault cuts the network.
type partitionShape struct {
	// cut is the shape.
	cut shape
	// minNodes is the fewest nodes the shape can cut.
	minNodes int
	// check, if set, refuses before the run starts what the shape cannot
	// cut in the run's hosts (in has no pins).
	check func(in shapeIn) error

	// takesPins is set by registerShape from the spec.
	takesPins bool
}

// shapes are the partition shapes by fault name, filled by registerShape.
var shapes = map[string]partitionShape{}

// healNetwork is the f of the op that heals every network fault: the
// network lab clears all its rules at once.
const healNetwork = "heal-network"

// registerShape registers a partition fault: spec, completed with what
// every partition shares (its heal, its family, the window it lasts, and
// the network it needs unless spec says more), cutting the network as sh
// says.
func registerShape(spec Spec, sh partitionShape) {
	spec.Heal, spec.Family = healNetwork, history.FamilyNetwork
	spec.Settings = append(spec.Settings, "window")
	if len(spec.Needs) == 0 {
		spec.Needs = []Ability{NeedNetwork}
	}
	spec.New = newPartition
	sh.takesPins = spec.pins != pinNone
	shapes[spec.Name] = sh
	Register(spec)
}

// cutShape returns the cuts and the subject of the partition fault called
// name for in, drawn from rng. It refuses a cluster of fewer nodes than the
// shape needs, and pins for a shape that takes none.
func cutShape(name string, in shapeIn, rng *rand.Rand) ([]Cut, []string, error) {
	s := shapes[name]
	if len(in.nodes) < s.minNodes {
		return nil, nil, fmt.Errorf("%s needs at least %d nodes", name, s.minNodes)
	}
	if !s.takesPins && len(in.pinned)+len(in.pinnedClients) > 0 {
		return nil, nil, fmt.Errorf("%s takes no target", name)
	}
	return s.cut(in, rng)
}

// pickOne returns one of pinned, when there are any, else one of all,
// drawn from rng.
func pickOne(all, pinned []string, rng *rand.Rand) string {
	if len(pinned) > 0 {
		all = pinned
	}
	return all[rng.IntN(len(all))]
}

// joinRandomSides adds each client to side a or side b at random.
func joinRandomSides(a, b, clients []string, rng *rand.Rand) ([]string, []string) {
	for _, c := range clients {
		if rng.IntN(2) == 0 {
			a = append(a, c)
		} else {
			b = append(b, c)
		}
	}
	return a, b
}

// ShapeCuts returns the cuts the partition shape makes of nodes and clients
// with rng, unpinned; for tests and for the docs.
func ShapeCuts(shape string, nodes, clients []string, groups [][]string, rng *rand.Rand) ([]Cut, error) {
	if _, ok := shapes[shape]; !ok {
		return nil, fmt.Errorf("unknown partition shape %q", shape)
	}
	cuts, _, err := cutShape(shape, shapeIn{nodes: nodes, clients: clients, groups: groups}, rng)
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

// The separators of a cut's two sides as the ops and plans write it: a
// cut both ways, and a one-way cut, from its left side to its right.
const (
	cutBoth   = "|"
	cutOneWay = ">"
)

// describe renders cuts as "a,b|c,d" (both ways) or "a,b>c,d" (one way,
// from a and b to c and d), one per cut, the targets of the op; parseCut
// reads one back.
func describe(cuts []Cut) []string {
	var out []string
	for _, c := range cuts {
		sep := cutBoth
		if c.OneWay {
			sep = cutOneWay
		}
		out = append(out, strings.Join(c.A, ",")+sep+strings.Join(c.B, ","))
	}
	return out
}

func parseCut(s string) (Cut, error) {
	var c Cut
	a, b, ok := strings.Cut(s, cutBoth)
	if !ok {
		a, b, ok = strings.Cut(s, cutOneWay)
		c.OneWay = ok
	}
	c.A, c.B = hostList(a), hostList(b)
	if !ok || len(c.A) == 0 || len(c.B) == 0 || strings.ContainsAny(a+b, cutBoth+cutOneWay) {
		return Cut{}, fmt.Errorf("cut %q: want hosts|hosts (both ways), e.g. n1|n2,n3,c0, or hosts>hosts (from the first to the second only), e.g. n1,n2,n3>c0", s)
	}
	return c, nil
}

// partitionFault cuts the network in one shape for the window, or, in a
// replay (Env.cuts), exactly the cuts a plan recorded.
type partitionFault struct {
	kind
	env Env

	mu   sync.Mutex
	last []string // the cuts of the last injection, for its Plan entry
}

// plannedCuts returns the cuts of the last injection, as its op records
// them.
func (f *partitionFault) plannedCuts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// newPartition builds a partition fault; Build gives it its kind, whose
// name is the shape.
func newPartition(env Env) (Fault, error) {
	if err := positive("fault window", Window.Of(env)); err != nil {
		return nil, err
	}
	return &partitionFault{env: env}, nil
}

// check refuses, before the run starts, a shape that cannot fit the
// cluster, and what the shape's own check refuses.
func (f *partitionFault) check() error {
	in := shapeIn{nodes: nodeNames(f.env), clients: f.env.ClientHosts, groups: Partition.Of(f.env)}
	if f.env.cuts != nil {
		known := append(slices.Clone(in.nodes), in.clients...)
		for _, c := range f.env.cuts {
			for _, h := range append(slices.Clone(c.A), c.B...) {
				if !slices.Contains(known, h) {
					return fmt.Errorf("cut %s names host %q, which this run does not have (hosts: %s)", describe([]Cut{c})[0], h, strings.Join(known, ", "))
				}
			}
		}
		return nil
	}
	if _, _, err := cutShape(f.spec.Name, in, rand.New(rand.NewPCG(0, 0))); err != nil {
		return err
	}
	if c := shapes[f.spec.Name].check; c != nil {
		return c(in)
	}
	return nil
}

func (f *partitionFault) Duration() time.Duration { return Window.Of(f.env) }

// Inject cuts the network in the fault's shape. A pinned fault first
// resolves its pins: the nodes they name now (by name, or by the role the
// cluster reports at this moment) and the client hosts they name; a pin
// that matches nothing now leaves the network as it is.
func (f *partitionFault) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	if f.env.cuts != nil {
		return f.cut(ctx, f.env.cuts, nil, nil)
	}
	in := shapeIn{nodes: nodeNames(f.env), clients: f.env.ClientHosts, groups: Partition.Of(f.env)}
	for _, p := range f.env.Targets[f.spec.Name] {
		if clientPin.MatchString(p) && slices.Contains(in.clients, p) {
			in.pinnedClients = append(in.pinnedClients, p)
		}
	}
	hit, roles, err := f.env.pinned(ctx, f.spec.Name, f.env.Cluster.Nodes())
	if err != nil {
		return history.Value{}, err
	}
	for _, n := range hit {
		in.pinned = append(in.pinned, n.Name)
	}
	cuts, subject, err := cutShape(f.spec.Name, in, rng)
	if err != nil {
		f.mu.Lock()
		f.last = nil
		f.mu.Unlock()
		return history.Value{}, fmt.Errorf("%w: %v", errNotApplied, err)
	}
	return f.cut(ctx, cuts, roles, subject)
}

// cut makes the cuts, recording them as the op's targets and as the
// plan's, with the roles of the subject's nodes.
func (f *partitionFault) cut(ctx context.Context, cuts []Cut, roles map[string]string, subject []string) (history.Value, error) {
	v := history.Value{Targets: describe(cuts), Duration: int64(Window.Of(f.env)), Roles: rolesOf(roles, subject...)}
	f.mu.Lock()
	f.last = describe(cuts)
	f.mu.Unlock()
	for _, c := range cuts {
		cut := f.env.Net.Cut
		if c.OneWay {
			cut = f.env.Net.CutOneWay
		}
		if err := cut(ctx, c.A, c.B); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (f *partitionFault) Heal(ctx context.Context) (history.Value, error) {
	_, err := f.env.clearNetwork(ctx)
	return history.Value{}, err
}

// clearNetwork clears every rule of the network lab, the heal of every
// network fault; it names no target.
func (env Env) clearNetwork(ctx context.Context) ([]string, error) {
	return nil, env.Net.Heal(ctx)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
