package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
)

func TestParseTargets(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string][]string
		wantErr string
	}{
		{in: "", want: map[string][]string{}},
		{in: "clock-bump=n3", want: map[string][]string{"clock-bump": {"n3"}}},
		{in: "kill-node=master; pause-client=p0,p1", want: map[string][]string{"kill-node": {"master"}, "pause-client": {"p0", "p1"}}},
		{in: "clock-bump", wantErr: "want fault=target"},
		{in: "bogus=n1", wantErr: `unknown fault "bogus"`},
	}
	for _, tt := range tests {
		got, err := ParseTargets(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTargets(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("ParseTargets(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		for k, v := range tt.want {
			if !slices.Equal(got[k], v) {
				t.Errorf("ParseTargets(%q)[%s] = %v, want %v", tt.in, k, got[k], v)
			}
		}
	}
}

func TestPinnedTargets(t *testing.T) {
	nodes := []clusters.Node{{Name: "n1", Role: "master"}, {Name: "n2", Role: "replica"}, {Name: "n3", Role: "replica"}}
	env := Env{Targets: map[string][]string{"kill-node": {"master"}, "clock-bump": {"n3"}, "pause-client": {"p2"}}}
	for seed := uint64(0); seed < 20; seed++ {
		rng := seeded(seed, 0)
		if n, _, err := env.pickNode(context.Background(), "kill-node", nodes, rng); err != nil || n.Name != "n1" {
			t.Fatalf("kill-node pinned to role master hit %v, %v", n, err)
		}
		if n, _, err := env.pickNode(context.Background(), "clock-bump", nodes, rng); err != nil || n.Name != "n3" {
			t.Fatalf("clock-bump pinned to n3 hit %v, %v", n, err)
		}
		if p, err := env.pickProcess("pause-client", []int{0, 1, 2, 3}, rng); err != nil || p != 2 {
			t.Fatalf("pause-client pinned to p2 hit p%d, %v", p, err)
		}
	}
	// Unpinned faults reach every node.
	seen := map[string]bool{}
	for seed := uint64(0); seed < 50; seed++ {
		n, _, _ := env.pickNode(context.Background(), "pause-node", nodes, seeded(seed, 0))
		seen[n.Name] = true
	}
	if len(seen) != 3 {
		t.Errorf("unpinned pause-node hit %v, want all three nodes", seen)
	}
	// A pinned process that is gone: the fault is not applied, never moved
	// to another target.
	if _, err := env.pickProcess("pause-client", []int{0, 1}, seeded(1, 0)); !errors.Is(err, errNotApplied) {
		t.Errorf("pinned process missing: error %v, want not applied", err)
	}
}

func TestClockDirection(t *testing.T) {
	for _, tt := range []struct {
		dir  string
		bump time.Duration
		want func(time.Duration) bool
	}{
		{ClockForward, time.Second, func(d time.Duration) bool { return d == time.Second }},
		{ClockForward, -time.Second, func(d time.Duration) bool { return d == time.Second }},
		{ClockBackward, time.Second, func(d time.Duration) bool { return d == -time.Second }},
		{ClockEither, -time.Second, func(d time.Duration) bool { return d == -time.Second }},
	} {
		env := Env{}.With(ClockBump.Is(tt.bump), ClockDirection.Is(tt.dir))
		for seed := uint64(0); seed < 20; seed++ {
			if d := env.jump(seeded(seed, 0)); !tt.want(d) {
				t.Errorf("direction %q bump %v: jump %v", tt.dir, tt.bump, d)
			}
		}
	}
	both := map[bool]bool{}
	env := Env{}.With(ClockBump.Is(time.Second))
	for seed := uint64(0); seed < 20; seed++ {
		both[env.jump(seeded(seed, 0)) > 0] = true
	}
	if len(both) != 2 {
		t.Error("either direction never jumped both ways in 20 seeds")
	}
}

func TestPinnedRoleIsAskedAtThePick(t *testing.T) {
	nodes := []clusters.Node{{Name: "n1", Role: "leader"}, {Name: "n2", Role: "follower"}, {Name: "n3", Role: "follower"}}
	// The leader moved to n3 since the start, and n2 does not answer.
	cl := &liveCluster{fakeCluster: fakeCluster{nodes: nodes}, roles: map[string]string{"n1": "follower", "n3": "leader"}}
	env := Env{Cluster: cl, Targets: map[string][]string{"kill-node": {"leader"}, "pause-node": {"follower"}}}
	for seed := uint64(0); seed < 10; seed++ {
		n, roles, err := env.pickNode(context.Background(), "kill-node", nodes, seeded(seed, 0))
		if err != nil || n.Name != "n3" {
			t.Fatalf("kill-node pinned to the leader hit %v, %v; the leader is n3 now", n.Name, err)
		}
		if len(roles) != 1 || roles["n3"] != "leader" {
			t.Fatalf("kill-node pinned to the leader recorded roles %v, want n3=leader", roles)
		}
		// n2 does not answer: its role is unknown, so only n1 is a
		// follower now.
		if n, roles, _ := env.pickNode(context.Background(), "pause-node", nodes, seeded(seed, 0)); n.Name != "n1" || roles["n1"] != "follower" {
			t.Fatalf("pause-node pinned to followers hit %s (roles %v), want n1, the one follower that answers", n.Name, roles)
		}
	}
	if nodes[0].Role != "leader" {
		t.Error("pickNode changed its caller's nodes")
	}
	// No node has the pinned role now: nothing is hit, and the error says
	// what each node was.
	env.Targets = map[string][]string{"kill-node": {"observer"}}
	if _, _, err := env.pickNode(context.Background(), "kill-node", nodes, seeded(1, 0)); !errors.Is(err, errNotApplied) ||
		!strings.Contains(err.Error(), "n1=follower n2=? n3=leader") {
		t.Errorf("pin matching no node now: %v, want not applied naming the roles read", err)
	}
}

// A pinned shape puts the pinned nodes where the pin says, for every seed:
// the isolated node, the minority, the bridge, a client's lost nodes.
func TestShapesHonourPins(t *testing.T) {
	clients := []string{"c0", "c1", "c2"}
	for _, tt := range []struct {
		name          string
		shape         string
		nodes         int
		pinned        []string
		pinnedClients []string
		// check returns what is wrong with cuts and the subject, or "".
		check func(nodes []string, cuts []Cut, subject []string) string
	}{
		{name: "isolate one", shape: "isolate", nodes: 3, pinned: []string{"n3"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				return wantAlone(nodes, clients, cuts, "n3", subject)
			}},
		{name: "isolate among two", shape: "isolate", nodes: 5, pinned: []string{"n2", "n4"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				if len(subject) != 1 || (subject[0] != "n2" && subject[0] != "n4") {
					return "isolated " + strings.Join(subject, ",") + ", want n2 or n4"
				}
				return wantAlone(nodes, clients, cuts, subject[0], subject)
			}},
		{name: "halves with one pinned", shape: "halves", nodes: 5, pinned: []string{"n5"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				return wantMinority(nodes, []string{"n5"}, cuts, subject, func(min []string) bool { return slices.Contains(min, "n5") })
			}},
		{name: "halves with the whole minority pinned", shape: "halves", nodes: 5, pinned: []string{"n1", "n4"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				return wantMinority(nodes, []string{"n1", "n4"}, cuts, subject, func(min []string) bool {
					return len(min) == 2 && slices.Contains(min, "n1") && slices.Contains(min, "n4")
				})
			}},
		{name: "halves with more pinned than fit", shape: "halves", nodes: 5, pinned: []string{"n1", "n2", "n3"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				return wantMinority(nodes, []string{"n1", "n2", "n3"}, cuts, subject, func(min []string) bool {
					return len(min) == 2 && !slices.Contains(min, "n4") && !slices.Contains(min, "n5")
				})
			}},
		{name: "bridge", shape: "bridge", nodes: 5, pinned: []string{"n4"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				if !slices.Equal(subject, []string{"n4"}) {
					return "subject " + strings.Join(subject, ",") + ", want n4"
				}
				for _, x := range nodes {
					sees := 0
					for _, y := range nodes {
						if reach(cuts, x, y) {
							sees++
						}
					}
					if (x == "n4") != (sees == len(nodes)) {
						return x + " sees " + strings.Repeat("+", sees) + " nodes; only the bridge n4 may see all"
					}
				}
				return ""
			}},
		{name: "client-isolate pinned client", shape: "client-isolate", nodes: 3, pinnedClients: []string{"c2"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				if len(cuts) != 1 || !slices.Equal(cuts[0].A, []string{"c2"}) || len(cuts[0].B) == 0 {
					return "cuts " + strings.Join(describe(cuts), " ") + ", want c2 cut from some nodes"
				}
				return ""
			}},
		{name: "client-isolate pinned client and nodes", shape: "client-isolate", nodes: 5,
			pinned: []string{"n1", "n3"}, pinnedClients: []string{"c0"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				if got := strings.Join(describe(cuts), " "); got != "c0|n1,n3" || !slices.Equal(subject, []string{"n1", "n3"}) {
					return "cuts " + got + ", subject " + strings.Join(subject, ",") + "; want c0|n1,n3"
				}
				return ""
			}},
		{name: "client-isolate pinned nodes", shape: "client-isolate", nodes: 3, pinned: []string{"n2"},
			check: func(nodes []string, cuts []Cut, subject []string) string {
				if len(cuts) != 1 || !slices.Equal(cuts[0].B, []string{"n2"}) {
					return "cuts " + strings.Join(describe(cuts), " ") + ", want a client cut from n2 alone"
				}
				return ""
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodes := names("n", tt.nodes)
			for seed := uint64(0); seed < 40; seed++ {
				in := shapeIn{nodes: nodes, clients: clients, pinned: tt.pinned, pinnedClients: tt.pinnedClients}
				cuts, subject, err := cutShape(tt.shape, in, seeded(seed, 3))
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if msg := tt.check(nodes, cuts, subject); msg != "" {
					t.Fatalf("seed %d: %s (cuts %v)", seed, msg, describe(cuts))
				}
			}
		})
	}
	// The shapes that take no pins refuse them rather than ignore them.
	for _, shape := range []string{"majorities-ring", "partition"} {
		in := shapeIn{nodes: names("n", 5), clients: clients, groups: [][]string{{"n1"}, {"n2"}}, pinned: []string{"n1"}}
		if _, _, err := cutShape(shape, in, seeded(1, 1)); err == nil {
			t.Errorf("%s with a pinned node: no error", shape)
		}
	}
}

// wantAlone checks that n, and n only, reaches no other host under cuts,
// and that it is the shape's subject.
func wantAlone(nodes, clients []string, cuts []Cut, n string, subject []string) string {
	if !slices.Equal(subject, []string{n}) {
		return "subject " + strings.Join(subject, ",") + ", want " + n
	}
	hosts := append(slices.Clone(nodes), clients...)
	for _, x := range hosts {
		for _, y := range hosts {
			if x != y && reach(cuts, x, y) == (x == n || y == n) {
				return x + "–" + y + " reachability is wrong for " + n + " isolated"
			}
		}
	}
	return ""
}

// wantMinority checks that the first side of a halves cut holds the
// minority of the nodes, that ok accepts them, and that the subject is the
// pinned ones among them.
func wantMinority(nodes, pinned []string, cuts []Cut, subject []string, ok func([]string) bool) string {
	if len(cuts) != 1 {
		return "want one cut"
	}
	var minority, pinnedThere []string
	for _, h := range cuts[0].A {
		if slices.Contains(nodes, h) {
			minority = append(minority, h)
			if slices.Contains(pinned, h) {
				pinnedThere = append(pinnedThere, h)
			}
		}
	}
	if len(minority) != len(nodes)/2 || !slices.Equal(pinnedThere, subject) {
		return "minority " + strings.Join(minority, ",") + " subject " + strings.Join(subject, ",")
	}
	if !ok(minority) {
		return "minority " + strings.Join(minority, ",") + " is not what the pins ask"
	}
	return ""
}

// Every node fault pinned to a role hits the node that has the role when it
// goes in — not the one that had it at the start — and records that role.
func TestNodeFaultsHonourRolePins(t *testing.T) {
	cl := newLiveCluster("n1", "n2", "n3")
	base := Env{Cluster: cl, Net: &fakeNet{}, ClientHosts: []string{"c0", "c1"}, Delayer: &fakeDelayer{}, Clocks: &fakeClocks{}}.With(Window.Is(time.Second), Down.Is(time.Second), Loss.Is(0.5), Delay.Is(time.Millisecond), ClockBump.Is(time.Second), Strobe.Is(time.Millisecond))
	for _, tt := range []struct {
		fault string
		// hit returns the node the injection's value says it hit.
		hit func(targets []string) string
	}{
		{"kill-node", func(ts []string) string { return ts[0] }},
		{"pause-node", func(ts []string) string { return ts[0] }},
		{"clock-bump", func(ts []string) string { return ts[0][:2] }},
		{"clock-strobe", func(ts []string) string { return ts[0][:2] }},
		{"loss", func(ts []string) string { return ts[0][:2] }},
		{"delay", func(ts []string) string { return ts[0][:2] }},
		{"isolate", func(ts []string) string { a, _, _ := strings.Cut(ts[0], "|"); return a }},
		{"bridge", func(ts []string) string {
			a, b, _ := strings.Cut(ts[0], "|")
			for _, n := range []string{"n1", "n2", "n3"} {
				if !strings.Contains(a+","+b, n) {
					return n
				}
			}
			return ""
		}},
		{"halves", func(ts []string) string {
			a, _, _ := strings.Cut(ts[0], "|")
			for _, h := range strings.Split(a, ",") {
				if strings.HasPrefix(h, "n") {
					return h
				}
			}
			return ""
		}},
		{"client-isolate", func(ts []string) string { _, b, _ := strings.Cut(ts[0], "|"); return b }},
	} {
		t.Run(tt.fault, func(t *testing.T) {
			env := base
			env.Targets = map[string][]string{tt.fault: {"leader"}}
			f := buildOne(t, tt.fault, env)
			// The leader moves between injections; each must follow it.
			for i, leader := range []string{"n1", "n3", "n2", "n3"} {
				roles := map[string]string{"n1": "follower", "n2": "follower", "n3": "follower"}
				roles[leader] = "leader"
				cl.setRoles(roles)
				v, err := f.Inject(context.Background(), seeded(uint64(i), 5))
				if err != nil {
					t.Fatalf("inject %d: %v", i, err)
				}
				if got := tt.hit(v.Targets); got != leader {
					t.Errorf("inject %d hit %s (targets %v), the leader is %s", i, got, v.Targets, leader)
				}
				if len(v.Roles) != 1 || v.Roles[leader] != "leader" {
					t.Errorf("inject %d recorded roles %v, want %s=leader", i, v.Roles, leader)
				}
				if _, err := f.Heal(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			// An election is under way: no node is the leader, and the fault
			// goes nowhere else.
			cl.setRoles(map[string]string{"n1": "follower", "n2": "follower"})
			if _, err := f.Inject(context.Background(), testRng()); err == nil || !strings.Contains(err.Error(), "n3=?") {
				t.Errorf("with no leader: %v, want not applied, naming n3's role as unknown", err)
			}
			f.Heal(context.Background())
		})
	}
}

// Pins a fault cannot honour are refused before the run: by ParseTargets
// where the fault alone says so, by Build where it takes the cluster.
func TestUnsupportedPinsAreRefused(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{"partition=n1", "partition takes no target: its groups are given whole by --partition"},
		{"majorities-ring=leader", "majorities-ring takes no target"},
		{"clock-reset=n2", "clock-reset takes no target: it resets every node's clock"},
		{"kill-node=p0", "kill-node hits nodes (by name or role), not worker processes like p0"},
		{"isolate=c1", "not client hosts like c1 (client-isolate and reply-loss cut a client host)"},
		{"pause-client=n1", `pause-client hits worker processes, named p0, p1, ...; "n1" is not one`},
		{"clock-skew-client=leader", `"leader" is not one`},
		{"client-isolate=p2", "p2 is a worker process, not a host"},
		{"isolate=leader;partition=n1,n2", "partition=n1,n2: partition takes no target"},
	} {
		if _, err := ParseTargets(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTargets(%q) = %v, want an error saying %q", tt.in, err, tt.want)
		}
	}
	for _, ok := range []string{"isolate=leader", "client-isolate=c0,n2", "kill-node=master;pause-client=p1", "halves=n1,n2;bridge=follower"} {
		if _, err := ParseTargets(ok); err != nil {
			t.Errorf("ParseTargets(%q): %v", ok, err)
		}
	}

	plain := &fakeCluster{nodes: nodes("n1", "n2", "n3")}
	sentinel := &targetCluster{fakeCluster: fakeCluster{nodes: []clusters.Node{
		{Name: "n1", Role: "master"}, {Name: "n2", Role: "replica"}, {Name: "s1", Role: "sentinel"}}}}
	leaders := newLiveCluster("n1", "n2", "n3")
	for _, tt := range []struct {
		name    string
		cluster clusters.Cluster
		fault   string
		pins    []string
		want    string // "" means accepted
	}{
		{"unknown node", plain, "isolate", []string{"n9"}, `isolate hits nodes n1, n2, n3 by name (no node of this backend has a role); "n9" is neither`},
		{"role of a backend without roles", plain, "kill-node", []string{"leader"}, `"leader" is neither`},
		{"role the backend never has", leaders, "loss", []string{"master"}, `loss hits nodes n1, n2, n3 (by name) or the roles follower, leader; "master" is neither`},
		{"a sentinel for kill-node", sentinel, "kill-node", []string{"s1"}, `kill-node hits nodes n1, n2 (by name) or the roles master, replica; "s1" is neither`},
		{"the sentinel role for kill-node", sentinel, "kill-node", []string{"sentinel"}, `"sentinel" is neither`},
		{"a client host the run lacks", plain, "client-isolate", []string{"c7"}, "the run's client hosts are c0, c1; c7 is not one of them"},
		{"a worker the run lacks", plain, "pause-client", []string{"p9"}, "the run starts workers p0, p1; p9 is not one of them"},
		{"a wrong kind in the run", plain, "partition", []string{"n1"}, "partition takes no target"},
		{"leader", leaders, "isolate", []string{"leader"}, ""},
		{"sentinel clock", sentinel, "clock-bump", []string{"sentinel"}, ""},
		{"master by its start role", sentinel, "kill-node", []string{"master"}, ""},
		{"client and role", leaders, "client-isolate", []string{"c1", "follower"}, ""},
		{"worker", plain, "kill-client", []string{"p1"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			targets := map[string][]string{tt.fault: tt.pins}
			env := Env{Cluster: tt.cluster, Clients: &fakeClients{procs: []int{0, 1}}, ClientHosts: []string{"c0", "c1"}, Targets: targets}
			_, err := Build([]string{tt.fault}, env)
			if errors.Is(err, ErrUnavailable) {
				err = nil // the pins passed; the fakes lack what the fault needs
			}
			// The check before anything starts says the same.
			if early := CheckTargets(targets, tt.cluster, 2); fmt.Sprint(early) != strings.TrimPrefix(fmt.Sprint(err), "--target ") {
				t.Errorf("CheckTargets = %v, Build = %v", early, err)
			}
			if tt.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("checkPins = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	// Build refuses a bad pin even for a fault the platform cannot apply,
	// and says which fault and pin.
	env := Env{Cluster: plain, NetReason: "not root", Targets: map[string][]string{"isolate": {"n9"}}}.With(Window.Is(time.Second))
	if _, err := Build([]string{"kill-node+isolate"}, env); err == nil || !strings.HasPrefix(err.Error(), "--target isolate=n9: ") {
		t.Errorf("Build with isolate=n9: %v, want a --target error", err)
	}
}
